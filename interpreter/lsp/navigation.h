// textDocument/definition, references and rename, from the session's
// definitionOf, usesOf and importedModuleAt (queries.h).
//
// A definition in the standard library is shown in its read-only file
// (standard_library_files.h). References are gathered from every open
// document's latest check that read the declaring file with the same text,
// so a module's declaration finds its uses in each open script importing it,
// not only in the script asked from.
#pragma once

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"

namespace ipu::lsp {

struct Analysis;
class Workspace;

// A Location, or null. On an import's path: the module's file.
Json definition(Workspace& workspace, const Analysis& analysis, Position position);
// Location[] (empty when the position names nothing).
Json references(Workspace& workspace, const Analysis& analysis, Position position, bool includeDeclaration);

// textDocument/prepareRename: the range of the name at the position and the
// name, or null when it names nothing that can be renamed (a field, a
// built-in, an enumeration member, a declaration of the standard library).
Json prepareRename(Workspace& workspace, const Analysis& analysis, Position position);
// textDocument/rename: a WorkspaceEdit that renames the declaration and every
// use references() finds. Not done (`refusal` says why) when the new name
// is not a name, is a keyword, or is declared already at the top level that
// declares the old one, or when the position names nothing renameable.
// Uses in files no open document's check read are not seen.
struct Rename {
  Json edit;
  std::string refusal;
};
Rename rename(Workspace& workspace, const Analysis& analysis, Position position, const std::string& newName);

}  // namespace ipu::lsp
