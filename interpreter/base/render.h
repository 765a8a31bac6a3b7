// Rendering diagnostics for people and for tools.
//
// Human form: a GNU first line that editors and CI problem matchers parse,
// then a rustc-style excerpt with a caret underline, then `help:` and notes:
//
//   script.ipu:12:7: error[IPU1001]: unknown name `bert_lrage`
//      |
//   12 | model m = bert_lrage
//      |           ^^^^^^^^^^
//      = help: did you mean `bert_large`?
//
// JSON form (`--format json`): one object per diagnostic with code, severity,
// message, help, file, 1-based line/column (start and end), notes and the
// rendered text; documented in docs/diagnostics.md.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/base/terminal.h"
#include "runtime/ir/json.h"

namespace ipu::base {

void renderHuman(std::ostream& os, const Diagnostic& d, const SourceMap& sources, const Painter& painter);
std::string renderHuman(const Diagnostic& d, const SourceMap& sources, bool color = false);
// "error: aborting due to 2 errors; 1 warning emitted" style summary line, or empty.
std::string summaryLine(const Diagnostics& diags, const Painter& painter);

ir::Json toJson(const Diagnostic& d, const SourceMap& sources);
ir::Json toJson(const Diagnostics& diags, const SourceMap& sources);

// `file:line:col` for a span (or "<unknown>").
std::string location(const Span& span, const SourceMap& sources);

// Text from outside (a script's bytes quoted in a message, a file name, what
// a hook prints) made safe for a terminal: control characters (C0, DEL, C1)
// and bytes that are not UTF-8 are shown as `\xNN` escapes, so no escape
// sequence from a script reaches the terminal. renderHuman applies it to
// every message, help line, note and path.
std::string printable(std::string_view text);

const char* severityName(Severity s);

}  // namespace ipu::base
