// `ipu search FILE`: for each phase of the script's runs, the fastest mappings
// of its model onto its pod at its global batch that fit (interpreter/search),
// how the script's own mapping compares, a Pareto table of IPUs against
// throughput, and, when nothing fits, why. Options and output are documented
// in docs/search.md.
#pragma once

#include <string>
#include <vector>

namespace ipu::cli {

// `args` are the words after `search`. Returns the process exit code: 0 when
// every searched phase has a mapping that fits, 1 when the script has errors
// or some phase has none, 2 on a usage error.
int searchCommand(const std::vector<std::string>& args);

}  // namespace ipu::cli
