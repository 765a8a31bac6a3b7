// textDocument/signatureHelp: inside the arguments of a call, what the
// called thing takes, with the argument being written active.
//
// - A definition with parameters (`model bert(layers: int, ...)`, a `layer`
//   or any declaration written with a parameter list): its parameters with
//   their types and defaults as declared, and the comment above it.
// - A built-in optimizer (`lamb(beta1: 0.9, ...)`): the optimizer record's
//   fields from the schema, with their docs.
//
// The call is found lexically (text_scan.h), since an argument list being
// typed does not parse: the innermost `(` open before the cursor and the
// name before it. The active parameter is the one named before a `:` in
// the current argument, else the argument's position. The callee is looked
// up among the names the document's top level sees (Workspace::namingSnapshot).
#pragma once

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"

namespace ipu::lsp {

struct Analysis;
class Workspace;

// SignatureHelp, or null outside a call of something with parameters.
Json signatureHelp(Workspace& workspace, const Analysis& analysis, Position position);

}  // namespace ipu::lsp
