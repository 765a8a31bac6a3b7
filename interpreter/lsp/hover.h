// textDocument/hover: what is under the cursor, answered by the session's
// position queries (queries.h), never by writing text into the script.
//
// - a field's name: its record kind, type, default and doc (the schema's
//   row, check/schema.cpp: the same words as docs/language.md);
// - a name: the line that declares it, the comment block above that line
//   (stdlib declarations are documented that way), where it is, and the
//   value and type the check gave it;
// - any other expression: its value and type;
// - then, on a pipeline stage or a layer, what the plan says of it
//   (plan_views.h: an IPU's memory by category, a layer's parameters, FLOPs
//   and memory).
//
// Markdown, with the declaration in an `ipu` code block.
#pragma once

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"

namespace ipu::lsp {

struct Analysis;
class Workspace;

// The Hover result, or null when the position has nothing to say.
Json hover(Workspace& workspace, const Analysis& analysis, Position position);

}  // namespace ipu::lsp
