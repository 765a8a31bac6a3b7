#include "interpreter/lsp/code_actions.h"

#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/check/modules.h"
#include "interpreter/plan/codes.h"
#include "interpreter/plan/levers.h"
#include "runtime/ir/mapping_fields.h"
#include "interpreter/lsp/text_scan.h"
#include "interpreter/lsp/workspace.h"

namespace ipu::lsp {

namespace {

// The `help:` line of a published message.
std::string helpOf(const std::string& message) {
  const std::string lead = "\nhelp: ";
  const std::size_t at = message.find(lead);
  if (at == std::string::npos) return {};
  const std::size_t end = message.find('\n', at + lead.size());
  return message.substr(at + lead.size(), end == std::string::npos ? std::string::npos : end - at - lead.size());
}

// Where a new import goes: the line after the last top-level import (and its
// alias), or the start of the script.
std::size_t importInsertion(const std::string& text) {
  const auto tokens = scanTokens(text);
  std::size_t after = 0;
  int depth = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    if (t.kind == TokenKind::Punctuation) {
      const char c = text[t.begin];
      if (c == '{' || c == '(' || c == '[') ++depth;
      if ((c == '}' || c == ')' || c == ']') && depth > 0) --depth;
    }
    if (depth != 0 || t.kind != TokenKind::Word || text.compare(t.begin, t.end - t.begin, "import") != 0) continue;
    if (i + 1 >= tokens.size() || tokens[i + 1].kind != TokenKind::String) continue;
    std::size_t end = tokens[i + 1].end;
    if (i + 3 < tokens.size() && text.compare(tokens[i + 2].begin, 2, "as") == 0 && tokens[i + 2].end == tokens[i + 2].begin + 2)
      end = tokens[i + 3].end;
    const std::size_t newline = text.find('\n', end);
    after = newline == std::string::npos ? text.size() : newline + 1;
  }
  return after;
}

Json textEdit(Workspace& workspace, const std::string& text, std::size_t begin, std::size_t end, const std::string& newText) {
  return Json{{"range", workspace.range(text, begin, end)}, {"newText", newText}};
}

// A lever's `name: value` settings (`optimizer_state: streaming, recompute:
// every_layer`): split at the commas that start another `name:`, since a
// value may be a list (`[weights, optimizer_state]`).
std::vector<std::pair<std::string, std::string>> settingsOf(const std::string& lever) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t start = 0;
  while (start < lever.size()) {
    std::size_t cut = start;
    for (;;) {
      cut = lever.find(", ", cut);
      if (cut == std::string::npos) break;
      std::size_t k = cut + 2;
      while (k < lever.size() && (std::isalnum(static_cast<unsigned char>(lever[k])) || lever[k] == '_')) ++k;
      if (k > cut + 2 && k < lever.size() && lever[k] == ':') break;
      cut += 2;
    }
    const std::string one = lever.substr(start, cut == std::string::npos ? std::string::npos : cut - start);
    const std::size_t colon = one.find(": ");
    if (colon == std::string::npos) return {};
    out.emplace_back(one.substr(0, colon), one.substr(colon + 2));
    if (cut == std::string::npos) break;
    start = cut + 2;
  }
  return out;
}

// The setting as the table of mapping fields writes it (parsed and printed
// again by its row, ir::parseField and ir::fieldText), or `pipeline:`'s
// `balanced(N)`; none for what is not a mapping field a user writes (a
// precision's `accumulators`).
std::optional<std::string> mappingSettingText(const std::string& name, const std::string& value) {
  if (name == "pipeline") {
    const std::string lead = "balanced(";
    if (value.rfind(lead, 0) != 0 || value.back() != ')' || value.size() == lead.size() + 1) return std::nullopt;
    for (std::size_t i = lead.size(); i + 1 < value.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(value[i]))) return std::nullopt;
    return value;
  }
  const ir::MappingFieldRow* row = ir::mappingFieldNamed(name);
  if (row == nullptr || row->written != ir::FieldWritten::ByUser) return std::nullopt;
  std::string problem;
  auto parsed = ir::parseField(*row, value, problem);
  if (!parsed) return std::nullopt;
  return ir::fieldText(*row, *parsed);
}

