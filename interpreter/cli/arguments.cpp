#include "interpreter/cli/arguments.h"

#include <iostream>

#include "interpreter/cli/command.h"

namespace ipu::cli {

bool ArgumentReader::value(const char* name, std::string& value, const char* alias) {
  const std::string& w = word();
  const std::string prefix = std::string(name) + "=";
  if (w.rfind(prefix, 0) == 0) {
    value = w.substr(prefix.size());
    return true;
  }
  if (w != name && (alias == nullptr || w != alias)) return false;
  value = at_ + 1 < args_.size() ? args_[++at_] : std::string();
  return true;
}

int usage(const std::string& command, const std::string& message) {
  // The message and where to look, not the whole help: the mistake stays on screen.
  std::cerr << "ipu " << command << ": " << message << "\n(`ipu " << command << " --help` lists what it takes)\n";
  return kUsage;
}

bool parseColor(const std::string& value, base::ColorMode& mode) {
  if (value == "auto") mode = base::ColorMode::Auto;
  else if (value == "always") mode = base::ColorMode::Always;
  else if (value == "never") mode = base::ColorMode::Never;
  else return false;
  return true;
}

}  // namespace ipu::cli
