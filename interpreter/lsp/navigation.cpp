#include "interpreter/lsp/navigation.h"

#include <cctype>

#include <map>
#include <set>

#include "interpreter/lsp/text_scan.h"
#include "interpreter/lsp/workspace.h"
#include "interpreter/session/queries.h"

namespace ipu::lsp {

Json definition(Workspace& workspace, const Analysis& a, Position position) {
  const base::LineCol lc = a.place(position, workspace.encoding());
  const session::Snapshot& snap = *a.snapshot;
  std::optional<session::Location> target = snap.importedModuleAt(a.queryPath, lc.line, lc.column);
  if (!target) target = snap.definitionOf(a.queryPath, lc.line, lc.column);
  if (!target) return nullptr;
  auto location = workspace.location(snap, target->span);
  return location ? *location : Json(nullptr);
}

Json references(Workspace& workspace, const Analysis& a, Position position, bool includeDeclaration) {
  Json out = Json::array();
  const base::LineCol lc = a.place(position, workspace.encoding());
  const session::Snapshot& snap = *a.snapshot;
  auto def = snap.definitionOf(a.queryPath, lc.line, lc.column);
  if (!def) return out;
  std::set<std::string> seen;
  auto add = [&](const session::Snapshot& s, base::Span span) {
    if (auto l = workspace.location(s, span))
      if (seen.insert(serialize(*l)).second) out.push_back(std::move(*l));
  };
  if (includeDeclaration) add(snap, def->span);
  for (const auto& use : snap.usesOf(a.queryPath, lc.line, lc.column)) add(snap, use.span);
  // The same declaration, seen from the other open documents' checks.
  const std::string* declaringText = snap.text(def->path);
  for (const auto& other : workspace.latestAnalyses()) {
    if (other.get() == &a || other->snapshot == a.snapshot) continue;
    const std::string* theirs = other->snapshot->text(def->path);
    if (declaringText == nullptr || theirs == nullptr || *theirs != *declaringText) continue;
    for (const auto& use : other->snapshot->usesOf(def->path, def->start.line, def->start.column))
      add(*other->snapshot, use.span);
  }
  return out;
}

namespace {

// The declaration at the position and the span of the name under it (the
// declaring name, or a use), when it can be renamed.
struct Renameable {
  session::Location declaration;
  base::Span name;
};
std::optional<Renameable> renameableAt(const Analysis& a, base::LineCol lc, std::size_t offset) {
  const session::Snapshot& snap = *a.snapshot;
  auto def = snap.definitionOf(a.queryPath, lc.line, lc.column);
  if (!def || def->standard) return std::nullopt;
  const base::SourceFile* here = nullptr;
  for (const auto& use : snap.usesOf(a.queryPath, lc.line, lc.column)) {
    here = snap.sources().find(use.span.file);
    if (here != nullptr && here->path() == a.queryPath && use.span.begin <= offset && offset <= use.span.end)
      return Renameable{*def, use.span};
  }
  const base::SourceFile* declaring = snap.sources().find(def->span.file);
  if (declaring != nullptr && declaring->path() == a.queryPath && def->span.begin <= offset && offset <= def->span.end)
    return Renameable{*def, def->span};
  return std::nullopt;
}

}  // namespace

Json prepareRename(Workspace& workspace, const Analysis& a, Position position) {
  const std::size_t offset = a.lines->offsetOf(position, workspace.encoding());
  auto r = renameableAt(a, sessionLineCol(a.text(), offset), offset);
  if (!r) return nullptr;
  return Json{{"range", workspace.range(a.text(), r->name.begin, r->name.end)},
              {"placeholder", a.text().substr(r->name.begin, r->name.end - r->name.begin)}};
}

Rename rename(Workspace& workspace, const Analysis& a, Position position, const std::string& newName) {
  Rename out;
  const std::size_t offset = a.lines->offsetOf(position, workspace.encoding());
  auto r = renameableAt(a, sessionLineCol(a.text(), offset), offset);
  if (!r) {
    out.refusal = "there is nothing to rename here: a name declared in this workspace (not a field, a built-in, an "
                  "enumeration member or the standard library's)";
    return out;
  }
  if (!isName(newName) || isKeyword(newName)) {
    out.refusal = "`" + newName + "` is not a name: letters, digits and `_`, not starting with a digit, and not a keyword";
    return out;
  }
  const session::Location& def = r->declaration;
  if (def.kind == session::NodeKind::Let || def.kind == session::NodeKind::Declaration)
    for (const auto& n : a.snapshot->topLevelNames(def.path))
      if (n.name == newName && n.at && n.at->path == def.path) {
        out.refusal = "`" + newName + "` is declared already in " + def.path + " (line " + std::to_string(n.at->start.line) + ")";
        return out;
      }
  Json changes = Json::object();
  for (const auto& l : references(workspace, a, position, /*includeDeclaration=*/true)) {
    const std::string uri = l["uri"];
    if (!changes.contains(uri)) changes[uri] = Json::array();
    changes[uri].push_back(Json{{"range", l["range"]}, {"newText", newName}});
  }
  out.edit = Json{{"changes", std::move(changes)}};
  return out;
}

}  // namespace ipu::lsp
