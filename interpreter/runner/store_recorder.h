// The run store's side of a run: a train::Observer beside the run directory
// (interpreter/runner/run_directory.h) that records every metric point into the
// store (docs/tracking.md). Points are buffered and written in batches (one
// short transaction per second or per 1,000 points), so many runs can share
// one SQLite file; a heartbeat marks the run alive every few seconds, so a
// run whose process was killed shows as `killed` once `ipu runs gc` sees its
// heartbeat lapse.
//
// The writes are made by a thread of their own, so the training never waits
// for the store. A store that fails mid-run (a PostgreSQL server restarted,
// an SQLite write lock held past the busy timeout) does not stop the
// training, nor lose its points: they are kept, in order, and written again
// (reconnecting) with growing pauses until the store takes them, so the
// record ends complete. A batch whose commit may or may not have happened is
// written again in place of itself (RunStore::replaceMetrics), never twice.
// When the training ends the recorder waits up to kStoreWaitSeconds for a
// store that still fails; then failed() says what the store missed and how
// to complete it from the run directory (`ipu runs import`).
//
// It also records every checkpoint the training writes (with its SHA-256,
// and its bytes with `--artifacts store`), and, with each batch of points,
// what the process uses of the host: `system.cpu_s`, `system.rss_mb`,
// `system.peak_rss_mb`, `system.threads` (system_usage.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "interpreter/store/run_store.h"
#include "runtime/train/events.h"

namespace ipu::runner {

// Seconds between heartbeats, and how long `ipu runs gc` waits by default
// before calling a silent run killed.
constexpr double kHeartbeatSeconds = 5;
constexpr double kHeartbeatGraceSeconds = 30;
// How long a finished training waits for a failing store to take the rest
// of its record.
constexpr double kStoreWaitSeconds = 60;

// How the store names a file or directory (an artifact): absolute, symbolic
// links resolved, no trailing separator, so `--resume=runs/x/` finds the
// record `runs/x` made.
std::string artifactPath(const std::string& path);

class StoreRecorder : public train::Observer {
 public:
  // `runDirectory`: the run's directory (named in what failed() says).
  // `resumed`: the run continues from a checkpoint; the store's points are
  // then made those of its metrics.jsonl before the first step run now.
  // `notices`: where a wait for the store is said (null: nowhere).
  // `artifacts`: whether checkpoints' bytes are kept in the store too
  // (`--artifacts store`) or only their records (`files`).
  StoreRecorder(store::RunStore& store, long long runId, std::string runDirectory, bool resumed,
                std::ostream* notices = nullptr, store::ArtifactStorage artifacts = store::ArtifactStorage::Files);
  // Stops the writer; what it has not written is dropped (finish() writes it).
  ~StoreRecorder() override;
  StoreRecorder(const StoreRecorder&) = delete;
  StoreRecorder& operator=(const StoreRecorder&) = delete;

  train::StopRequest step(train::Source, const train::StepInfo&, std::map<std::string, double>& logged) override;
  train::StopRequest phaseEnd(train::Source, const train::PhaseInfo&) override;
  // Every checkpoint is recorded (its SHA-256 and size computed, and its
  // bytes kept with `--artifacts store`, on the writer's thread).
  void checkpointWritten(train::Source, const train::CheckpointInfo&) override;

  // Writes everything still to write (waiting up to kStoreWaitSeconds for a
  // failing store), records how the run ended, stops the writer.
  void finish(store::RunStatus status, const std::string& reason);

  long long runId() const { return runId_; }
  bool failed() const { return !failure_.empty(); }
  // What the store missed and what to do, for a person ("" when nothing).
  const std::string& failure() const { return failure_; }

 private:
  // One write, kept until the store has taken it.
  struct Write {
    enum class Kind { Reopen, Points, Artifact, Finish } kind = Kind::Points;
    std::vector<store::MetricPoint> points;  // Reopen: the run directory's; Points: a batch
    store::Artifact artifact;
    std::string artifactFile;  // Artifact: the file (hashed when written; its bytes kept with --artifacts store)
    store::RunStatus status = store::RunStatus::Finished;
    std::string reason;
    double endedAt = 0;
    bool again = false;  // an earlier attempt failed: its outcome is not known
  };

  void add(const std::string& key, long long step, double value, double now);
  void addSystemUsage(double now);
  void flush();
  void enqueue(Write w);
  void writer();
  void perform(Write& w);
  void stopWriter();

  store::RunStore& store_;
  long long runId_;
  std::string runDirectory_;
  bool resumed_;
  std::ostream* notices_;
  bool reopened_ = false;
  store::ArtifactStorage artifacts_;
  long long lastGlobalStep_ = 0;
  long long lastSystemStep_ = 0;  // the step system metrics were last recorded at
  std::vector<store::MetricPoint> buffer_;  // the training thread's, until flushed
  std::chrono::steady_clock::time_point lastFlush_;

  std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  std::deque<Write> queue_;
  bool finishing_ = false;
  bool stopping_ = false;
  std::string lastError_;  // the store's latest failure while it fails ("" when it works)
  std::string failure_;
  std::thread thread_;
};

}  // namespace ipu::runner
