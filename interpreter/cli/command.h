// `ipu`'s commands as a table. Each command is one row, defined in a file of
// its own (check_command.cpp, search_command.cpp, ...) with its help and its
// own option parsing; main.cpp only finds the row and runs it. Adding a
// command is writing its file and adding its row to commands.cpp
// (docs/architecture.md, "The command line").
#pragma once

#include <string>
#include <vector>

namespace ipu::cli {

// Exit codes of every command: 0 success, 1 a user error with diagnostics
// printed, 2 a usage error. (`run` also ends with 130 when stopped by Ctrl-C.)
constexpr int kOk = 0, kUserError = 1, kUsage = 2;
constexpr int kInterrupted = 130;   // stopped by Ctrl-C (`run`, `search`, sweeps)

struct Command {
  const char* name;      // the word after `ipu`
  const char* synopsis;  // `check FILE...`: the command in the list of `ipu --help`
  const char* summary;   // beside it there: one or two lines ('\n' between them)
  const char* help;      // its own help: `ipu help NAME`, `ipu NAME --help`
  // The words after the name (options anywhere among them; --help never
  // reaches it). Parses them, runs, and returns the exit code.
  int (*run)(const std::vector<std::string>& args);
};

// Every command, in the order `ipu --help` lists them.
const std::vector<Command>& commands();
const Command* findCommand(const std::string& name);

// The rows, one per file.
extern const Command kCheckCommand, kPlanCommand, kFmtCommand, kEstimateCommand, kSearchCommand,
    kCalibrateCommand, kRunCommand, kReplCommand, kRunsCommand, kReportCommand, kSweepCommand, kAgentCommand, kLspCommand, kUiCommand;

}  // namespace ipu::cli
