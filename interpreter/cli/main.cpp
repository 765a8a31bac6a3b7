// `ipu`: the command line. It finds the command's row in the table
// (command.h, commands.cpp) and runs it with the words after its name; every
// command parses its own options and has its own help. What is left here is
// what no command owns: `--help`, `--version`, `ipu help COMMAND`, and the
// suggestion for a misspelt command. Colour follows each command's --color,
// with NO_COLOR honoured everywhere (base::shouldColor).
#include <iostream>
#include <string>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/cli/command.h"

namespace {

using namespace ipu::cli;

const char* kIntro = R"(usage: ipu <command> [options] FILE

Plan and simulate training on Graphcore IPU pods from `.ipu` scripts.

commands:
)";

const char* kOutro = R"(
`ipu help COMMAND` or `ipu COMMAND --help` shows a command's options.

options:
  -h, --help             this help
  --version              the version

Exit codes: 0 success, 1 an error in the input (reported), 2 a usage error.
Documentation: docs/language.md, docs/plan.md, docs/cost-model.md, docs/run.md,
docs/repl.md, docs/hooks.md, docs/emulator.md, docs/tracking.md, docs/sweeps.md,
docs/diagnostics.md, docs/editor.md.
)";

void printHelp(std::ostream& os) {
  os << kIntro;
  constexpr std::size_t kColumn = 16;  // the summaries start in one column
  for (const auto& c : commands()) {
    std::string synopsis = c.synopsis;
    os << "  " << synopsis;
    const std::string summary = c.summary;
    std::size_t start = 0;
    bool first = true;
    while (start <= summary.size()) {
      std::size_t end = summary.find('\n', start);
      if (end == std::string::npos) end = summary.size();
      if (first && synopsis.size() < kColumn) os << std::string(kColumn + 1 - synopsis.size(), ' ');
      else os << "\n" << std::string(kColumn + 3, ' ');
      os << summary.substr(start, end - start);
      first = false;
      start = end + 1;
    }
    os << "\n";
  }
  os << kOutro;
}

std::vector<std::string> commandNames() {
  std::vector<std::string> names;
  for (const auto& c : commands()) names.push_back(c.name);
  return names;
}

int unknownCommand(const std::string& word) {
  std::string hint = ipu::base::didYouMean(word, commandNames());
  std::cerr << "ipu: unknown command `" << word << "`" << (hint.empty() ? "" : "; " + hint)
            << "\nusage: ipu <command> [options] FILE  (`ipu --help` lists commands)\n";
  return kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    printHelp(std::cerr);
    return kUsage;
  }
  for (const auto& a : args) {
    if (a == "help" || (!a.empty() && a[0] != '-')) break;  // the command's own help, below
    if (a == "-h" || a == "--help") {
      printHelp(std::cout);
      return kOk;
    }
    if (a == "--version") {
      std::cout << "ipu 0.1.0\n";
      return kOk;
    }
  }
  if (args[0] == "help") {
    if (args.size() == 1) {
      printHelp(std::cout);
      return kOk;
    }
    const Command* c = findCommand(args[1]);
    if (c == nullptr) return unknownCommand(args[1]);
    std::cout << c->help;
    return kOk;
  }
  // Options before the command word (`ipu --color never check x.ipu`) are
  // the command's too: they go to it first. Only --color's value is known
  // here; any other option that takes a value comes after the command.
  std::size_t at = 0;
  while (at < args.size() && args[at].size() > 1 && args[at][0] == '-') at += args[at] == "--color" ? 2 : 1;
  if (at >= args.size()) {
    std::cerr << "ipu: no command\nusage: ipu <command> [options] FILE  (`ipu --help` lists commands)\n";
    return kUsage;
  }
  const Command* c = findCommand(args[at]);
  if (c == nullptr) return unknownCommand(args[at]);
  std::vector<std::string> rest(args.begin(), args.begin() + static_cast<long>(at));
  rest.insert(rest.end(), args.begin() + static_cast<long>(at) + 1, args.end());
  for (const auto& a : rest)
    if (a == "-h" || a == "--help") {
      std::cout << c->help;
      return kOk;
    }
  return c->run(rest);
}
