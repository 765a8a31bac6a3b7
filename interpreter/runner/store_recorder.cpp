#include "interpreter/runner/store_recorder.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/run_import.h"
#include "interpreter/runner/checkpoint_fetch.h"
#include "interpreter/runner/system_usage.h"

namespace ipu::runner {

std::string artifactPath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
  if (ec) p = std::filesystem::absolute(path, ec).lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

namespace {
constexpr std::size_t kPointsPerBatch = 1000;
constexpr double kSecondsPerBatch = 1.0;
// Pauses between attempts on a failing store: from the first, doubling up to the most.
constexpr double kFirstRetrySeconds = 0.25;
constexpr double kMostRetrySeconds = 8;

using Clock = std::chrono::steady_clock;
Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }
}  // namespace

StoreRecorder::StoreRecorder(store::RunStore& store, long long runId, std::string runDirectory, bool resumed,
                             std::ostream* notices, store::ArtifactStorage artifacts)
    : store_(store), runId_(runId), runDirectory_(std::move(runDirectory)), resumed_(resumed), notices_(notices),
      artifacts_(artifacts), lastFlush_(Clock::now()) {
  thread_ = std::thread([this] { writer(); });
}

StoreRecorder::~StoreRecorder() { stopWriter(); }

void StoreRecorder::stopWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StoreRecorder::enqueue(Write w) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(w));
  }
  wake_.notify_all();
}

void StoreRecorder::perform(Write& w) {
  switch (w.kind) {
    case Write::Kind::Reopen:
      // Both steps again on a retry: the first drops every point, so the
      // second never adds one twice.
      store_.reopenRun(runId_, 0, hostName(), static_cast<long long>(::getpid()));
      store_.appendMetrics(runId_, w.points);
      break;
    case Write::Kind::Points:
      if (w.again) store_.replaceMetrics(runId_, w.points);
      else store_.appendMetrics(runId_, w.points);
      break;
    case Write::Kind::Artifact: {
      // Hashed here, off the training's thread. A file gone since it was
      // written (removed by hand) is recorded without its checksum.
      std::string file = w.artifactFile;
      if (!file.empty() && w.artifact.sha256.empty()) {
        std::string error;
        if (!fileDigest(file, w.artifact.sha256, w.artifact.size, error)) file.clear();
      }
      std::error_code ec;
      if (!file.empty() && !std::filesystem::is_regular_file(file, ec)) file.clear();
      store_.addArtifact(runId_, w.artifact, artifacts_ == store::ArtifactStorage::Store ? file : std::string());
      break;
    }
    case Write::Kind::Finish: store_.finishRun(runId_, w.status, w.reason, w.endedAt); break;
  }
}

void StoreRecorder::writer() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto nextBeat = Clock::now() + seconds(kHeartbeatSeconds);
  auto retryAt = Clock::now();
  auto giveUpAt = Clock::time_point::max();
  double pause = kFirstRetrySeconds;
  bool waitSaid = false;
  for (;;) {
    if (stopping_) return;
    const auto now = Clock::now();
    if (finishing_ && giveUpAt == Clock::time_point::max()) giveUpAt = now + seconds(kStoreWaitSeconds);
    if (queue_.empty()) {
      if (finishing_) return;
      if (now < nextBeat) {
        wake_.wait_until(lock, nextBeat);
        continue;
      }
      lock.unlock();
      try {
        store_.heartbeat(runId_, store::nowSeconds());
      } catch (const store::StoreError&) {
        // The next batch of points says how the store is.
      }
      lock.lock();
      nextBeat = Clock::now() + seconds(kHeartbeatSeconds);
      continue;
    }
    if (!lastError_.empty() && finishing_ && now >= giveUpAt) break;
    if (now < retryAt) {
      wake_.wait_until(lock, finishing_ ? std::min(retryAt, giveUpAt) : retryAt);
      continue;
    }
    // The oldest write, with the batches of points queued after it.
    Write w = std::move(queue_.front());
    queue_.pop_front();
    while (w.kind == Write::Kind::Points && !queue_.empty() && queue_.front().kind == Write::Kind::Points) {
      w.points.insert(w.points.end(), queue_.front().points.begin(), queue_.front().points.end());
      w.again = w.again || queue_.front().again;
      queue_.pop_front();
    }
    const bool sayWait = finishing_ && !lastError_.empty() && !waitSaid && notices_ != nullptr;
    const std::string failing = lastError_;
    lock.unlock();
    if (sayWait) {
      *notices_ << "ipu run: the run store fails (" << failing << "); waiting up to " << kStoreWaitSeconds
                << " s for it to take the rest of this run's record\n";
      waitSaid = true;
    }
    std::string error;
    bool gone = false;
    try {
      perform(w);
    } catch (const store::RunGone& e) {
      error = e.what();
      gone = true;
    } catch (const store::StoreError& e) {
      error = e.what();
    }
    lock.lock();
    if (error.empty()) {
      lastError_.clear();
      pause = kFirstRetrySeconds;
      nextBeat = Clock::now() + seconds(kHeartbeatSeconds);
      continue;
    }
    if (gone) {
      // Nothing to write into any more: the record was deleted under the run.
      failure_ = error + "; the run directory `" + runDirectory_ + "` has every step: `ipu runs import " +
                 runDirectory_ + "` records it again";
      queue_.clear();
      return;
    }
    lastError_ = error;
    w.again = true;
    queue_.push_front(std::move(w));
    retryAt = Clock::now() + seconds(pause);
    pause = std::min(pause * 2, kMostRetrySeconds);
  }
  // Given up: say what the store missed.
  long long first = std::numeric_limits<long long>::max(), last = 0;
  std::size_t points = 0;
  bool ending = false;
  for (const Write& w : queue_) {
    if (w.kind == Write::Kind::Finish) ending = true;
    if (w.kind != Write::Kind::Points && w.kind != Write::Kind::Reopen) continue;
    points += w.points.size();
    for (const auto& p : w.points) {
      first = std::min(first, p.step);
      last = std::max(last, p.step);
    }
  }
  std::string missed;
  if (points > 0)
    missed = "steps " + std::to_string(first) + " to " + std::to_string(last) + " (" + std::to_string(points) + " points)";
  if (ending) missed += std::string(missed.empty() ? "" : " and ") + "how the run ended";
  if (missed.empty()) missed = "a checkpoint's path";
  failure_ = "the run store `" + store_.location() + "` did not take " + missed + " within " +
             std::to_string(static_cast<int>(kStoreWaitSeconds)) + " s of the end (" + lastError_ +
             "); the run directory has every step: `ipu runs import " + runDirectory_ +
             "` completes the record once the store works again";
  queue_.clear();
}

