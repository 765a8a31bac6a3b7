#include "interpreter/search/script_edit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "interpreter/base/diagnostic.h"
#include "interpreter/plan/planner.h"
#include "interpreter/syntax/ast.h"
#include "interpreter/syntax/parser.h"
#include "runtime/base/invariant.h"
#include "runtime/ir/mapping_fields.h"

namespace ipu::search {

namespace {

bool same(const base::Span& a, const base::Span& b) { return a.file == b.file && a.begin == b.begin && a.end == b.end; }

// 65536 as 65,536, as the search's report writes figures.
std::string grouped(long long v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (v < 0 ? "-" : "") + out;
}

// One change of the text: [begin, end) replaced by `text` (an insertion when
// begin == end). Insertions at one place keep the order they were made in.
struct Edit {
  std::uint32_t begin = 0, end = 0;
  std::string text;
  std::size_t order = 0;
};

// A phase as written: its member, and the training declaration it is in.
struct PhaseSite {
  const syntax::PhaseMember* member = nullptr;
  const syntax::Declaration* training = nullptr;
};

void phasesOf(const syntax::Block& block, const syntax::Declaration& training, std::vector<PhaseSite>& out) {
  for (const auto& m : block.members)
    if (const auto* p = m->dyn<syntax::PhaseMember>()) out.push_back({p, &training});
}

// `training t2 = t with { phase one { ... } }`: the phases refined in a variant.
void phasesOf(const syntax::Expr& e, const syntax::Declaration& training, std::vector<PhaseSite>& out) {
  if (const auto* w = e.dyn<syntax::WithExpr>()) {
    phasesOf(*w->base, training, out);
    if (w->block) phasesOf(*w->block, training, out);
  } else if (const auto* r = e.dyn<syntax::RecordExpr>()) {
    if (r->block) phasesOf(*r->block, training, out);
  }
}

const syntax::FieldMember* fieldOf(const syntax::Block& block, const std::string& name) {
  for (const auto& m : block.members)
    if (const auto* f = m->dyn<syntax::FieldMember>(); f != nullptr && f->name == name) return f;
  return nullptr;
}

class Text {
 public:
  Text(const std::string& text, const std::vector<syntax::Comment>& comments) : text_(text), comments_(comments) {}

  std::uint32_t lineStart(std::uint32_t at) const {
    while (at > 0 && text_[at - 1] != '\n') --at;
    return at;
  }
  // The end of the line `at` is on (its newline, or the end of the text).
  std::uint32_t lineEnd(std::uint32_t at) const {
    while (at < text_.size() && text_[at] != '\n') ++at;
    return at;
  }
  std::string indentOf(std::uint32_t at) const {
    std::uint32_t s = lineStart(at), e = s;
    while (e < at && (text_[e] == ' ' || text_[e] == '\t')) ++e;
    return text_.substr(s, e - s);
  }
  std::string of(const base::Span& s) const { return text_.substr(s.begin, s.end - s.begin); }
  // A place inside a comment cannot take new text (a `/* */` over several lines).
  bool inComment(std::uint32_t at) const {
    for (const auto& c : comments_)
      if (c.span.begin < at && at < c.span.end) return true;
    return false;
  }
  bool newlineBetween(std::uint32_t a, std::uint32_t b) const {
    for (std::uint32_t i = a; i < b && i < text_.size(); ++i)
      if (text_[i] == '\n') return true;
    return false;
  }
  const std::string& text() const { return text_; }

