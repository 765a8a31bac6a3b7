#include "interpreter/lsp/navigation.h"

#include <set>

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

}  // namespace ipu::lsp