void StoreRecorder::add(const std::string& key, long long step, double value, double now) {
  buffer_.push_back({key, step, value, now});
}

train::StopRequest StoreRecorder::step(train::Source, const train::StepInfo& s, std::map<std::string, double>& logged) {
  if (resumed_ && !reopened_) {
    // Resumed from a checkpoint: the store's points are made those of the
    // run directory before this step (which the run directory has already
    // trimmed to). The directory's log is the complete one: a killed process
    // loses the points it had not yet written to the store, not its lines.
    reopened_ = true;
    Write w;
    w.kind = Write::Kind::Reopen;
    w.points = pointsOfRunDirectory(runDirectory_, s.globalStep);
    enqueue(std::move(w));
  }
  const double now = store::nowSeconds();
  const long long g = s.globalStep;
  lastGlobalStep_ = g;
  add("loss", g, s.loss, now);
  add("lr", g, s.lr, now);
  add("loss_scale", g, s.lossScale, now);
  add("skipped", g, s.skipped ? 1 : 0, now);
  if (train::measured(s.samplesPerSecond)) add("samples_per_s", g, s.samplesPerSecond, now);
  if (train::measured(s.tokensPerSecond)) add("tokens_per_s", g, s.tokensPerSecond, now);
  if (train::measured(s.stepTimeSeconds)) add("step_time_s", g, s.stepTimeSeconds, now);
  for (const auto& [k, v] : s.metrics) add(k, g, v, now);
  for (const auto& [k, v] : logged) add(k, g, v, now);
  if (buffer_.size() >= kPointsPerBatch ||
      std::chrono::duration<double>(Clock::now() - lastFlush_).count() >= kSecondsPerBatch)
    flush();
  return {};
}

train::StopRequest StoreRecorder::phaseEnd(train::Source, const train::PhaseInfo& info) {
  const double now = store::nowSeconds();
  // The held-out evaluation, at the step the phase ended on.
  for (const auto& [k, v] : info.metrics) add("eval." + k, lastGlobalStep_, v, now);
  flush();
  return {};
}

void StoreRecorder::checkpointWritten(train::Source, const train::CheckpointInfo& c) {
  // The points up to the checkpoint go first: a record never lists a
  // checkpoint past its last point.
  flush();
  Write w;
  w.kind = Write::Kind::Artifact;
  const std::string directory = artifactPath(runDirectory_);
  const std::string file = artifactPath(c.path);
  w.artifact.kind = "checkpoint";
  w.artifact.path = file.rfind(directory + "/", 0) == 0 ? file.substr(directory.size() + 1) : file;
  w.artifact.runDirectory = directory;
  w.artifact.phase = c.phase;
  w.artifact.step = c.globalStep;
  w.artifact.host = hostName();
  w.artifact.createdAt = store::nowSeconds();
  w.artifactFile = file;
  enqueue(std::move(w));
}

void StoreRecorder::addSystemUsage(double now) {
  if (lastGlobalStep_ <= 0 || lastGlobalStep_ == lastSystemStep_) return;
  lastSystemStep_ = lastGlobalStep_;
  const SystemUsage u = systemUsage();
  add("system.cpu_s", lastGlobalStep_, u.cpuSeconds, now);
  add("system.rss_mb", lastGlobalStep_, u.rssMb, now);
  add("system.peak_rss_mb", lastGlobalStep_, u.peakRssMb, now);
  add("system.threads", lastGlobalStep_, u.threads, now);
}

void StoreRecorder::flush() {
  lastFlush_ = Clock::now();
  if (buffer_.empty()) return;
  // What the process uses, at the recorder's cadence: once per batch.
  addSystemUsage(store::nowSeconds());
  Write w;
  w.kind = Write::Kind::Points;
  w.points = std::move(buffer_);
  buffer_.clear();
  enqueue(std::move(w));
}

void StoreRecorder::finish(store::RunStatus status, const std::string& reason) {
  flush();
  Write w;
  w.kind = Write::Kind::Finish;
  w.status = status;
  w.reason = reason;
  w.endedAt = store::nowSeconds();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(w));
    finishing_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ipu::runner
