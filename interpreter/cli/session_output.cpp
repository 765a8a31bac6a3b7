#include "interpreter/cli/session_output.h"

#include <iostream>

#include "interpreter/base/render.h"

namespace ipu::cli {

void printDiagnostics(session::Session& s, bool json, base::ColorMode color) {
  const auto& diags = s.diagnostics();
  if (json) {
    ir::Json j = ir::Json::object();
    j["diagnostics"] = base::toJson(diags, s.sources());
    j["errors"] = diags.errorCount();
    j["warnings"] = diags.warningCount();
    std::cout << j.dump() << "\n";
    return;
  }
  base::Painter painter(base::shouldColor(color, 2));
  for (const auto& d : diags.all()) {
    base::renderHuman(std::cerr, d, s.sources(), painter);
    std::cerr << "\n";
  }
  std::string summary = base::summaryLine(diags, painter);
  if (!summary.empty()) std::cerr << summary << "\n";
}

void showHookOutput(session::Session& s) {
  s.setHookOutput([](const std::string& hook, const std::string& line) { std::cerr << "[" << hook << "] " << base::printable(line) << "\n"; });
}

}  // namespace ipu::cli
