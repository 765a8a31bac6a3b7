// The options `run` and `repl` share (the emulator's run directories,
// checkpoints and threads) and the run store `run`, `repl` and `estimate`
// record into (docs/run.md, docs/tracking.md), with what they print of a
// training run.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "interpreter/base/terminal.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/runner/train.h"
#include "interpreter/session/session.h"
#include "interpreter/store/run_store.h"

namespace ipu::cli {

struct StoreOptions {
  std::string runsDir = "runs";  // --runs-dir: run directories, and the default store runs/ipu.db
  std::string store;             // --store PATH|URI
  bool noStore = false;          // --no-store
};

struct TrainingOptions {
  StoreOptions store;
  bool resume = false;       // --resume[=DIR]
  std::string resumeFrom;
  int threads = 0;           // --threads N (0: all)
  long long steps = 0;       // --steps N (0: no limit)
  long long checkpointEvery = 100;
  // --artifacts store|files; none: the store's default (store::defaultArtifactStorage)
  std::optional<store::ArtifactStorage> artifacts;
};

// Reads `--instances N` when it is the current word (as readStoreOption):
// the replicas as N host processes (`ipu run`: MPI instances; `ipu estimate`:
// priced as host instances).
bool readInstancesOption(ArgumentReader& in, int& instances, std::string& error);

// `--set PATH=VALUE` options, in the order given: (PATH, VALUE).
using ValuesSet = std::vector<std::pair<std::string, std::string>>;
// Reads `--set PATH=VALUE` when it is the current word (as readStoreOption).
bool readSetOption(ArgumentReader& in, ValuesSet& set, std::string& error);
// Gives the session `set` in place of what the script writes, for every
// training it runs (session.h, readOverride). False, with diagnostics on the
// session, when a VALUE does not parse; the rest is checked with the script.
bool setValues(session::Session& s, const ValuesSet& set);

// Reads the current word when it is one of these options: returns true when
// it was (then `error` is set, non-empty, for a bad value), false when it is
// another word.
bool readStoreOption(ArgumentReader& in, StoreOptions& o, std::string& error);
bool readTrainingOption(ArgumentReader& in, TrainingOptions& o, std::string& error);

// The run store to record into; null with --no-store, or when it cannot be
// opened (then `error` says why).
std::unique_ptr<store::RunStore> openRecordingStore(const StoreOptions& o, std::string& error);

runner::TrainSettings trainSettings(const TrainingOptions& o, const std::string& scriptText, const std::string& scriptDir,
                                    base::ColorMode color);

// How a training run ended, for a person (stdout).
void printTrainResult(const runner::TrainResult& r, const std::string& training, base::ColorMode color);
// Where the run store recorded it (stdout), or what it missed (stderr).
void reportStoreRecord(const runner::TrainResult& r, const store::RunStore* runStore);

}  // namespace ipu::cli
