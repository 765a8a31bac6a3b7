// Fuzz target for `ipu runs import` (interpreter/runner/run_import.h): the
// bytes are a run directory, as sections `=== NAME\n<content>` (the format of
// tests/fuzz/corpus_rundir: plan.json, script.ipu, metrics.jsonl,
// events.jsonl, summary.json, checkpoints/...). It is imported into an SQLite
// store, then imported again. The promises: nothing crashes or throws; an
// imported run holds every point the directory has (no more, none twice);
// the second import records nothing new (the directory is already there,
// whole).
//
// Run by ctest as `ipu_fuzz_run_import_mutate` (tests/fuzz/mutate_main.cpp)
// for a few seconds on tests/fuzz/corpus_import. See docs/fuzzing.md.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "tests/fuzz/directory_sections.h"
#include "interpreter/runner/run_import.h"
#include "interpreter/store/run_store.h"

extern const char* const kFuzzTokens[] = {
    "\n=== metrics.jsonl\n", "\n=== events.jsonl\n", "\n=== summary.json\n", "\n=== plan.json\n", "\n=== script.ipu\n",
    "\"global_step\":", "\"global_step\":-1", "\"global_step\":1.5", "\"loss\":", "null", "true", "false", "NaN", "{", "}",
    "[", "]", ":", ",", "\"status\":\"completed\"", "\"status\":\"cancelled\"", "\"seconds\":", "\"event\":\"phase_end\"",
    "\"steps_run\":", "\"evaluation\":{\"loss\":1}", "\"runs\":[]", "\n", nullptr};

namespace {
namespace fs = std::filesystem;

struct Scratch {
  std::string path = "/tmp/ipu-fuzz-import-" + std::to_string(::getpid());
  std::unique_ptr<ipu::store::RunStore> store;
  Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
    fs::create_directories(path, ec);
    store = ipu::store::openStore(path + "/ipu.db", ipu::store::OpenMode::Create);
  }
  ~Scratch() {
    store.reset();
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "ipu fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Scratch scratch;
  ipu::store::RunStore& st = *scratch.store;
  const std::string dir = scratch.path + "/run";
  const std::string text(reinterpret_cast<const char*>(data), size);
  ipu::fuzz::writeSections(text, dir);
  const ipu::runner::ImportResult first = ipu::runner::importRunDirectories(st, {dir});
  const auto runs = st.listRuns();
  if (runs.size() > 1) broken("one directory imported as " + std::to_string(runs.size()) + " runs");
  if (!first.imported.empty()) {
    const long long id = first.imported.front().second;
    const std::size_t held = ipu::runner::pointsOfRunDirectory(dir, std::numeric_limits<long long>::max()).size();
    const std::size_t stored = st.metricHistory(id).size();
    if (held != stored) broken("the directory has " + std::to_string(held) + " points, the store " + std::to_string(stored));
    const ipu::runner::ImportResult second = ipu::runner::importRunDirectories(st, {dir});
    if (!second.imported.empty() || !second.completed.empty() || st.listRuns().size() != 1)
      broken("a second import of a directory recorded it again");
  }
  for (const auto& r : st.listRuns()) st.deleteRun(r.id);
  return 0;
}
