#include "interpreter/lsp/signature_help.h"

#include <algorithm>

#include "interpreter/check/schema.h"
#include "interpreter/lsp/text_scan.h"
#include "interpreter/lsp/workspace.h"
#include "interpreter/session/queries.h"
#include "interpreter/syntax/printer.h"

namespace ipu::lsp {

namespace {

// The call around the cursor, read lexically.
struct CallAt {
  std::string callee;
  std::size_t argument = 0;  // the argument's position
  std::string named;         // the parameter it names (`name:`), if it does
};

std::optional<CallAt> callAt(const std::string& text, std::size_t cursor) {
  const auto tokens = scanTokens(text);
  std::vector<std::size_t> open;
  std::size_t before = 0;
  for (; before < tokens.size() && tokens[before].begin < cursor; ++before) {
    const Token& t = tokens[before];
    const bool inside = cursor < t.end || (cursor == t.end && !t.closed);
    if ((t.kind == TokenKind::String || t.kind == TokenKind::BlockComment) && inside) return std::nullopt;
    if (t.kind == TokenKind::LineComment && cursor <= t.end) return std::nullopt;
    if (t.kind != TokenKind::Punctuation) continue;
    const char c = text[t.begin];
    if (c == '(' || c == '[' || c == '{') open.push_back(before);
    if (c == ')' || c == ']' || c == '}') {
      const char want = c == ')' ? '(' : c == ']' ? '[' : '{';
      auto it = std::find_if(open.rbegin(), open.rend(), [&](std::size_t o) { return text[tokens[o].begin] == want; });
      if (it != open.rend()) open.erase(std::next(it).base(), open.end());
    }
  }
  if (open.empty() || text[tokens[open.back()].begin] != '(') return std::nullopt;
  const std::size_t paren = open.back();
  if (paren == 0 || tokens[paren - 1].kind != TokenKind::Word) return std::nullopt;
  CallAt call;
  call.callee = text.substr(tokens[paren - 1].begin, tokens[paren - 1].end - tokens[paren - 1].begin);
  if (isKeyword(call.callee)) return std::nullopt;
  // A qualified callee (`alias.name(`) is not looked up here.
  if (paren >= 2 && tokens[paren - 2].kind == TokenKind::Punctuation && text[tokens[paren - 2].begin] == '.') return std::nullopt;
  int depth = 0;
  std::size_t argumentStart = paren + 1;
  for (std::size_t i = paren + 1; i < before; ++i) {
    const Token& t = tokens[i];
    if (t.kind != TokenKind::Punctuation) continue;
    const char c = text[t.begin];
    if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') depth = std::max(0, depth - 1);
    else if (c == ',' && depth == 0) {
      ++call.argument;
      argumentStart = i + 1;
    }
  }
  if (argumentStart + 1 < before && tokens[argumentStart].kind == TokenKind::Word &&
      tokens[argumentStart + 1].kind == TokenKind::Punctuation && text[tokens[argumentStart + 1].begin] == ':')
    call.named = text.substr(tokens[argumentStart].begin, tokens[argumentStart].end - tokens[argumentStart].begin);
  return call;
}

// The `//` comment lines directly above a line, without the slashes.
std::string commentAbove(const base::SourceFile& f, std::uint32_t line) {
  std::vector<std::string> lines;
  for (std::uint32_t l = line; l > 1 && lines.size() < 30; --l) {
    std::string_view text = f.lineText(l - 1);
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    if (text.substr(0, 2) != "//") break;
    text.remove_prefix(2);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    lines.insert(lines.begin(), std::string(text));
  }
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

struct Parameter {
  std::string label, doc;
  std::string name;
};

Json signature(const std::string& callee, const std::vector<Parameter>& params, const std::string& doc, const CallAt& call) {
  std::string label = callee + "(";
  Json parameters = Json::array();
  for (std::size_t i = 0; i < params.size(); ++i) {
    label += (i ? ", " : "") + params[i].label;
    Json p{{"label", params[i].label}};
    if (!params[i].doc.empty()) p["documentation"] = params[i].doc;
    parameters.push_back(std::move(p));
  }
  label += ")";
  Json sig{{"label", label}, {"parameters", std::move(parameters)}};
  if (!doc.empty()) sig["documentation"] = Json{{"kind", "markdown"}, {"value", doc}};
  // The parameter named before `:`, else the one at the argument's position.
  std::size_t active = call.argument;
  if (!call.named.empty()) {
    auto it = std::find_if(params.begin(), params.end(), [&](const Parameter& p) { return p.name == call.named; });
    active = it == params.end() ? params.size() : static_cast<std::size_t>(it - params.begin());
  }
  return Json{{"signatures", Json::array({std::move(sig)})}, {"activeSignature", 0}, {"activeParameter", active}};
}

}  // namespace

Json signatureHelp(Workspace& workspace, const Analysis& a, Position position) {
  const std::string& text = a.text();
  const std::size_t cursor = a.lines->offsetOf(position, workspace.encoding());
  auto call = callAt(text, cursor);
  if (!call) return nullptr;
  auto snap = workspace.namingSnapshot(a, readTopLevel(text).imports);
  const base::LineCol lc = sessionLineCol(text, cursor);
  const auto names = a.program ? snap->namesInScope(a.queryPath, lc.line, lc.column) : snap->namesInScope(a.queryPath, 0, 0);
  auto found = std::find_if(names.begin(), names.end(), [&](const session::ScopeName& n) { return n.name == call->callee; });
  if (found == names.end()) return nullptr;

  if (found->kind == session::NodeKind::Name) {
    // A built-in optimizer takes the optimizer record's fields (but its kind, which it is).
    const check::Schema* optimizer = check::schemaFor("optimizer");
    const check::Field* kind = optimizer != nullptr ? optimizer->find("kind") : nullptr;
    if (kind == nullptr || std::find(kind->type.symbols.begin(), kind->type.symbols.end(), call->callee) == kind->type.symbols.end())
      return nullptr;
    std::vector<Parameter> params;
    for (const auto& f : optimizer->fields)
      if (f.name != "kind") params.push_back(Parameter{f.name + ": " + f.type.name(), f.doc, f.name});
    return signature(call->callee, params, "the `" + call->callee + "` optimizer (its record's fields, all optional)", *call);
  }
  if (found->kind != session::NodeKind::Declaration || !found->at) return nullptr;
  auto program = snap->programOf(found->at->path);
  if (!program) return nullptr;
  for (const auto& item : program->items) {
    const auto* d = item->dyn<syntax::Declaration>();
    if (d == nullptr || d->name != call->callee || d->nameSpan.begin != found->at->span.begin || !d->hasParams) continue;
    std::vector<Parameter> params;
    for (const auto& p : d->params) {
      std::string label = p.name;
      if (!p.type.empty()) label += ": " + p.type;
      if (p.dflt) label += " = " + syntax::print(*p.dflt);
      params.push_back(Parameter{label, {}, p.name});
    }
    const base::SourceFile& f = snap->sources().file(found->at->span.file);
    return signature(call->callee, params, commentAbove(f, found->at->start.line), *call);
  }
  return nullptr;
}

}  // namespace ipu::lsp
