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

#include "interpreter/runner/run_import.h"
#include "interpreter/store/run_store.h"

extern const char* const kFuzzTokens[] = {
    "\n=== metrics.jsonl\n", "\n=== events.jsonl\n", "\n=== summary.json\n", "\n=== plan.json\n", "\n=== script.ipu\n",
    "\"global_step\":", "\"global_step\":-1", "\"global_step\":1.5", "\"loss\":", "null", "true", "false", "NaN", "{", "}",
    "[", "]", ":", ",", "\"status\":\"completed\"", "\"status\":\"cancelled\"", "\"seconds\":", "\"event\":\"phase_end\"",
    "\"steps_run\":", "\"evaluation\":{\"loss\":1}", "\"runs\":[]", "\n", nullptr};

namespace {
namespace fs = std::filesystem;

bool safeName(const std::string& name) {
  if (name.empty() || name.size() > 100 || name.find("..") != std::string::npos || name[0] == '/') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '/')) return false;
  return true;
}

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
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> files;
  std::size_t at = text.rfind("=== ", 0) == 0 ? 0 : text.find("\n=== ");
  if (at != std::string::npos && at != 0) ++at;
  while (at != std::string::npos && at < text.size()) {
    const std::size_t nameEnd = text.find('\n', at);
    if (nameEnd == std::string::npos) break;
    const std::string name = text.substr(at + 4, nameEnd - at - 4);
    const std::size_t next = text.find("\n=== ", nameEnd);
    const std::size_t end = next == std::string::npos ? text.size() : next + 1;
    if (safeName(name) && files.size() < 16) files[name] = text.substr(nameEnd + 1, end - nameEnd - 1);
    at = next == std::string::npos ? std::string::npos : next + 1;
  }
  for (const auto& [name, content] : files) {
    const fs::path p = fs::path(dir) / name;
    fs::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << content;
  }
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
