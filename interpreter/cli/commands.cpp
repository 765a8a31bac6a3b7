#include "interpreter/cli/command.h"

namespace ipu::cli {

const std::vector<Command>& commands() {
  // Built on first use, after every row (a constant) is initialised.
  static const std::vector<Command> table{
      kCheckCommand,     kPlanCommand, kFmtCommand,  kEstimateCommand, kSearchCommand,
      kCalibrateCommand, kRunCommand,  kReplCommand, kRunsCommand,     kReportCommand,
      kSweepCommand,     kAgentCommand, kUiCommand,  kLspCommand,
  };
  return table;
}

const Command* findCommand(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

}  // namespace ipu::cli
