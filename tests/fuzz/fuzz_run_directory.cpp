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

#include "interpreter/runner/run_directory.h"
#include "runtime/emulator/tensor_file.h"

namespace fs = std::filesystem;

namespace {

bool safeName(const std::string& name) {
  if (name.empty() || name.size() > 100 || name.find("..") != std::string::npos || name[0] == '/') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '/')) return false;
  return true;
}

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
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root, ec);
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Sections: "=== NAME\n" starts one.
  std::map<std::string, std::string> files;
  std::size_t at = text.rfind("=== ", 0) == 0 ? 0 : text.find("\n=== ");
  if (at != std::string::npos && at != 0) ++at;
  while (at != std::string::npos && at < text.size()) {
    const std::size_t nameEnd = text.find('\n', at);
    if (nameEnd == std::string::npos) break;
    const std::string name = text.substr(at + 4, nameEnd - at - 4);
    std::size_t next = text.find("\n=== ", nameEnd);
    const std::size_t end = next == std::string::npos ? text.size() : next + 1;
    if (safeName(name) && files.size() < 16) files[name] = text.substr(nameEnd + 1, end - nameEnd - 1);
    at = next == std::string::npos ? std::string::npos : next + 1;
  }
  for (const auto& [name, content] : files) {
    const fs::path p = fs::path(root) / name;
    fs::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << content;
  }
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
