#include "interpreter/lsp/hover.h"

#include <algorithm>
#include <sstream>

#include "interpreter/lsp/plan_views.h"
#include "interpreter/lsp/workspace.h"
#include "interpreter/session/queries.h"

namespace ipu::lsp {

namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

// Inline code that shows any text: backticks inside it need a longer fence.
std::string code(const std::string& text) {
  std::string fence = "`";
  while (text.find(fence) != std::string::npos) fence += "`";
  const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
  return fence + (pad ? " " : "") + text + (pad ? " " : "") + fence;
}

// The declaring item's first line, with "..." when it goes on.
std::string declarationLine(const base::SourceFile& f, base::Span item) {
  const std::string& text = f.text();
  const std::size_t begin = std::min<std::size_t>(item.begin, text.size());
  const std::size_t end = std::min<std::size_t>(std::max(item.begin, item.end), text.size());
  std::size_t stop = text.find('\n', begin);
  std::string line = text.substr(begin, (stop == std::string::npos || stop > end ? end : stop) - begin);
  const bool more = stop != std::string::npos && stop < end;
  line = trim(line);
  if (line.size() > 160) line = line.substr(0, 157) + "...";
  else if (more) line += line.back() == '{' ? " ... }" : " ...";
  return line;
}

// The `//` comment lines directly above line `line` of `f`, without the slashes.
std::vector<std::string> commentAbove(const base::SourceFile& f, std::uint32_t line) {
  std::vector<std::string> out;
  for (std::uint32_t l = line; l > 1 && out.size() < 30; --l) {
    std::string text = trim(f.lineText(l - 1));
    if (text.rfind("//", 0) != 0) break;
    text = trim(std::string_view(text).substr(2));
    out.insert(out.begin(), text);
  }
  return out;
}

std::string describeValue(const session::ValueAndType& v) {
  std::string s = "**type** " + v.type;
  // A definition's body is evaluated once per use: one value, or "varies".
  if (v.value.kind != check::ValueKind::Template && v.value.kind != check::ValueKind::Builtin &&
      v.value.kind != check::ValueKind::Model && !v.shown.empty() && v.shown.size() <= 200)
    s += " · **value** " + code(v.shown) + (v.varies ? " (varies: " + std::to_string(v.evaluations) + " evaluations)" : "");
  return s;
}

bool isExpression(session::NodeKind k) {
  using K = session::NodeKind;
  switch (k) {
    case K::Number: case K::String: case K::Bool: case K::Name: case K::List: case K::Record: case K::Call:
    case K::Member: case K::Index: case K::Unary: case K::Binary: case K::Range: case K::If: case K::With:
    case K::Lua: case K::Schedule:
      return true;
    default: return false;
  }
}

}  // namespace

namespace {
Json hoverOfSyntax(Workspace& workspace, const Analysis& a, Position position);
}  // namespace

Json hover(Workspace& workspace, const Analysis& a, Position position) {
  Json out = hoverOfSyntax(workspace, a, position);
  // What the plan says of a stage or a layer follows what the name is.
  auto plan = planHover(workspace, a, position);
  if (!plan) return out;
  if (out.is_null()) return Json{{"contents", Json{{"kind", "markdown"}, {"value", *plan}}}};
  out["contents"]["value"] = out["contents"]["value"].get<std::string>() + "\n\n---\n\n" + *plan;
  return out;
}

namespace {

Json hoverOfSyntax(Workspace& workspace, const Analysis& a, Position position) {
  const session::Snapshot& snap = *a.snapshot;
  const base::LineCol lc = a.place(position, workspace.encoding());
  const std::string& path = a.queryPath;
  std::ostringstream md;
  Json range;
  const std::string& text = a.text();
  auto rangeOf = [&](base::Span s) { return workspace.range(text, s.begin, s.end); };

  if (auto f = snap.fieldAt(path, lc.line, lc.column)) {
    md << "**" << f->name << "** · field of " << code(f->recordKind) << "\n\n"
       << f->type << " · default: " << f->dflt;
    if (!f->doc.empty()) md << "\n\n" << f->doc;
    return Json{{"contents", Json{{"kind", "markdown"}, {"value", md.str()}}}, {"range", rangeOf(f->nameSpan)}};
  }
  auto node = snap.nodeAt(path, lc.line, lc.column);
  if (!node) return nullptr;
  auto def = snap.definitionOf(path, lc.line, lc.column);
  std::optional<session::ValueAndType> value;
  if (isExpression(node->kind)) value = snap.valueAndTypeAt(path, lc.line, lc.column);
  std::vector<std::string> parts;
  if (def) {
    const base::SourceFile& f = snap.sources().file(def->declaration.file);
    parts.push_back("```ipu\n" + declarationLine(f, def->declaration) + "\n```");
    const bool declaring = def->span.file == node->span.file && def->span.begin >= node->span.begin &&
                           def->span.end <= node->span.end && !isExpression(node->kind);
    // On a declaring name of the top level, the value is the name's own.
    if (!value && declaring && (def->kind == session::NodeKind::Let || def->kind == session::NodeKind::Declaration) &&
        path == snap.rootPath()) {
      session::Snapshot::Evaluation e = snap.evaluate(node->name);
      if (e.value && !e.diagnostics.hasErrors()) {
        session::ValueAndType v;
        v.value = *e.value;
        v.shown = e.value->show();
        v.type = e.type;
        v.evaluations = 1;
        value = v;
      }
    }
    if (value) parts.push_back(describeValue(*value));
    std::vector<std::string> comment = commentAbove(f, def->start.line);
    if (!comment.empty()) {
      std::string doc;
      for (const auto& l : comment) doc += (doc.empty() ? "" : "\n") + l;
      parts.push_back(doc);
    }
    const bool here = f.path() == path;
    // A declaration is named by its kind (`model`, `mapping`), the first word of its line.
    std::string kind = session::name(def->kind);
    if (def->kind == session::NodeKind::Declaration) {
      const std::string line = declarationLine(f, def->declaration);
      kind = line.substr(0, line.find_first_of(" \t("));
    }
    parts.push_back(kind + " · " +
                    (here ? "line " + std::to_string(def->start.line) : "declared in " + code(f.path() + ":" + std::to_string(def->start.line))));
    range = rangeOf(declaring ? def->span : node->span);
  } else if (value) {
    if (value->value.kind == check::ValueKind::Builtin) parts.push_back("built-in function " + code(node->name));
    else parts.push_back(describeValue(*value));
    range = rangeOf(node->span);
  } else {
    return nullptr;
  }
  for (std::size_t i = 0; i < parts.size(); ++i) md << (i ? "\n\n" : "") << parts[i];
  Json out{{"contents", Json{{"kind", "markdown"}, {"value", md.str()}}}};
  if (!range.is_null()) out["range"] = range;
  return out;
}

}  // namespace

}  // namespace ipu::lsp