// The mapping declaration (block form) of the document around `offset`.
const syntax::Declaration* mappingAround(const Analysis& a, std::size_t offset) {
  if (a.program == nullptr) return nullptr;
  for (const auto& item : a.program->items)
    if (const auto* d = item->dyn<syntax::Declaration>();
        d != nullptr && d->declKind == syntax::DeclKind::Mapping && d->body != nullptr && offset >= d->span.begin && offset < d->span.end)
      return d;
  return nullptr;
}

// The edits that make mapping `d` say each of `settings`: a field written
// already gets the new value (a `pipeline { }` block becomes `pipeline:`),
// another is added as a line before the closing brace.
std::optional<Json> editsOfMapping(Workspace& workspace, const Analysis& a, const syntax::Declaration& d,
                                   const std::vector<std::pair<std::string, std::string>>& settings) {
  const std::string& text = a.text();
  Json edits = Json::array();
  std::string added;
  std::string indent = "  ";
  if (!d.body->members.empty()) {
    const std::size_t first = d.body->members.front()->span.begin;
    const std::size_t lineStart = text.rfind('\n', first == 0 ? 0 : first - 1);
    const std::size_t from = lineStart == std::string::npos ? 0 : lineStart + 1;
    if (text.find_first_not_of(" \t", from) == first) indent = text.substr(from, first - from);
  }
  for (const auto& [name, value] : settings) {
    auto written = mappingSettingText(name, value);
    if (!written) return std::nullopt;
    bool done = false;
    for (const auto& m : d.body->members) {
      if (const auto* f = m->dyn<syntax::FieldMember>(); f != nullptr && f->name == name && f->value != nullptr) {
        edits.push_back(textEdit(workspace, text, f->value->span.begin, f->value->span.end, *written));
        done = true;
      } else if (const auto* b = m->dyn<syntax::BlockMember>(); b != nullptr && b->name == name) {
        edits.push_back(textEdit(workspace, text, b->span.begin, b->span.end, name + ": " + *written));
        done = true;
      }
    }
    if (!done) added += indent + name + ": " + *written + "\n";
  }
  if (!added.empty()) {
    // Before the closing brace: on a line of its own, the new lines go above it.
    const std::size_t close = d.body->span.end - 1;
    const std::size_t lineStart = text.rfind('\n', close == 0 ? 0 : close - 1);
    const std::size_t from = lineStart == std::string::npos ? 0 : lineStart + 1;
    if (text.find_first_not_of(" \t", from) == close) edits.push_back(textEdit(workspace, text, from, from, added));
    else edits.push_back(textEdit(workspace, text, close, close, "\n" + added));
  }
  return edits;
}

}  // namespace

