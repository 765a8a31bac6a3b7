// libFuzzer target for run directories as `ipu run --resume` finds them: the
// bytes are a directory, as sections `=== NAME\n<content>` (NAME one of
// plan.json, metrics.jsonl, events.jsonl, summary.json, or a checkpoint
// `checkpoints/<phase>/<file>.ipt`). It writes them out, then does what a
// resume does before training: reopen the directory (lock it, repair torn
// logs), read and verify every checkpoint's format and checksum, and trim
// the metrics log as the first resumed step does. The promise: no damaged
// directory crashes or hangs; every problem is an error value.
//
// Built as `ipu_fuzz_rundir_replay` (any compiler; replays
// tests/fuzz/corpus_rundir in the test suite) and, with IPU_FUZZ=ON, as the
// libFuzzer binary `ipu_fuzz_run_directory`. See docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>

#include "tests/fuzz/directory_sections.h"
#include "interpreter/runner/run_directory.h"
#include "runtime/emulator/tensor_file.h"

namespace fs = std::filesystem;

namespace {

// A directory of this process's own, removed when it exits.
struct ScratchDirectory {
  std::string path = "/tmp/ipu-fuzz-rundir-" + std::to_string(::getpid());
  ~ScratchDirectory() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ScratchDirectory scratch;
  const std::string& root = scratch.path;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::map<std::string, std::string> files = ipu::fuzz::writeSections(text, root);
  std::string error;
  auto dir = ipu::runner::RunDirectory::reopen(root, error);
  if (!dir && error.empty()) std::abort();
  for (const auto& [name, content] : files)
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".ipt") == 0) {
      auto f = ipu::emu::readTensorFile(root + "/" + name);
      if (!f && f.error().message.empty()) std::abort();
    }
  if (dir) {
    // The first step of a resume trims the log to the steps before it.
    ipu::train::StepInfo step;
    step.phase = "p";
    step.step = 3;
    step.globalStep = 3;
    std::map<std::string, double> logged;
    dir->step(ipu::train::Source::Emulator, step, logged);
  }
  return 0;
}
