#include "interpreter/lsp/outline.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "interpreter/lsp/text_scan.h"
#include "interpreter/lsp/workspace.h"
#include "interpreter/session/queries.h"
#include "interpreter/syntax/printer.h"

namespace ipu::lsp {

namespace {

using namespace syntax;

// An expression as a short detail line.
std::string brief(const Expr* e) {
  if (e == nullptr) return {};
  std::string s = print(*e);
  for (char& c : s)
    if (c == '\n') c = ' ';
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

SymbolKind kindOf(const Declaration& d) {
  if (d.hasParams) return SymbolKind::Function;
  switch (d.declKind) {
    case DeclKind::Model: case DeclKind::Layer: return SymbolKind::Class;
    case DeclKind::Chip: case DeclKind::Machine: case DeclKind::Pod: return SymbolKind::Struct;
    case DeclKind::Training: return SymbolKind::Event;
    case DeclKind::Mapping: case DeclKind::Precision: case DeclKind::Optimizer: case DeclKind::Dataset:
    case DeclKind::Hook: case DeclKind::Sweep:
      return SymbolKind::Object;
  }
  return SymbolKind::Object;
}

class SymbolBuilder {
 public:
  SymbolBuilder(const LineIndex& lines, PositionEncoding encoding) : lines_(lines), encoding_(encoding) {}

  Json item(const Item& it) {
    switch (it.kind) {
      case ItemKind::Import: {
        const auto& i = it.as<ImportItem>();
        return symbol(i.alias.empty() ? i.path : i.alias, i.alias.empty() ? "import" : "import \"" + i.path + "\"",
                      SymbolKind::Module, it.span, i.alias.empty() ? i.pathSpan : i.aliasSpan);
      }
      case ItemKind::Let: {
        const auto& l = it.as<LetItem>();
        return symbol(l.name, brief(l.value.get()), SymbolKind::Constant, it.span, l.nameSpan);
      }
      case ItemKind::Run: {
        const auto& r = it.as<RunItem>();
        return symbol(r.name, "run", SymbolKind::Event, it.span, r.nameSpan);
      }
      case ItemKind::Declaration: {
        const auto& d = it.as<Declaration>();
        std::string detail = spelling(d.declKind);
        if (d.forExpr) detail += " for " + brief(d.forExpr.get());
        if (d.onExpr) detail += " on " + brief(d.onExpr.get());
        if (d.value) detail += " = " + brief(d.value.get());
        Json s = symbol(d.name, detail, kindOf(d), it.span, d.nameSpan);
        const Block* body = d.body.get();
        if (body == nullptr && d.value != nullptr) {
          if (const auto* r = d.value->dyn<RecordExpr>()) body = r->block.get();
          if (const auto* w = d.value->dyn<WithExpr>()) body = w->block.get();
        }
        addChildren(s, body);
        return s;
      }
    }
    return nullptr;
  }

 private:
  Json symbol(const std::string& name, const std::string& detail, SymbolKind kind, Span range, Span selection) {
    // The protocol requires a non-empty name and the selection inside the range.
    if (!selection.valid() || selection.begin < range.begin || selection.end > range.end) selection = range;
    Json s{{"name", name.empty() ? std::string("(unnamed)") : name}};
    if (!detail.empty()) s["detail"] = detail;
    s["kind"] = static_cast<int>(kind);
    s["range"] = toJson(lines_.rangeOf(range.begin, range.end, encoding_));
    s["selectionRange"] = toJson(lines_.rangeOf(selection.begin, selection.end, encoding_));
    return s;
  }

  void addChildren(Json& parent, const Block* b) {
    if (b == nullptr) return;
    Json children = Json::array();
    for (const auto& m : b->members) {
      Json c = member(*m);
      if (!c.is_null()) children.push_back(std::move(c));
    }
    if (!children.empty()) parent["children"] = std::move(children);
  }

  Json member(const Member& m) {
    switch (m.kind) {
      case MemberKind::Field: {
        const auto& f = m.as<FieldMember>();
        Json s = symbol(f.name, brief(f.value.get()), SymbolKind::Field, m.span, f.nameSpan);
        if (f.value != nullptr)
          if (const auto* r = f.value->dyn<RecordExpr>()) addChildren(s, r->block.get());
        return s;
      }
      case MemberKind::Block: {
        const auto& b = m.as<BlockMember>();
        Json s = symbol(b.name, "", SymbolKind::Struct, m.span, b.nameSpan);
        addChildren(s, b.block.get());
        return s;
      }
      case MemberKind::Let: {
        const auto& l = m.as<LetMember>();
        return symbol(l.name, brief(l.value.get()), SymbolKind::Constant, m.span, l.nameSpan);
      }
      case MemberKind::Layer: {
        const auto& l = m.as<LayerMember>();
        return symbol(l.name, brief(l.value.get()), SymbolKind::Property, m.span, l.nameSpan);
      }
      case MemberKind::Repeat: {
        const auto& r = m.as<RepeatMember>();
        return symbol(r.name, "repeat " + brief(r.count.get()) + " = " + brief(r.value.get()), SymbolKind::Array, m.span,
                      r.nameSpan);
      }
      case MemberKind::Stage: {
        const auto& st = m.as<StageMember>();
        std::string layers;
        for (const auto& l : st.layers) layers += (layers.empty() ? "" : ", ") + brief(l.get());
        if (layers.size() > 60) layers = layers.substr(0, 57) + "...";
        return symbol(st.keyword + " " + std::to_string(st.index), layers, SymbolKind::Key, m.span, st.indexSpan);
      }
      case MemberKind::Phase: {
        const auto& p = m.as<PhaseMember>();
        Json s = symbol(p.name, p.from.empty() ? "phase" : "phase from " + p.from, SymbolKind::Method, m.span, p.nameSpan);
        addChildren(s, p.block.get());
        return s;
      }
    }
    return nullptr;
  }

  const LineIndex& lines_;
  PositionEncoding encoding_;
};

}  // namespace

Json documentSymbols(const Analysis& a, PositionEncoding encoding) {
  Json out = Json::array();
  if (!a.program) return out;
  SymbolBuilder builder(*a.lines, encoding);
  for (const auto& item : a.program->items) {
    Json s = builder.item(*item);
    if (!s.is_null()) out.push_back(std::move(s));
  }
  return out;
}

Json foldingRanges(const Analysis& a) {
  Json out = Json::array();
  const std::string& text = a.text();
  const LineIndex& lines = *a.lines;
  auto lineOf = [&](std::size_t offset) { return lines.lineOf(offset); };
  auto add = [&](std::uint32_t start, std::uint32_t end, const char* kind) {
    if (end <= start) return;
    Json r{{"startLine", start}, {"endLine", end}};
    if (kind != nullptr) r["kind"] = kind;
    out.push_back(std::move(r));
  };
  const std::vector<Token> tokens = scanTokens(text);
  std::vector<std::pair<char, std::uint32_t>> open;  // bracket and its line
  std::optional<std::pair<std::uint32_t, std::uint32_t>> commentRun, importRun;
  auto flush = [&](std::optional<std::pair<std::uint32_t, std::uint32_t>>& run, const char* kind) {
    if (run) add(run->first, run->second, kind);
    run.reset();
  };
  std::optional<std::uint32_t> lastCodeLine;  // a comment after code on its line is not part of a run
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    const std::uint32_t line = lineOf(t.begin);
    if (t.kind == TokenKind::LineComment && lastCodeLine != line) {
      if (commentRun && commentRun->second + 1 == line) commentRun->second = line;
      else {
        flush(commentRun, "comment");
        commentRun = std::make_pair(line, line);
      }
      continue;
    }
    if (t.kind == TokenKind::BlockComment) {
      add(line, lineOf(t.end > t.begin ? t.end - 1 : t.end), "comment");
      continue;
    }
    lastCodeLine = lineOf(t.end > t.begin ? t.end - 1 : t.end);
    if (t.kind == TokenKind::Word && text.compare(t.begin, t.end - t.begin, "import") == 0 &&
        (i == 0 || lineOf(tokens[i - 1].end) < line)) {
      if (importRun && importRun->second + 1 >= line) importRun->second = line;
      else {
        flush(importRun, "imports");
        importRun = std::make_pair(line, line);
      }
    }
    if (t.kind == TokenKind::String) lastCodeLine = lineOf(t.end > t.begin ? t.end - 1 : t.end);
    if (t.kind != TokenKind::Punctuation) continue;
    const char c = text[t.begin];
    if (c == '{' || c == '[' || c == '(') open.emplace_back(c, line);
    if (c == '}' || c == ']' || c == ')') {
      const char want = c == '}' ? '{' : c == ']' ? '[' : '(';
      // An unmatched closer closes nothing; a mismatched one closes back to its opener.
      auto it = std::find_if(open.rbegin(), open.rend(), [&](const auto& o) { return o.first == want; });
      if (it == open.rend()) continue;
      const std::uint32_t start = it->second;
      open.erase(std::next(it).base(), open.end());
      // The closing line stays visible.
      if (line > start + 1) add(start, line - 1, nullptr);
    }
  }
  flush(commentRun, "comment");
  if (importRun) add(importRun->first, importRun->second, "imports");
  return out;
}

namespace {
// `query`'s characters appear in `name` in order, ignoring case (what editors' symbol pickers match).
bool matches(const std::string& name, const std::string& query) {
  std::size_t at = 0;
  for (char c : name)
    if (at < query.size() && std::tolower(static_cast<unsigned char>(c)) == std::tolower(static_cast<unsigned char>(query[at]))) ++at;
  return at == query.size();
}
}  // namespace

Json workspaceSymbols(Workspace& workspace, const std::string& query) {
  Json out = Json::array();
  std::set<std::string> seen;
  for (const auto& a : workspace.latestAnalyses()) {
    if (a->standardPath) continue;  // the standard library's names are the imports' business
    const session::Snapshot& snap = *a->snapshot;
    for (const auto& path : snap.modulePaths()) {
      auto program = snap.programOf(path);
      if (!program) continue;
      for (const auto& item : program->items) {
        std::string name;
        Span at;
        SymbolKind kind = SymbolKind::Constant;
        if (const auto* d = item->dyn<Declaration>()) name = d->name, at = d->nameSpan, kind = kindOf(*d);
        else if (const auto* l = item->dyn<LetItem>()) name = l->name, at = l->nameSpan;
        if (name.empty() || !matches(name, query)) continue;
        auto location = workspace.location(snap, item->span);
        if (!location) continue;
        if (!seen.insert(name + "@" + serialize(*location)).second) continue;
        Json s{{"name", name}, {"kind", static_cast<int>(kind)}, {"location", std::move(*location)}};
        const std::size_t slash = path.find_last_of('/');
        s["containerName"] = slash == std::string::npos ? path : path.substr(slash + 1);
        out.push_back(std::move(s));
      }
    }
  }
  return out;
}

}  // namespace ipu::lsp
