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
// - A mapping that does not fit (IPU2001): the help lists the changes the
//   planner tried and found to fit (plan/levers.h: `optimizer_state:
//   streaming`, `pipeline: balanced(8)`, ...); each becomes an edit of the
//   mapping declaration the diagnostic is in, its value printed by the
//   table of mapping fields (ir::parseField, ir::fieldText): a field written
//   already gets the new value, another is added above the closing brace.
//   A lever that changes no mapping field (a precision's accumulators), or a
//   mapping written as `other with { }` or in another file, gets none.
//
// The help is read back from the diagnostic the client sends with the
// request (its message carries `help:` on a line of its own, as published), by
// the functions that sit beside the ones that write those sentences, so the
// fixes follow the words.
//
// Besides the quick fixes, in a mapping declaration that trainings use, for a
// client that resolves code actions: "Apply the best mapping found by the
// search" (kind refactor.rewrite), listed without its edit; resolving it runs
// the search (best_mapping.h). Its `data` names the document, its version
// and the mapping.
#pragma once

#include "interpreter/lsp/json_rpc.h"

namespace ipu::lsp {

struct Analysis;
class Workspace;

// CodeAction[] for the request's params (range, context.diagnostics,
// context.only); `resolvable`: the client resolves actions' edits.
Json codeActions(Workspace& workspace, const Analysis& analysis, const Json& params, bool resolvable);

}  // namespace ipu::lsp
