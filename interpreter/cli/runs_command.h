// `ipu runs`: find and compare what the run store recorded (docs/tracking.md).
//
//   ipu runs [--where F] [--sort [-]NAME] [--limit N] [--columns a,b] [--json|--csv]
//   ipu runs show ID            ipu runs compare ID ID...
//   ipu runs tag ID TAG...      ipu runs untag ID TAG...      ipu runs note ID TEXT
//   ipu runs delete ID...       ipu runs gc [--grace SECONDS]  ipu runs import DIR...
//
// The command is the row kRunsCommand (command.h); this header shares how
// the store is found and runs are selected with `report`, `run` and `estimate`.
#pragma once

#include <string>
#include <vector>

#include "interpreter/store/run_store.h"

namespace ipu::cli {

// The store a command uses: --store, else $IPU_STORE, else <runsDir>/ipu.db.
std::string storeLocation(const std::string& storeFlag, const std::string& runsDir);

// Selects runs for `runs` and `report`: by id or name, or with a filter;
// `all` (if given) receives every run of the store. Returns 0, or the exit
// code after printing what went wrong (1: no such run; 2: a bad filter, with
// a caret under it).
int selectRuns(store::RunStore& store, const std::vector<std::string>& ids, const std::string& where,
               std::vector<store::RunRecord>& out, const std::string& command,
               std::vector<store::RunRecord>* all = nullptr);

}  // namespace ipu::cli
