// The run store's side of a run: a train::Observer beside the run directory
// (interpreter/runner/run_directory.h) that records every metric point into the
// store (docs/tracking.md). Points are buffered and written in batches (one
// short transaction per second or per 1,000 points), so many runs can share
// one SQLite file; a heartbeat thread marks the run alive every few seconds,
// so a run whose process was killed shows as `killed` once `ipu runs gc` sees
// its heartbeat lapse.
//
// A store that fails mid-run (a server gone away) does not stop the training:
// the run directory still records it; failed() says so and why, once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
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

// How the store names a file or directory (an artifact): absolute, symbolic
// links resolved, no trailing separator, so `--resume=runs/x/` finds the
// record `runs/x` made.
std::string artifactPath(const std::string& path);

class StoreRecorder : public train::Observer {
 public:
  // `resumeDirectory`: the run directory of a resumed run ("" for a new one);
  // its metrics.jsonl is the record the store's is made to match.
  StoreRecorder(store::RunStore& store, long long runId, std::string resumeDirectory);
  ~StoreRecorder() override;
  StoreRecorder(const StoreRecorder&) = delete;
  StoreRecorder& operator=(const StoreRecorder&) = delete;

  train::StopRequest step(train::Source, const train::StepInfo&, std::map<std::string, double>& logged) override;
  train::StopRequest phaseEnd(train::Source, const train::PhaseInfo&) override;

  // Writes what is buffered, records how the run ended, stops the heartbeat.
  void finish(store::RunStatus status, const std::string& reason);

  long long runId() const { return runId_; }
  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }

 private:
  void add(const std::string& key, long long step, double value, double now);
  void flush();
  template <typename F>
  void guarded(F&& write);
  void beat();

  store::RunStore& store_;
  long long runId_;
  std::string resumeDirectory_;
  bool reopened_ = false;
  long long lastGlobalStep_ = 0;
  std::vector<store::MetricPoint> buffer_;
  std::chrono::steady_clock::time_point lastFlush_;
  std::string failure_;
  std::mutex failureMutex_;
  std::mutex beatMutex_;
  std::condition_variable beatWake_;
  bool stopping_ = false;
  std::thread heartbeat_;
};

}  // namespace ipu::runner
