// textDocument/formatting: `ipu fmt`'s text (syntax/format.h: the printer,
// kept only when it parses back to the same program), sent as one edit that
// replaces only the part that changed, so the editor keeps the cursor and
// the undo history tidy. A script with syntax errors is left as it is (null:
// its diagnostics already say why).
#pragma once

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"

namespace ipu::lsp {

struct Analysis;

// TextEdit[] (empty when already formatted), or null when it cannot be formatted.
Json formatDocument(const Analysis& analysis, PositionEncoding encoding);

}  // namespace ipu::lsp
