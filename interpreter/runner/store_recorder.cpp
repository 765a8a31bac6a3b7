#include "interpreter/runner/store_recorder.h"

#include <unistd.h>

#include <filesystem>

#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/run_import.h"

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
}  // namespace

StoreRecorder::StoreRecorder(store::RunStore& store, long long runId, std::string resumeDirectory)
    : store_(store), runId_(runId), resumeDirectory_(std::move(resumeDirectory)),
      lastFlush_(std::chrono::steady_clock::now()) {
  heartbeat_ = std::thread([this] { beat(); });
}

StoreRecorder::~StoreRecorder() {
  {
    std::lock_guard<std::mutex> lock(beatMutex_);
    stopping_ = true;
  }
  beatWake_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void StoreRecorder::beat() {
  std::unique_lock<std::mutex> lock(beatMutex_);
  while (!stopping_) {
    beatWake_.wait_for(lock, std::chrono::duration<double>(kHeartbeatSeconds));
    if (stopping_) break;
    guarded([&] { store_.heartbeat(runId_, store::nowSeconds()); });
  }
}

template <typename F>
void StoreRecorder::guarded(F&& write) {
  {
    std::lock_guard<std::mutex> lock(failureMutex_);
    if (!failure_.empty()) return;
  }
  try {
    write();
  } catch (const store::StoreError& e) {
    std::lock_guard<std::mutex> lock(failureMutex_);
    if (failure_.empty()) failure_ = e.what();
  }
}

void StoreRecorder::add(const std::string& key, long long step, double value, double now) {
  buffer_.push_back({key, step, value, now});
}

train::StopRequest StoreRecorder::step(train::Source, const train::StepInfo& s, std::map<std::string, double>& logged) {
  if (!resumeDirectory_.empty() && !reopened_) {
    // Resumed from a checkpoint: the store's points are made those of the
    // run directory before this step (which the run directory has already
    // trimmed to). The directory's log is the complete one: a killed process
    // loses the points it had not yet written to the store, not its lines.
    reopened_ = true;
    guarded([&] {
      store_.reopenRun(runId_, 0, hostName(), static_cast<long long>(::getpid()));
      store_.appendMetrics(runId_, pointsOfRunDirectory(resumeDirectory_, s.globalStep));
    });
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
      std::chrono::duration<double>(std::chrono::steady_clock::now() - lastFlush_).count() >= kSecondsPerBatch)
    flush();
  return {};
}

train::StopRequest StoreRecorder::phaseEnd(train::Source, const train::PhaseInfo& info) {
  const double now = store::nowSeconds();
  // The held-out evaluation, at the step the phase ended on.
  for (const auto& [k, v] : info.metrics) add("eval." + k, lastGlobalStep_, v, now);
  flush();
  if (!info.checkpoint.empty()) {
    const std::string path = artifactPath(info.checkpoint);
    guarded([&] { store_.addArtifact(runId_, {"checkpoint", path}); });
  }
  return {};
}

void StoreRecorder::flush() {
  lastFlush_ = std::chrono::steady_clock::now();
  if (buffer_.empty()) return;
  guarded([&] { store_.appendMetrics(runId_, buffer_); });
  buffer_.clear();
}

void StoreRecorder::finish(store::RunStatus status, const std::string& reason) {
  flush();
  guarded([&] { store_.finishRun(runId_, status, reason, store::nowSeconds()); });
  {
    std::lock_guard<std::mutex> lock(beatMutex_);
    stopping_ = true;
  }
  beatWake_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

}  // namespace ipu::runner
