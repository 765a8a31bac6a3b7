// `ipu repl [FILE]`: build and probe a workflow interactively. Declarations
// accumulate in a Workspace (a new definition of a name replaces the old one),
// expressions print their value, and `:commands` plan, estimate, train and
// document what has been declared. On a terminal it edits lines with libedit
// (history across sessions, Tab completion, Ctrl-C abandons the line or stops
// a `:run`, Ctrl-D leaves); otherwise it reads standard input as a script of
// REPL input and stops at the first error with exit code 1.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "interpreter/base/terminal.h"
#include "interpreter/repl/workspace.h"

namespace ipu::repl {

// Trains what `:run` names: given the planned training (with its session), it
// runs it, printing progress, and returns whether it succeeded. `cancel` is
// set by Ctrl-C. (The CLI provides it: training writes a run directory.)
using Trainer = std::function<bool(Workspace::Planned& planned, const std::atomic<bool>& cancel)>;

struct ReplOptions {
  std::string file;              // loaded first, if given
  base::ColorMode color = base::ColorMode::Auto;
  std::string historyPath;       // "" : defaultHistoryPath()
  Trainer trainer;
};

// Returns the process exit code.
int runRepl(const ReplOptions& options);

}  // namespace ipu::repl