 private:
  const std::string& text_;
  const std::vector<syntax::Comment>& comments_;
};

// `fields` ("name: value") added to a block: each on its own line after the
// opening brace when the block spans lines, else before its first member.
void addFields(const Text& t, const syntax::Block& block, const std::vector<std::string>& fields, std::vector<Edit>& edits,
               std::size_t& order) {
  if (fields.empty()) return;
  const std::uint32_t open = block.span.begin;  // the `{`
  if (block.members.empty()) {
    std::string s;
    for (const auto& f : fields) s += (s.empty() ? " " : ", ") + f;
    edits.push_back({open + 1, open + 1, s + " ", order++});
    return;
  }
  const std::uint32_t first = block.members.front()->span.begin;
  const std::uint32_t next = t.lineEnd(open) + 1;  // the line after the `{`
  if (t.newlineBetween(open, first) && next <= first && !t.inComment(next - 1)) {
    const std::string indent = t.indentOf(first);
    std::string s;
    for (const auto& f : fields) s += indent + f + "\n";
    edits.push_back({next, next, s, order++});
    return;
  }
  std::string s;
  for (const auto& f : fields) s += f + ", ";
  edits.push_back({first, first, s, order++});
}

// The found mapping's block: the pipeline as explicit stages, then every
// setting that is not its default, through the table of mapping fields.
std::string mappingBody(const check::PhaseSpec& phase, const Candidate& c) {
  std::string s;
  auto line = [&](const std::string& text) { s += "  " + text + "\n"; };
  if (c.pipeline > 1) {
    line("pipeline {");
    for (const auto& [ipu, layers] : c.stages) line("  ipu " + std::to_string(ipu) + ": " + phase.model->structure->describe(layers));
    line("}");
  }
  for (const auto& text : ir::settingLines(mappingOf(phase, c).mapping)) line(text);
  return s;
}

// The candidate is the phase's own mapping, as written: the same settings,
// placement and micro batch (the search may list it under another split
// when it ties with yours, as it does once --apply has written it).
bool isDeclared(const check::PhaseSpec& phase, const Candidate& c, const base::SourceMap& sources) {
  const check::MappingSpec& m = *phase.mapping;
  if (m.search) return false;  // the block's answer is not written in the script
  if (c.split == Split::Declared) return true;
  if (m.pipelineKind == check::MappingSpec::PipelineKind::Lua || c.microBatch != phase.batch.microBatch ||
      ir::settingLines(mappingOf(phase, c).mapping) != ir::settingLines(m.mapping))
    return false;
  if (c.pipeline <= 1 || std::max(1, m.pipelineIpus) <= 1) return c.pipeline <= 1 && std::max(1, m.pipelineIpus) <= 1;
  const ir::PhasePlan plan = plan::planPhase(phase, m, m.mapping, sources, nullptr);
  std::vector<std::pair<int, std::vector<int>>> stages;
  for (const auto& s : plan.stages) stages.emplace_back(s.ipu, s.layers);
  return stages == c.stages;
}

// The phase's batch with the candidate's micro batch and accumulation, in the
// fields it was derived from: the global batch stays what it was.
struct BatchFields {
  bool microBatch = false, gradientAccumulation = false;
};
BatchFields batchFieldsOf(ir::DerivedBatch derived) {
  switch (derived) {
    case ir::DerivedBatch::GlobalBatch: return {true, true};
    case ir::DerivedBatch::GradientAccumulation: return {true, false};
    case ir::DerivedBatch::MicroBatch: return {false, true};
    case ir::DerivedBatch::None: return {true, true};
  }
  return {true, true};
}

}  // namespace

ScriptEdit putFoundMappings(const base::SourceMap& sources, base::FileId root, const check::CheckedProgram& program,
                            const std::vector<FoundMapping>& found) {
  ScriptEdit out;
  base::Diagnostics scratch;
  std::unique_ptr<syntax::Program> tree = syntax::parse(sources, root, scratch);
  const base::SourceFile& file = sources.file(root);
  if (!tree) {
    out.problem = "`" + file.path() + "` does not parse";
    return out;
  }
  const Text t(file.text(), tree->comments);

  // Where phases and mappings are written, and the names a new mapping must not take.
  std::vector<PhaseSite> sites;
  std::set<std::string> taken;
  const syntax::ImportItem* lastImport = nullptr;
  for (const auto& item : tree->items) {
    if (const auto* d = item->dyn<syntax::Declaration>()) {
      taken.insert(d->name);
      if (d->declKind == syntax::DeclKind::Training) {
        if (d->body) phasesOf(*d->body, *d, sites);
        if (d->value) phasesOf(*d->value, *d, sites);
      }
    } else if (const auto* l = item->dyn<syntax::LetItem>()) {
      taken.insert(l->name);
    } else if (const auto* i = item->dyn<syntax::ImportItem>()) {
      if (!i->alias.empty()) taken.insert(i->alias);
      lastImport = i;
    }
  }
  for (const auto& m : program.mappings)
    if (m) taken.insert(m->name);
  auto declarationOf = [&](const check::MappingSpec& m) -> const syntax::Declaration* {
    for (const auto& item : tree->items)
      if (const auto* d = item->dyn<syntax::Declaration>();
          d != nullptr && d->declKind == syntax::DeclKind::Mapping && same(d->nameSpan, m.span))
        return d;
    return nullptr;
  };

  // Each phase's written form, grouped by the mapping it used (its name and
  // where it is declared: a searched mapping's phases each hold their own copy).
  struct Phase {
    const FoundMapping* found = nullptr;
    PhaseSite site;
    std::string body;  // empty: the phase keeps its own mapping
    std::size_t group = 0;
  };
  struct Group {
    const check::MappingSpec* mapping = nullptr;
    std::vector<std::string> bodies;  // distinct, in the order found
    std::vector<std::string> names;   // of the new mappings, one per body
    std::vector<std::string> notes;   // the comment above each: a line per phase
  };
  std::vector<Phase> phases;
  std::vector<Group> groups;
  std::map<std::tuple<std::string, base::FileId, std::uint32_t>, std::size_t> groupOf;
  for (const auto& f : found) {
    const check::PhaseSpec& ph = f.written != nullptr ? *f.written : *f.phase;
    const check::MappingSpec& m = *ph.mapping;
    Phase p;
    p.found = &f;
    for (const auto& s : sites)
      if (same(s.member->span, ph.span)) p.site = s;
    if (p.site.member == nullptr) {
      const std::string where = ph.span.valid() ? sources.file(ph.span.file).path() : std::string("another module");
      out.problem = "phase `" + ph.name + "` of `" + f.run + "` is written in `" + where + "`, not in `" + file.path() +
                    "`: only the script's own phases can be written (search that file instead)";
      return out;
    }
    if (f.candidate.pipeline > 1 && ph.model->structure == nullptr) {
      out.problem = "the layers of `" + ph.model->name + "` cannot be named, so its pipeline cannot be written";
      return out;
    }
    const bool keep = isDeclared(ph, f.candidate, sources);
    if (!keep) {
      p.body = mappingBody(*f.phase, f.candidate);
      auto key = std::make_tuple(m.name, m.span.file, m.span.begin);
      auto it = groupOf.find(key);
      if (it == groupOf.end()) {
        it = groupOf.emplace(key, groups.size()).first;
        groups.push_back({&m, {}, {}, {}});
      }
      p.group = it->second;
      Group& g = groups[p.group];
      if (std::find(g.bodies.begin(), g.bodies.end(), p.body) == g.bodies.end()) g.bodies.push_back(p.body);
    }
    phases.push_back(std::move(p));
  }

  // Names: `M_searched`, or `M_searched_PHASE` when M's phases were given
  // different mappings; never one the script (or a module it imports) uses.
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    const std::string base = (g.mapping->name.empty() ? std::string("mapping") : g.mapping->name) + "_searched";
    for (const auto& body : g.bodies) {
      std::string stem, note;
      for (const auto& p : phases) {
        if (p.body.empty() || p.group != gi || p.body != body) continue;
        if (stem.empty()) stem = g.bodies.size() > 1 ? base + "_" + p.found->phase->name : base;
        note += "// Found by `ipu search` for phase `" + p.found->phase->name + "` of `" + p.found->run + "` (" +
                grouped(std::llround(p.found->candidate.samplesPerSecond)) + " samples/s predicted).\n";
      }
      std::string name = stem;
      for (int k = 2; taken.count(name) > 0; ++k) name = stem + "_" + std::to_string(k);
      taken.insert(name);
      g.names.push_back(name);
      g.notes.push_back(note);
    }
  }

