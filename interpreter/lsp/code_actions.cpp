#include "interpreter/lsp/code_actions.h"

#include <cctype>

#include "interpreter/base/diagnostic.h"
#include "interpreter/check/modules.h"
#include "interpreter/lsp/text_scan.h"
#include "interpreter/lsp/workspace.h"

namespace ipu::lsp {

namespace {

bool isName(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

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

}  // namespace

Json codeActions(Workspace& workspace, const Analysis& a, const Json& params) {
  Json out = Json::array();
  // Only quick fixes are offered: a client asking for other kinds gets none.
  if (const Json* only = member(params, {"context", "only"}); only != nullptr && only->is_array()) {
    bool quickfix = false;
    for (const auto& k : *only) quickfix = quickfix || k == "quickfix";
    if (!quickfix) return out;
  }
  const Json* diagnostics = member(params, {"context", "diagnostics"});
  if (diagnostics == nullptr || !diagnostics->is_array()) return out;
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
      changes[uri] = Json::array({std::move(edit)});
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
