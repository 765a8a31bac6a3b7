#include "interpreter/store/run_store.h"

#include <chrono>
#include <cstdlib>

namespace ipu::store {

std::string artifactFile(const Artifact& a) {
  if (a.runDirectory.empty() || (!a.path.empty() && a.path.front() == '/')) return a.path;
  return a.runDirectory + "/" + a.path;
}

const char* name(ArtifactStorage s) { return s == ArtifactStorage::Store ? "store" : "files"; }

std::optional<ArtifactStorage> parseArtifactStorage(const std::string& text) {
  if (text == "store") return ArtifactStorage::Store;
  if (text == "files") return ArtifactStorage::Files;
  return std::nullopt;
}

ArtifactStorage defaultArtifactStorage(const std::string& location) {
  return isPostgresLocation(location) ? ArtifactStorage::Store : ArtifactStorage::Files;
}

const char* name(RunKind k) { return k == RunKind::Run ? "run" : "estimate"; }

const char* name(RunStatus s) {
  switch (s) {
    case RunStatus::Running: return "running";
    case RunStatus::Finished: return "finished";
    case RunStatus::Failed: return "failed";
    case RunStatus::Stopped: return "stopped";
    case RunStatus::Cancelled: return "cancelled";
    case RunStatus::Killed: return "killed";
  }
  return "failed";
}

std::optional<RunKind> parseRunKind(const std::string& text) {
  if (text == "run") return RunKind::Run;
  if (text == "estimate") return RunKind::Estimate;
  return std::nullopt;
}

std::optional<RunStatus> parseRunStatus(const std::string& text) {
  for (RunStatus s : {RunStatus::Running, RunStatus::Finished, RunStatus::Failed, RunStatus::Stopped,
                      RunStatus::Cancelled, RunStatus::Killed})
    if (text == name(s)) return s;
  return std::nullopt;
}

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string tagProblem(const std::string& tag) {
  if (tag.empty()) return "a tag cannot be empty";
  // Other control characters are kept, and escaped where a tag is shown.
  if (tag.find_first_of(", \t\n") != std::string::npos) return "a tag is one word without commas or spaces: `" + tag + "`";
  if (tag.size() > 200) return "a tag is at most 200 bytes long";
  return "";
}

std::string runNameProblem(const std::string& name) {
  if (name.empty()) return "a run's name cannot be empty";
  if (name.size() > 200) return "a run's name is at most 200 bytes long";
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f) return "a run's name is one line of printable text";
  if (name.find_first_not_of("0123456789") == std::string::npos)
    return "a run's name cannot be a whole number (`" + name + "` reads as a run's id); add a word: `trial-" + name + "`";
  return "";
}

std::optional<RunRecord> findRun(RunStore& store, const std::string& idOrName, const std::vector<RunRecord>* all) {
  char* end = nullptr;
  const long long id = std::strtoll(idOrName.c_str(), &end, 10);
  if (!idOrName.empty() && *end == '\0') return store.run(id);
  std::vector<RunRecord> listed;
  if (all == nullptr) {
    listed = store.listRuns();
    all = &listed;
  }
  for (const auto& r : *all)
    if (r.name == idOrName) return store.run(r.id);
  return std::nullopt;
}

}  // namespace ipu::store