  std::vector<Edit> edits;
  std::size_t order = 0;
  // The new mappings, after the mapping each replaces (or after the imports,
  // or before the training, when it is declared in another file).
  for (const auto& g : groups) {
    const check::MappingSpec& m = *g.mapping;
    const syntax::Declaration* decl = declarationOf(m);
    // The model and pod as the script can name them: as the declaration
    // writes them, else through the mapping (`four.model`), by the name the
    // phase or its training gives it (a mapping imported from a module that
    // imports its pod: the script need not see the pod's name).
    std::string model = m.model->name, pod = m.pod.name;
    if (decl != nullptr && decl->forExpr && decl->onExpr) {
      model = t.of(decl->forExpr->span);
      pod = t.of(decl->onExpr->span);
    } else if (decl != nullptr) {
      model = decl->name + ".model";
      pod = decl->name + ".pod";
    } else {
      for (const auto& p : phases) {
        if (p.body.empty() || &groups[p.group] != &g) continue;
        const syntax::FieldMember* f = fieldOf(*p.site.member->block, "mapping");
        if (f == nullptr && p.site.training->body) f = fieldOf(*p.site.training->body, "mapping");
        if (f == nullptr) continue;
        std::string ref = t.of(f->value->span);
        if (f->value->kind != syntax::ExprKind::Name && f->value->kind != syntax::ExprKind::Member) ref = "(" + ref + ")";
        model = ref + ".model";
        pod = ref + ".pod";
        break;
      }
    }
    std::uint32_t at = 0;
    std::string where;
    if (decl != nullptr) {
      at = t.lineEnd(decl->span.end);
      where = "after `" + m.name + "` (line " + std::to_string(file.lineCol(decl->span.begin).line) + ")";
    } else if (lastImport != nullptr) {
      at = t.lineEnd(lastImport->span.end);
      where = "after the imports";
    } else {
      const Phase* first = nullptr;
      for (const auto& p : phases)
        if (!p.body.empty() && &groups[p.group] == &g && first == nullptr) first = &p;
      IPU_INVARIANT(first != nullptr, "a group of found mappings has a phase");
      at = t.lineStart(first->site.training->span.begin);
      where = "before training `" + first->site.training->name + "`";
    }
    for (std::size_t k = 0; k < g.bodies.size(); ++k) {
      std::string text = g.notes[k] + "mapping " + g.names[k] + " for " + model + " on " + pod + " {\n" + g.bodies[k] + "}";
      text = decl != nullptr || lastImport != nullptr ? "\n\n" + text : text + "\n\n";
      edits.push_back({at, at, text, order++});
      out.changes.push_back("declared mapping `" + g.names[k] + "` " + where);
    }
  }

