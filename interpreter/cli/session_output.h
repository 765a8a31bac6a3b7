// What the script commands (check, plan, estimate, run, fmt) print of a
// session: its diagnostics, for a person (stderr) or as JSON (stdout,
// docs/diagnostics.md), and what hooks print.
#pragma once

#include "interpreter/base/terminal.h"
#include "interpreter/session/session.h"

namespace ipu::cli {

void printDiagnostics(session::Session& s, bool json, base::ColorMode color);

// What hooks print goes to stderr, tagged with the hook's name, so that
// stdout stays the report (or the JSON document).
void showHookOutput(session::Session& s);

}  // namespace ipu::cli
