// textDocument/codeAction: quick fixes for the diagnostics whose help says
// the fix.
//
// - A misspelt name, field, option, unit, layer or module: the help's "did you
//   mean `x` or `y`?" (base::didYouMean) gives one fix per candidate, which
//   replaces the diagnostic's range (a name, or a quoted module path).
// - A standard library name used without its import: the help's "add
//   `import "std/..."`" (check::importHelp) gives an edit that adds the
//   import after the script's last one.
//
// The help is read back from the diagnostic the client sends with the
// request (its message carries `help:` on a line of its own, as published), by
// the functions that sit beside the ones that write those sentences, so the
// fixes follow the words. The fixes of IPU2001 (memory) and "apply the best
// mapping found" are not here yet (docs/editor.md).
#pragma once

#include "interpreter/lsp/json_rpc.h"

namespace ipu::lsp {

struct Analysis;
class Workspace;

// CodeAction[] for the request's params (range, context.diagnostics, context.only).
Json codeActions(Workspace& workspace, const Analysis& analysis, const Json& params);

}  // namespace ipu::lsp