  // Each phase: its mapping and its batch. A phase block two runs share
  // (`training t2 = t with { ... }` inherits t's phases) is edited once.
  std::map<std::uint32_t, const Phase*> edited;
  for (const auto& p : phases) {
    const check::PhaseSpec& ph = p.found->written != nullptr ? *p.found->written : *p.found->phase;
    const Candidate& c = p.found->candidate;
    const std::string newMapping =
        p.body.empty() ? ph.mapping->name
                       : groups[p.group].names[static_cast<std::size_t>(
                             std::find(groups[p.group].bodies.begin(), groups[p.group].bodies.end(), p.body) -
                             groups[p.group].bodies.begin())];
    WrittenPhase w;
    w.run = p.found->run;
    w.phase = ph.name;
    w.mapping = newMapping;
    w.microBatch = p.body.empty() ? ph.batch.microBatch : c.microBatch;
    w.gradientAccumulation = p.body.empty() ? ph.batch.gradientAccumulation : c.gradientAccumulation;
    w.globalBatch = ph.batch.globalBatch;
    w.candidate = &c;
    out.phases.push_back(w);
    const std::string label = "phase `" + ph.name + "` of `" + p.found->run + "`";
    if (auto it = edited.find(p.site.member->span.begin); it != edited.end()) {
      const Phase& q = *it->second;
      if (q.body != p.body || q.found->candidate.microBatch != c.microBatch) {
        out.problem = label + " is also the phase of `" + q.found->run +
                      "` (one block), and the search gives them different mappings: search one of them (`--run`)";
        return out;
      }
      continue;
    }
    edited[p.site.member->span.begin] = &p;
    if (p.body.empty()) {
      out.changes.push_back(label + ": its mapping `" + ph.mapping->name + "` is the best found; unchanged");
      continue;
    }
    const syntax::Block& block = *p.site.member->block;
    std::vector<std::string> added;
    std::string said = label + ": mapping `" + newMapping + "` (was `" + ph.mapping->name + "`)";
    if (const syntax::FieldMember* f = fieldOf(block, "mapping")) edits.push_back({f->value->span.begin, f->value->span.end, newMapping, order++});
    else added.push_back("mapping: " + newMapping);
    const BatchFields fields = batchFieldsOf(ph.batch.derived);
    auto set = [&](const char* name, bool written, long long from, long long to) {
      if (from == to) return;
      said += std::string(", ") + name + " " + grouped(from) + " -> " + grouped(to) + (written ? "" : " (derived)");
      if (!written) return;
      const std::string value = std::to_string(to);
      if (const syntax::FieldMember* f = fieldOf(block, name)) edits.push_back({f->value->span.begin, f->value->span.end, value, order++});
      else added.push_back(std::string(name) + ": " + value);
    };
    set("micro_batch", fields.microBatch, ph.batch.microBatch, c.microBatch);
    set("gradient_accumulation", fields.gradientAccumulation, ph.batch.gradientAccumulation, c.gradientAccumulation);
    if (ph.batch.replicas != c.replicas)
      said += ", replicas " + grouped(ph.batch.replicas) + " -> " + grouped(c.replicas) + " (in the mapping)";
    said += "; global batch " + grouped(ph.batch.globalBatch) + " as before";
    addFields(t, block, added, edits, order);
    out.changes.push_back(said);
  }

  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return std::tie(a.begin, a.order) < std::tie(b.begin, b.order); });
  std::uint32_t pos = 0;
  for (const auto& e : edits) {
    IPU_INVARIANT(e.begin >= pos, "the edits of a written script do not overlap");
    out.text += t.text().substr(pos, e.begin - pos) + e.text;
    pos = e.end;
  }
  out.text += t.text().substr(pos);
  out.ok = true;
  return out;
}

}  // namespace ipu::search
