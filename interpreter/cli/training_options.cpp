#include "interpreter/cli/training_options.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "interpreter/cli/runs_command.h"

namespace ipu::cli {

bool readStoreOption(ArgumentReader& in, StoreOptions& o, std::string& error) {
  std::string v;
  if (in.value("--runs-dir", v)) {
    if (v.empty()) error = "`--runs-dir` needs a directory";
    o.runsDir = v;
  } else if (in.value("--store", v)) {
    if (v.empty()) error = "`--store` needs a path or a postgresql:// URI";
    o.store = v;
  } else if (in.flag("--no-store")) {
    o.noStore = true;
  } else {
    return false;
  }
  return true;
}

bool readInstancesOption(ArgumentReader& in, int& instances, std::string& error) {
  std::string v;
  if (!in.value("--instances", v)) return false;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 1 || n > 4096) error = "`--instances` needs a whole number from 1 to 4096";
  else instances = static_cast<int>(n);
  return true;
}

bool readSetOption(ArgumentReader& in, ValuesSet& set, std::string& error) {
  std::string v;
  if (!in.value("--set", v)) return false;
  const std::size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
    error = "`--set` takes PATH=VALUE, e.g. `--set phase.one.lr=2e-4` or `--set mapping.replicas=2`";
    return true;
  }
  std::string at = v.substr(0, eq);
  // `--set "lr = 0.1"` reads as it looks.
  while (!at.empty() && at.back() == ' ') at.pop_back();
  if (at.empty() || at.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != std::string::npos) {
    error = "`--set " + v + "`: `" + at + "` is not a path (letters, digits, `_` and `.`, e.g. `phase.one.lr`)";
    return true;
  }
  std::string value = v.substr(eq + 1);
  value.erase(0, value.find_first_not_of(' '));
  if (value.empty()) {
    error = "`--set " + v + "` gives `" + at + "` no value";
    return true;
  }
  set.emplace_back(at, value);
  return true;
}

bool setValues(session::Session& s, const ValuesSet& set) {
  if (set.empty()) return true;
  check::Overrides given;  // training "": every training the script runs
  bool parsed = true;
  for (const auto& [at, value] : set) {
    if (auto w = s.readOverride(at, value)) given.written.push_back(std::move(*w));
    else parsed = false;
  }
  if (!parsed) return false;
  s.setOverrides(std::move(given));
  return true;
}

bool readTrainingOption(ArgumentReader& in, TrainingOptions& o, std::string& error) {
  if (readStoreOption(in, o.store, error)) return true;
  const std::string& a = in.word();
  if (a == "--resume") {
    o.resume = true;
    return true;
  }
  if (a.rfind("--resume=", 0) == 0) {
    o.resume = true;
    o.resumeFrom = a.substr(9);
    if (o.resumeFrom.empty()) error = "`--resume=` needs a run directory";
    return true;
  }
  {
    std::string v;
    if (in.value("--artifacts", v)) {
      o.artifacts = store::parseArtifactStorage(v);
      if (!o.artifacts) error = "`--artifacts` takes `store` (checkpoints' bytes in the run store too) or `files` (in the run directory only)";
      return true;
    }
  }
  for (const char* name : {"--threads", "--steps", "--checkpoint-every"}) {
    std::string v;
    if (!in.value(name, v)) continue;
    const bool threads = std::string(name) == "--threads";
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < (threads ? 0 : 1) || n > 1000000000) {
      error = std::string("`") + name + "` needs a whole number" + (threads ? "" : " of at least 1");
      return true;
    }
    if (threads) o.threads = static_cast<int>(std::min<long long>(n, 1024));
    else if (std::string(name) == "--steps") o.steps = n;
    else o.checkpointEvery = n;
    return true;
  }
  return false;
}

std::unique_ptr<store::RunStore> openRecordingStore(const StoreOptions& o, std::string& error) {
  if (o.noStore) return nullptr;
  std::unique_ptr<store::RunStore> st;
  try {
    st = store::openStore(storeLocation(o.store, o.runsDir), store::OpenMode::Create);
  } catch (const store::StoreError& e) {
    error = e.what();
    return nullptr;
  }
  // A store that opens but cannot be written (a read-only file, a user who
  // may only read, a lock that is never let go) would leave the whole run
  // unrecorded: refused before anything starts.
  try {
    st->checkWritable();
  } catch (const store::StoreError& e) {
    error = "the run store `" + st->location() + "` cannot be written, so nothing would be recorded (" + e.what() +
            "); make it writable for this user (the file and its directory, or the database user's rights), or give "
            "--store a store that is";
    return nullptr;
  }
  return st;
}

runner::TrainSettings trainSettings(const TrainingOptions& o, const std::string& scriptText, const std::string& scriptDir,
                                    base::ColorMode color) {
  runner::TrainSettings t;
  t.runsRoot = o.store.runsDir;
  t.resume = o.resume;
  t.resumeFrom = o.resumeFrom;
  t.threads = o.threads;
  t.stepLimit = o.steps;
  t.checkpointEvery = o.checkpointEvery;
  t.artifacts = o.artifacts.value_or(store::defaultArtifactStorage(storeLocation(o.store.store, o.store.runsDir)));
  t.scriptText = scriptText;
  t.scriptDirectory = scriptDir;
  t.color = color;
  return t;
}

void printTrainResult(const runner::TrainResult& r, const std::string& training, base::ColorMode color) {
  base::Painter p(base::shouldColor(color, 1));
  using base::Style;
  switch (r.status) {
    case runner::TrainResult::Status::Completed: std::cout << p.paint(Style::Good, "completed"); break;
    case runner::TrainResult::Status::Stopped: std::cout << p.paint(Style::Warning, "stopped by a hook"); break;
    case runner::TrainResult::Status::Cancelled: std::cout << p.paint(Style::Warning, "stopped by Ctrl-C"); break;
    case runner::TrainResult::Status::Failed: std::cout << p.paint(Style::Error, "failed"); break;
  }
  std::cout << ": training " << training;
  if (!r.runDirectory.empty()) std::cout << ", recorded in " << r.runDirectory;
  else if (r.status == runner::TrainResult::Status::Failed) std::cout << " (nothing was recorded)";
  std::cout << "\n";
  if (r.status == runner::TrainResult::Status::Stopped && !r.stopReason.empty())
    std::cout << "  reason: " << r.stopReason << "\n";
  if (r.status == runner::TrainResult::Status::Cancelled)
    std::cout << p.paint(Style::Dim, "continue it with --resume=" + r.runDirectory) << "\n";
}

void reportStoreRecord(const runner::TrainResult& r, const store::RunStore* runStore) {
  if (runStore == nullptr) return;
  if (r.storeRunId != 0) std::cout << "recorded as run " << r.storeRunId << " in " << runStore->location() << "\n";
  if (!r.storeFailure.empty()) std::cerr << "ipu run: warning: " << r.storeFailure << "\n";
}

}  // namespace ipu::cli
