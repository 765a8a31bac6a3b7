// libFuzzer target for `ipu calibrate`'s table: the bytes are the CSV file.
// It runs what the command runs before planning (the reader and every check
// of calibration_table.h), then plans the rows whose script is one of the
// published configurations (tests/published, reached through the table's
// directory) and checks their plausibility, and formats every figure. The
// promise: no table crashes, hangs or prints a figure of hundreds of digits;
// every problem is an error at its line.
//
// Built as `ipu_fuzz_table_replay` (any compiler; replays
// tests/fuzz/corpus_calibrate in the test suite) and, with IPU_FUZZ=ON, as the
// libFuzzer binary `ipu_fuzz_calibration_table`. See docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "interpreter/cli/calibration_table.h"
#include "interpreter/session/session.h"

namespace {

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "ipu fuzz: CALIBRATION TABLE BUG: %s\n", what.c_str());
  std::abort();
}

// A directory of this process's own, removed when it exits.
struct ScratchDirectory {
  std::string path = "/tmp/ipu-fuzz-table-" + std::to_string(::getpid());
  ScratchDirectory() { std::filesystem::create_directories(path); }
  ~ScratchDirectory() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::string& tableDirectory() {
  static const ScratchDirectory dir;
  return dir.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tableDirectory() + "/table.csv";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ipu::cli::CalibrationTable table = ipu::cli::readCalibrationTable(path);
  for (const auto& p : table.problems)
    if (p.message.empty() || p.line < 0) bug("a problem without a message or with a bad line");
  for (const auto& row : table.rows) {
    if (!(row.samplesPerSecond >= 1e-3 && row.samplesPerSecond <= 1e9)) bug("an implausible figure passed the reader");
    if (ipu::cli::throughputText(row.samplesPerSecond).size() > 16) bug("a figure printed too long");
  }
  // Plan at most a few rows whose script is a published configuration.
  int planned = 0;
  for (const auto& row : table.rows) {
    if (planned >= 2) break;
    const std::string script = std::string(IPU_PUBLISHED_DIR) + "/" + row.script;
    if (row.script.find('/') != std::string::npos || row.script.find("..") != std::string::npos ||
        !std::filesystem::is_regular_file(script))
      continue;
    ++planned;
    ipu::session::Session s;
    auto file = s.readFile(script);
    const ipu::ir::ExecutionPlan* plan = file ? s.plan(*file, true) : nullptr;
    if (plan == nullptr || plan->runs.empty() || plan->runs[0].phases.empty()) continue;
    std::string why = ipu::cli::implausibleMeasurement(row.samplesPerSecond, plan->runs[0].phases[0]);
    if (why.size() > 400) bug("a plausibility message too long");
  }
  return 0;
}
