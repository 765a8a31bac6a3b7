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

const char* severityName(Severity s);

}  // namespace ipu::base
