// textDocument/formatting: `ipu fmt`'s text (syntax/format.h: the printer,
// kept only when it parses back to the same program), sent as one edit that
// replaces only the part that changed, so the editor keeps the cursor and
// the undo history tidy. A script with syntax errors is left as it is (null:
// its diagnostics already say why).
//
// textDocument/rangeFormatting: the same text, but only the changes to the
// lines the range touches: the lines of the text and of `ipu fmt`'s are
// matched by their text without spaces (a longest common subsequence): a
// re-spaced line is an edit of its own, and lines the printer split, joined
// or added are one edit with their unmatched neighbours. The edits that
// touch the range's lines are sent; the lines outside are left as they are. A range ending at the start of a line leaves that line
// out, as an editor's selection of whole lines does.
#pragma once

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"

namespace ipu::lsp {

struct Analysis;

// TextEdit[] (empty when already formatted), or null when it cannot be formatted.
Json formatDocument(const Analysis& analysis, PositionEncoding encoding);
// TextEdit[] for the lines of `range`, or null when it cannot be formatted.
Json formatRange(const Analysis& analysis, const Range& range, PositionEncoding encoding);

}  // namespace ipu::lsp