Json codeActions(Workspace& workspace, const Analysis& a, const Json& params, bool resolvable) {
  Json out = Json::array();
  // The kinds asked for: a kind is asked for by itself or by a prefix (`refactor`).
  bool quickfix = true, rewrite = true;
  if (const Json* only = member(params, {"context", "only"}); only != nullptr && only->is_array()) {
    quickfix = rewrite = false;
    for (const auto& k : *only) {
      quickfix = quickfix || k == "quickfix";
      rewrite = rewrite || k == "refactor" || k == "refactor.rewrite";
    }
  }
  // In a mapping that phases use: the search's best mapping, resolved when picked.
  if (const Json* range = member(params, "range"); rewrite && resolvable && range != nullptr && a.program != nullptr)
    if (auto r = rangeFrom(*range)) {
      const std::size_t at = a.lines->offsetOf(r->start, workspace.encoding());
      for (const auto& item : a.program->items) {
        const auto* d = item->dyn<syntax::Declaration>();
        if (d == nullptr || d->declKind != syntax::DeclKind::Mapping || at < d->span.begin || at >= d->span.end) continue;
        auto plan = workspace.planOf(a);
        bool used = false;
        if (plan != nullptr)
          for (const auto& run : plan->runs)
            for (const auto& p : run.phases) used = used || (p.mapping.name == d->name && p.mapping.source.file == a.document.path);
        if (used)
          out.push_back(Json{{"title", "Apply the best mapping found by the search (`ipu search --apply`) to `" + d->name + "`"},
                             {"kind", "refactor.rewrite"},
                             {"data", Json{{"uri", a.document.uri}, {"version", a.document.version}, {"mapping", d->name}}}});
      }
    }
  const Json* diagnostics = member(params, {"context", "diagnostics"});
  if (!quickfix || diagnostics == nullptr || !diagnostics->is_array()) return out;
  const std::string& text = a.text();
  const std::string& uri = a.document.uri;
  bool preferred = true;
  for (const auto& d : *diagnostics) {
    const Json* source = member(d, "source");
    const Json* message = member(d, "message");
    const Json* range = member(d, "range");
    if (source == nullptr || *source != "ipu" || message == nullptr || !message->is_string() || range == nullptr) continue;
    auto r = rangeFrom(*range);
    if (!r) continue;
    const std::string help = helpOf(message->get<std::string>());
    if (help.empty()) continue;
    auto action = [&](const std::string& title, Json edit) {
      Json changes = Json::object();
      changes[uri] = edit.is_array() ? std::move(edit) : Json::array({std::move(edit)});
      Json act{{"title", title}, {"kind", "quickfix"}, {"diagnostics", Json::array({d})}};
      if (preferred) act["isPreferred"] = true;
      preferred = false;
      act["edit"] = Json{{"changes", std::move(changes)}};
      out.push_back(std::move(act));
    };
    const std::size_t begin = a.lines->offsetOf(r->start, workspace.encoding());
    const std::size_t end = std::max(begin, a.lines->offsetOf(r->end, workspace.encoding()));
    const std::string written = text.substr(begin, end - begin);
    for (const auto& candidate : base::didYouMeanCandidates(help)) {
      // A name is replaced by a name; a quoted path (an import's) by a quoted path.
      const bool quoted = written.size() >= 2 && written.front() == '"' && written.back() == '"';
      if (quoted && candidate.find_first_of("\"\\\n") == std::string::npos)
        action("Replace " + written + " with \"" + candidate + "\"", textEdit(workspace, text, begin, end, "\"" + candidate + "\""));
      else if (!quoted && isName(written) && isName(candidate))
        action("Replace `" + written + "` with `" + candidate + "`", textEdit(workspace, text, begin, end, candidate));
    }
    // IPU2001: each change the planner found to make the mapping fit, written into the mapping.
    if (const Json* code = member(d, "code"); code != nullptr && *code == plan::code::kDoesNotFit)
      if (const syntax::Declaration* mapping = mappingAround(a, begin))
        for (const auto& lever : plan::leverTextsIn(help)) {
          auto settings = settingsOf(lever);
          if (settings.empty()) continue;
          if (auto edits = editsOfMapping(workspace, a, *mapping, settings))
            action("Write `" + lever + "` in mapping `" + mapping->name + "`", std::move(*edits));
        }
    const std::string module = check::moduleToImport(help);
    if (!module.empty() && module.find_first_of("\"\\\n") == std::string::npos) {
      const std::size_t at = importInsertion(text);
      // A script whose last line has no line break gets one before the import.
      const std::string lead = at == text.size() && !text.empty() && text.back() != '\n' ? "\n" : "";
      action("Add `import \"" + module + "\"`", textEdit(workspace, text, at, at, lead + "import \"" + module + "\"\n"));
    }
  }
  return out;
}

}  // namespace ipu::lsp
