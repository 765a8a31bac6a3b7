// A run of this host whose process is gone (killed with -9, or by the
// machine's OOM killer) is shown as killed at once, not as running until
// `ipu runs gc`: its silence is no longer needed to tell. Another host's
// processes cannot be seen; their heartbeat decides, in gc. Shared by the
// listings of `ipu runs` and `ipu ui`, so both show a dead run alike.
#pragma once

#include <vector>

#include "interpreter/store/run_store.h"

namespace ipu::runner {

// Marks the runs of this host still `running` whose heartbeat is older than
// two heartbeats and whose process is gone as killed (RunStore::markStale);
// returns their ids. With `listed` (the store's runs, as the caller just
// listed them), nothing is written, not even an empty write transaction,
// unless one of them is such a run: a dashboard asking every few seconds
// does not take the store's write lock from the runs recording into it. A
// store that cannot be written (read-only) is left as it is.
std::vector<long long> markDeadLocalRuns(store::RunStore& st, const std::vector<store::RunRecord>* listed = nullptr);

}  // namespace ipu::runner
