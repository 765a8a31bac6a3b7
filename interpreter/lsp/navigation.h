// textDocument/definition and textDocument/references, from the session's
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

}  // namespace ipu::lsp
