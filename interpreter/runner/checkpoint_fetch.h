// Checkpoints from the run store onto this host (docs/tracking.md,
// "Artifacts"): a run recorded with `--artifacts store` keeps its
// checkpoints' bytes in the store, so `ipu run --resume` and a sweep's
// `from:` work on a host that does not have the run's files (another host,
// no shared file system). A file that is not here, or whose SHA-256 is not
// the recorded one, is fetched from the store into place (a temporary file
// renamed when complete and verified), never loaded unverified.
#pragma once

#include <string>

#include "interpreter/store/run_store.h"

namespace ipu::runner {

// The SHA-256 (hex) and size of a regular file, read in chunks; false with
// `error` when it cannot be read.
bool fileDigest(const std::string& path, std::string& sha256, long long& size, std::string& error);

// Whether a recorded relative path stays inside the directory it is relative
// to (no `..` component, not absolute): a record is never a way to write
// elsewhere.
bool staysInside(const std::string& relative);

struct CheckpointFile {
  bool ok = false;
  std::string path;     // ok: the file to read
  bool fetched = false; // ok: it was fetched from the store just now
  std::string problem;  // not ok: what is wrong and what to do
};

// Checkpoint `a` of run `run` at `destination`: the file already there when
// it is the one recorded (same SHA-256; an artifact recorded without one is
// taken as it is), else fetched from the store into `destination`.
CheckpointFile ensureCheckpoint(store::RunStore& store, const store::RunRecord& run, const store::Artifact& a,
                                const std::string& destination);

// Checkpoint `a` of run `run` to read on this host: its file where the run
// wrote it, when that is here and the one recorded; else a copy fetched from
// the store into `cacheRoot`/store-artifacts/RUN_ID/PATH.
CheckpointFile localCheckpoint(store::RunStore& store, const store::RunRecord& run, const store::Artifact& a,
                               const std::string& cacheRoot);

}  // namespace ipu::runner
