// `ipu fmt FILE...`: format scripts in the canonical style, in place.
#include <iostream>

#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/cli/session_output.h"
#include "interpreter/syntax/format.h"

namespace ipu::cli {

namespace {

const char* kHelp = R"(usage: ipu fmt FILE... [--check | --stdout] [--color WHEN]

Format scripts in the canonical style, in place. A file is rewritten only when
its formatted text parses back to the same program, and only whole (docs/language.md).

options:
  --check                change nothing; exit 1 if a file is not formatted
  --stdout               print the formatted text instead of writing the file
  --color auto|always|never
                         colour of diagnostics (default auto; NO_COLOR disables)
)";

struct Options {
  std::vector<std::string> files;
  bool check = false;
  bool toStdout = false;
  base::ColorMode color = base::ColorMode::Auto;
};

// Formats one file; false when it could not be, or (with --check) is not formatted.
bool format(const std::string& path, const Options& o) {
  session::Session s;
  auto file = s.readFile(path);
  if (!file) {
    printDiagnostics(s, false, o.color);
    return false;
  }
  // Formatted only when the result parses back to the same tree (format.h):
  // a formatter bug must never damage a script.
  syntax::Formatted f = syntax::formatSource(s.sources(), *file, s.diagnostics());
  switch (f.outcome) {
    case syntax::Formatted::Outcome::Formatted: break;
    case syntax::Formatted::Outcome::SyntaxErrors:
      printDiagnostics(s, false, o.color);
      return false;
    case syntax::Formatted::Outcome::TooLarge:
      std::cerr << "ipu fmt: formatted, `" << path << "` would be " << f.bytes
                << " bytes, over the 8 MiB a script may have; it is left untouched (split it into modules and "
                   "`import` them)\n";
      return false;
    case syntax::Formatted::Outcome::WouldChangeMeaning:
      std::cerr << "ipu fmt: internal error: formatting `" << path
                << "` would change its meaning; the file is left untouched (please report this)\n";
      return false;
  }
  const std::string& formatted = f.text;
  const std::string& original = s.sources().file(*file).text();
  if (o.toStdout) {
    std::cout << formatted;
    return true;
  }
  if (original == formatted) return true;
  if (o.check) {
    std::cerr << path << ": not formatted (run `ipu fmt " << path << "`)\n";
    return false;
  }
  std::string error;
  if (!replaceFile(path, formatted, error)) {
    std::cerr << "ipu fmt: " << error << "\n";
    return false;
  }
  return true;
}

int run(const std::vector<std::string>& args) {
  Options o;
  ArgumentReader in(args);
  std::string v;
  while (in.next()) {
    if (in.flag("--check")) o.check = true;
    else if (in.flag("--stdout")) o.toStdout = true;
    else if (in.value("--color", v)) {
      if (!parseColor(v, o.color)) return usage("fmt", "--color takes `auto`, `always` or `never`");
    } else if (in.isOption()) {
      return usage("fmt", "unknown option `" + in.word() + "`");
    } else {
      o.files.push_back(in.word());
    }
  }
  if (o.files.empty()) return usage("fmt", "`fmt` takes one or more scripts");
  int status = kOk;
  for (const auto& path : o.files)
    if (!format(path, o)) status = kUserError;
  return status;
}

}  // namespace

const Command kFmtCommand{"fmt", "fmt FILE...", "format scripts in the canonical style (in place)", kHelp, run};

}  // namespace ipu::cli
