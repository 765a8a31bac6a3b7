#include "interpreter/repl/workspace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "interpreter/base/render.h"
#include "interpreter/check/evaluator.h"
#include "interpreter/check/schema.h"
#include "interpreter/report/estimate_report.h"
#include "interpreter/report/plan_report.h"
#include "interpreter/syntax/parser.h"

namespace ipu::repl {

namespace fs = std::filesystem;
using base::Style;

namespace {

struct Parsed {
  base::SourceMap sources;
  base::Diagnostics diags;
  std::unique_ptr<syntax::Program> program;
};

std::unique_ptr<Parsed> parseText(const std::string& name, const std::string& text) {
  auto p = std::make_unique<Parsed>();
  base::FileId f = p->sources.add(name, text);
  p->program = syntax::parse(p->sources, f, p->diags);
  return p;
}

std::string renderAll(const base::Diagnostics& diags, const base::SourceMap& sources, const base::Painter& painter) {
  std::ostringstream os;
  for (const auto& d : diags.all()) base::renderHuman(os, d, sources, painter);
  return os.str();
}

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

Workspace::Workspace(std::string directory) : directory_(std::move(directory)) {
  if (directory_.empty()) directory_ = ".";
}

std::string Workspace::text() const {
  std::string out;
  for (const auto& e : entries_) out += e.text + "\n\n";
  return out;
}

Workspace::Checked Workspace::compose(const std::vector<Entry>& entries, const std::string& extra,
                                      const std::string& input) const {
  Checked c;
  c.session = std::make_unique<session::Session>();
  std::string text;
  for (const auto& e : entries) text += e.text + "\n\n";
  text += extra;
  if (!extra.empty() && extra.back() != '\n') text += "\n";
  c.inputStart = text.size();
  c.input = input;
  text += input + "\n";
  c.root = c.session->addSource((fs::path(directory_) / "repl.ipu").string(), text);
  return c;
}

// Diagnostics about the typed input are shown against it alone; those about
// earlier definitions against the workspace, named `<session>`.
std::string Workspace::render(const Checked& c, const base::Painter& painter) const {
  return renderDiagnostics(*c.session, c.root, c.inputStart, c.input, painter);
}

std::string Workspace::diagnostics(const Planned& p, const base::Painter& painter) {
  if (p.session == nullptr) return {};
  return renderDiagnostics(*p.session, p.root, p.inputStart, "", painter);
}

std::string Workspace::renderDiagnostics(session::Session& session, base::FileId root, std::size_t inputStart,
                                         const std::string& inputText, const base::Painter& painter) {
  struct {
    base::FileId root;
    std::size_t inputStart;
    const std::string& input;
  } c{root, inputStart, inputText};
  const base::SourceMap& original = session.sources();
  base::SourceMap shown;
  for (base::FileId id = 0; id < original.size(); ++id) {
    const base::SourceFile& f = original.file(id);
    if (id == c.root) shown.add("<session>", f.text().substr(0, c.inputStart));
    else shown.add(f.path(), f.text());
  }
  base::FileId input = shown.add("<input>", c.input);
  auto map = [&](base::Span s) {
    if (s.file == c.root && s.begin >= c.inputStart) {
      s.file = input;
      s.begin -= static_cast<std::uint32_t>(c.inputStart);
      s.end = std::min<std::uint32_t>(s.end - static_cast<std::uint32_t>(c.inputStart),
                                      static_cast<std::uint32_t>(c.input.size()));
      s.end = std::max(s.end, s.begin);
    } else if (s.file == c.root) {
      s.end = std::min<std::uint32_t>(s.end, static_cast<std::uint32_t>(c.inputStart));
    }
    return s;
  };
  std::ostringstream os;
  for (base::Diagnostic d : session.diagnostics().all()) {
    d.span = map(d.span);
    for (auto& n : d.notes) n.span = map(n.span);
    base::renderHuman(os, d, shown, painter);
  }
  return os.str();
}

const check::Value* Workspace::lookup(Checked& c, const std::string& name) const {
  check::Checker* ch = c.session->checker();
  if (ch == nullptr || ch->root() == nullptr) return nullptr;
  auto& scope = ch->evaluator().scopeOf(*ch->root());
  return scope.lookup(name, ch->evaluator(), {});
}

void Workspace::refreshNames(Checked& c) {
  check::Checker* ch = c.session->checker();
  if (ch == nullptr || ch->root() == nullptr) return;
  std::vector<std::string> names;
  ch->evaluator().scopeOf(*ch->root()).collectNames(names, ch->evaluator());
  names.erase(std::remove_if(names.begin(), names.end(), [](const std::string& n) { return n.rfind("__", 0) == 0; }),
              names.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  names_ = std::move(names);
}

Reply Workspace::submit(const std::string& input, const base::Painter& painter) {
  if (trim(input).empty()) return {};
  auto parsed = parseText("<input>", input);
  if (parsed->program) {
    std::vector<Entry> items;
    for (const auto& item : parsed->program->items) {
      Entry e;
      e.text = input.substr(item->span.begin, item->span.end - item->span.begin);
      if (const auto* d = item->dyn<syntax::Declaration>()) {
        e.key = d->name;
        e.kind = syntax::spelling(d->declKind);
      } else if (const auto* l = item->dyn<syntax::LetItem>()) {
        e.key = l->name;
        e.kind = "let";
      } else if (const auto* i = item->dyn<syntax::ImportItem>()) {
        e.key = "import " + i->path + (i->alias.empty() ? "" : " as " + i->alias);
        e.kind = "import";
      } else if (const auto* r = item->dyn<syntax::RunItem>()) {
        e.key = "run " + r->name;
        e.kind = "run";
      }
      items.push_back(std::move(e));
    }
    return definitions(input, items, painter);
  }
  // Not items: perhaps an expression, whose value the user wants to see.
  {
    base::SourceMap sources;
    base::Diagnostics diags;
    if (syntax::parseValue(sources, sources.add("<input>", input), diags)) return expression(input, painter, false);
    // Not a declaration from its first token on: the user typed an
    // expression, so what is wrong with it as one (a bad escape, an unclosed
    // bracket) is the answer, as `ipu check` would give it, rather than
    // "expected a declaration".
    const auto& declarationErrors = parsed->diags.all();
    const std::size_t first = input.find_first_not_of(" \t\r\n");
    if (diags.hasErrors() && !declarationErrors.empty() && declarationErrors.front().code == "IPU0001" &&
        declarationErrors.front().span.begin == first) {
      Reply r;
      r.ok = false;
      r.errors = renderAll(diags, sources, painter);
      return r;
    }
  }
  Reply r;
  r.ok = false;
  r.errors = renderAll(parsed->diags, parsed->sources, painter);
  return r;
}

Reply Workspace::definitions(const std::string& input, const std::vector<Entry>& items, const base::Painter& painter) {
  Reply r;
  std::vector<Entry> kept;
  for (const auto& e : entries_)
    if (std::none_of(items.begin(), items.end(), [&](const Entry& n) { return n.key == e.key; })) kept.push_back(e);
  Checked c = compose(kept, "", input);
  c.session->check(c.root);
  r.errors = render(c, painter);
  if (c.session->diagnostics().hasErrors()) {
    r.ok = false;
    return r;
  }
  std::ostringstream out;
  for (const auto& item : items) {
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == item.key; });
    const bool replaced = it != entries_.end();
    if (replaced) *it = item;
    else entries_.push_back(item);
    if (item.kind == "import" || item.kind == "run") out << painter.paint(Style::Dim, item.key) << "\n";
    else
      out << painter.paint(Style::Dim, std::string(replaced ? "replaced " : "defined ") + item.kind + " ") << item.key
          << "\n";
  }
  r.out = out.str();
  refreshNames(c);
  return r;
}

namespace {
// 335,141,930 (335.1M): exact, and readable at a glance.
std::string parameterCount(double n) {
  if (!(n >= 0) || n > 1e18) return check::formatNumber(n);
  std::string digits = std::to_string(static_cast<long long>(n + 0.5)), grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  char shortForm[32] = "";
  if (n >= 1e9) std::snprintf(shortForm, sizeof shortForm, " (%.2fB)", n / 1e9);
  else if (n >= 1e6) std::snprintf(shortForm, sizeof shortForm, " (%.1fM)", n / 1e6);
  return grouped + shortForm;
}
}  // namespace

std::shared_ptr<const session::Snapshot> Workspace::snapshot() const {
  session::Session s;
  const std::string path = (fs::path(directory_) / "repl.ipu").string();
  s.update(path, text());
  return s.snapshot(path);
}

// The evaluation's diagnostics as every other diagnostic of the REPL: those
// about the workspace against `<session>`, those about the input against it.
static std::string renderEvaluation(const session::Snapshot& snap, const session::Snapshot::Evaluation& e,
                                    const base::Painter& painter) {
  base::SourceMap shown;
  for (base::FileId id = 0; id < e.sources.size(); ++id) {
    const base::SourceFile& f = e.sources.file(id);
    shown.add(f.path() == snap.rootPath() ? "<session>" : f.path(), f.text());
  }
  std::ostringstream os;
  for (const auto& d : e.diagnostics.all()) base::renderHuman(os, d, shown, painter);
  return os.str();
}

std::string Workspace::show(const session::Snapshot::Evaluation& e) const {
  using check::ValueKind;
  const check::Value& v = *e.value;
  std::ostringstream os;
  switch (v.kind) {
    case ValueKind::Record: {
      const auto& rec = *v.record;
      os << (rec.kind.empty() ? std::string() : rec.kind + " ") << (rec.name.empty() ? "" : rec.name + " ") << "{\n";
      for (const auto& f : rec.fields) os << "  " << f.name << ": " << f.value.show() << "\n";
      for (const auto& ph : rec.phases) os << "  phase " << ph.name << (ph.from.empty() ? "" : " from " + ph.from) << " { ... }\n";
      os << "}";
      return os.str();
    }
    case ValueKind::Model: {
      os << v.show();
      if (e.layers && e.params)
        os << ": " << check::formatNumber(*e.layers) << " layers, " << parameterCount(*e.params) << " parameters";
      return os.str();
    }
    default: return v.show();
  }
}

// The expression is evaluated in the workspace's scope, as a file of its own:
// nothing is added to the workspace's text.
Reply Workspace::expression(const std::string& input, const base::Painter& painter, bool typeOnly) {
  Reply r;
  auto snap = snapshot();
  if (snap == nullptr) return {false, "", "ipu repl: the session cannot be checked\n"};
  session::Snapshot::Evaluation e = snap->evaluate(input);
  r.errors = renderEvaluation(*snap, e, painter);
  if (e.diagnostics.hasErrors()) {
    r.ok = false;
    return r;
  }
  if (!e.value) {
    r.ok = false;
    r.errors += "ipu repl: the expression has no value\n";
    return r;
  }
  r.out = (typeOnly ? e.type : show(e)) + "\n";
  return r;
}

Reply Workspace::typeOf(const std::string& expr, const base::Painter& painter) {
  if (trim(expr).empty()) return {false, "", "usage: :type EXPRESSION\n"};
  // A declaration is not an expression: say so rather than show a parse error.
  if (auto parsed = parseText("<input>", expr); parsed->program && !parsed->program->items.empty()) {
    const syntax::Item& first = *parsed->program->items.front();
    std::string name;
    if (const auto* d = first.dyn<syntax::Declaration>()) name = d->name;
    else if (const auto* l = first.dyn<syntax::LetItem>()) name = l->name;
    return {false, "", "`:type` takes an expression, not a declaration" +
                           (name.empty() ? std::string() : "; declare it, then `:type " + name + "`") + "\n"};
  }
  return expression(expr, painter, true);
}

Reply Workspace::load(const std::string& path, const base::Painter& painter) {
  base::FileText file = base::readSourceFile(path);
  if (file.status != base::FileText::Status::Ok) {
    std::string why = file.status == base::FileText::Status::TooLarge ? "larger than 8 MiB" : file.problem;
    return {false, "", "ipu repl: cannot read `" + path + "`: " + why + "\n"};
  }
  // Relative imports and Lua files of the script resolve from its own directory.
  std::string text = file.text;
  auto parsed = parseText(path, text);
  if (!parsed->program) return {false, "", renderAll(parsed->diags, parsed->sources, painter)};
  fs::path dir = fs::absolute(fs::path(path)).parent_path();
  std::vector<std::pair<base::Span, std::string>> rewrites;
  for (const auto& item : parsed->program->items)
    if (const auto* i = item->dyn<syntax::ImportItem>())
      if (i->path.rfind("std/", 0) != 0 && !fs::path(i->path).is_absolute())
        rewrites.emplace_back(i->pathSpan, (dir / i->path).lexically_normal().string());
  std::sort(rewrites.begin(), rewrites.end(), [](const auto& a, const auto& b) { return a.first.begin > b.first.begin; });
  for (const auto& [span, absolute] : rewrites) {
    std::string quoted = "\"";
    for (char ch : absolute) quoted += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
    text.replace(span.begin, span.end - span.begin, quoted + "\"");
  }
  Reply r = submit(text, painter);
  if (r.ok) r.out = "loaded " + path + "\n" + r.out;
  return r;
}

Reply Workspace::doc(const std::string& nameIn, const base::Painter& painter) {
  const std::string name = trim(nameIn);
  if (name.empty()) return {false, "", "usage: :doc NAME (a declaration, a kind such as `mapping`, or `kind.field`)\n"};
  std::ostringstream os;
  auto fieldLine = [&](const check::Field& f) {
    std::string dflt = f.required ? "required" : !f.defaultDoc.empty() ? f.defaultDoc : f.dflt.isUnknown() ? "none" : f.dflt.show();
    os << "  " << painter.paint(Style::Bold, f.name) << "  " << f.type.name() << "; " << dflt << "\n      " << f.doc << "\n";
  };
  if (const check::Schema* s = check::schemaFor(name)) {
    os << "`" << name << "` fields:\n";
    for (const auto& f : s->fields) fieldLine(f);
    return {true, os.str(), ""};
  }
  if (auto dot = name.find('.'); dot != std::string::npos)
    if (const check::Schema* s = check::schemaFor(name.substr(0, dot))) {
      if (const check::Field* f = s->find(name.substr(dot + 1))) {
        fieldLine(*f);
        return {true, os.str(), ""};
      }
      return {false, "", "`" + name.substr(0, dot) + "` has no field `" + name.substr(dot + 1) + "`; " +
                             base::didYouMean(name.substr(dot + 1), s->names()) + "\n"};
    }
  auto snap = snapshot();
  if (snap != nullptr) {
    auto at = snap->definitionOfName(snap->rootPath(), name);
    // An import's alias names a module, not an item to show.
    if (at && (at->kind == session::NodeKind::Let || at->kind == session::NodeKind::Declaration)) {
      const base::Span item = at->declaration;
      const base::SourceFile& f = snap->sources().file(item.file);
      base::LineCol lc = f.lineCol(item.begin);
      const bool here = f.path() == snap->rootPath();
      os << painter.paint(Style::Dim, here ? std::string("declared in this session")
                                           : "declared in " + f.path() + ":" + std::to_string(lc.line))
         << "\n";
      // The comment block just above it says what it is.
      std::vector<std::string> comment;
      for (std::uint32_t l = lc.line; l > 1; --l) {
        std::string line = trim(std::string(f.lineText(l - 1)));
        if (line.rfind("//", 0) != 0) break;
        comment.insert(comment.begin(), line);
      }
      for (const auto& l : comment) os << painter.paint(Style::Dim, l) << "\n";
      std::string text = f.text().substr(item.begin, item.end - item.begin);
      std::istringstream lines(text);
      std::string line;
      int n = 0;
      while (std::getline(lines, line)) {
        if (++n > 20) {
          os << "  ...\n";
          break;
        }
        os << line << "\n";
      }
      return {true, os.str(), ""};
    }
    // Not declared by the script: a built-in, or an import's alias (what
    // the name means as an expression; one that means nothing is not here).
    session::Snapshot::Evaluation e = snap->evaluate(name);
    if (e.value && !e.diagnostics.hasErrors()) {
      if (e.value->kind == check::ValueKind::Builtin)
        return {true, "built-in function `" + name + "` (docs/language.md, section 4)\n", ""};
      return {true, e.type + "\n", ""};
    }
  }
  const auto& kw = syntax::keywords();
  if (std::find(kw.begin(), kw.end(), name) != kw.end())
    return {true, "`" + name + "` is a keyword of the language (docs/language.md)\n", ""};
  std::string help = base::didYouMean(name, names_);
  return {false, "", "nothing is named `" + name + "`" + (help.empty() ? "" : "; " + help) + "\n"};
}

Workspace::Planned Workspace::planFor(const std::string& nameIn, const base::Painter& painter, bool estimate,
                                        session::Purpose purpose) {
  Planned p;
  const std::string name = trim(nameIn);
  if (name.empty()) {
    p.reply = {false, "", "name a training (or a mapping to try with the last training)\n"};
    return p;
  }
  std::vector<Entry> noRuns;
  for (const auto& e : entries_)
    if (e.kind != "run") noRuns.push_back(e);
  Checked probe = compose(noRuns, "", "");
  const check::CheckedProgram* program = probe.session->check(probe.root);
  const check::Value* v = lookup(probe, name);
  std::string extra;
  if (v != nullptr && v->kind == check::ValueKind::Record && v->record->kind == "training") {
    extra = "run " + name + "\n";
    p.description = "training `" + name + "`";
  } else if (v != nullptr && v->kind == check::ValueKind::Record && v->record->kind == "mapping") {
    auto last = std::find_if(entries_.rbegin(), entries_.rend(), [](const Entry& e) { return e.kind == "training"; });
    if (last == entries_.rend()) {
      p.reply = {false, "", "there is no training to try mapping `" + name +
                                "` with: declare one (`training t { mapping: " + name + ", phase ... }`)\n"};
      return p;
    }
    // The training's own mapping: plan the training itself, under its own name.
    bool own = false;
    if (const check::Value* t = lookup(probe, last->key); t != nullptr && t->kind == check::ValueKind::Record)
      for (const auto& f : t->record->fields)
        if (f.name == "mapping" && f.value.kind == check::ValueKind::Record && f.value.record->name == name) own = true;
    if (own) {
      extra = "run " + last->key + "\n";
      p.description = "training `" + last->key + "` (its own mapping `" + name + "`)";
    } else {
      // The last training with another mapping: that mapping as a mapping
      // value in place of each phase's own (Session::planRunWith), with no
      // script text written to ask.
      p.description = "training `" + last->key + "` with mapping `" + name + "`";
      const check::MappingSpec* mapping = nullptr;
      std::size_t run = 0;
      bool found = false;
      for (std::size_t i = 0; program != nullptr && i < program->mappings.size(); ++i)
        if (program->mappings[i]->name == name) mapping = program->mappings[i].get();
      for (std::size_t i = 0; program != nullptr && i < program->runs.size(); ++i)
        if (program->runs[i].name == last->key) run = i, found = true;
      if (mapping == nullptr || !found) {
        p.reply = {false, "", render(probe, painter) + "training `" + last->key + "` or mapping `" + name + "` does not check\n"};
        return p;
      }
      session::Session::PlannedRun planned = probe.session->planRunWith(*mapping, run);
      probe.session->diagnostics().append(planned.diagnostics);
      if (planned.ok) {
        planned.run.name = last->key + "_with_" + name;  // the run's name in run directories and the store
        p.variantPlan = std::make_unique<ir::ExecutionPlan>();
        p.variantPlan->runs.push_back(std::move(planned.run));
        p.plan = p.variantPlan.get();
        if (estimate) p.estimate = probe.session->estimatePlan(*p.plan);
      }
      p.reply.errors = render(probe, painter);
      p.root = probe.root;
      p.inputStart = probe.inputStart;
      p.reply.ok = p.plan != nullptr && !probe.session->diagnostics().hasErrors() && (!estimate || p.estimate != nullptr);
      p.session = std::move(probe.session);
      return p;
    }
  } else if (v == nullptr) {
    std::string help = base::didYouMean(name, names_);
    p.reply = {false, "", "nothing is named `" + name + "`" + (help.empty() ? "" : "; " + help) + "\n"};
    return p;
  } else {
    p.reply = {false, "", "`" + name + "` is " + v->describe() + "; name a training or a mapping\n"};
    return p;
  }
  Checked c = compose(noRuns, extra, "");
  c.session->setPurpose(purpose);
  if (estimate) {
    p.estimate = c.session->estimate(c.root);
    p.plan = c.session->lastPlan();
  } else {
    p.plan = c.session->plan(c.root, true);
  }
  p.reply.errors = render(c, painter);
  p.root = c.root;
  p.inputStart = c.inputStart;
  p.reply.ok = p.plan != nullptr && !c.session->diagnostics().hasErrors();
  p.session = std::move(c.session);
  return p;
}

Reply Workspace::report(const std::string& name, Report kind, const base::Painter& painter) {
  Planned p = planFor(name, painter, kind == Report::Estimate);
  Reply r = p.reply;
  if (p.plan == nullptr) return r;
  std::ostringstream os;
  if (kind == Report::Estimate) {
    if (p.estimate != nullptr) report::printEstimateReport(os, *p.plan, *p.estimate, painter);
  } else {
    report::printPlanReport(os, *p.plan, painter, kind == Report::Memory);
  }
  r.out = painter.paint(Style::Dim, p.description) + "\n" + os.str();
  return r;
}

}  // namespace ipu::repl
