// The recorder of a run (interpreter/runner/store_recorder.h) on a store
// that fails: every write of points fails for a while (a server restarted, a
// lock held past the busy timeout), or commits and then reports a failure (a
// connection lost while committing). The record must end complete: every
// step once, the summaries as if nothing had failed, the run finished.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>

#include "interpreter/runner/store_recorder.h"
#include "interpreter/store/run_store.h"

namespace ipu::runner {
namespace {

namespace fs = std::filesystem;
using store::MetricPoint;
using store::RunStore;

// A store that passes everything to a real one, except that its writes of
// points fail while `failures` is above zero: before writing (`lostCommit`
// false) or after writing (true: the commit happened, the writer is told it
// did not).
class FailingStore : public RunStore {
 public:
  explicit FailingStore(RunStore& real) : real_(real) {}
  std::atomic<int> failures{0};
  std::atomic<bool> lostCommit{false};
  std::atomic<int> attempts{0};

  const std::string& location() const override { return real_.location(); }
  long long createRun(const store::NewRun& r) override { return real_.createRun(r); }
  void appendMetrics(long long run, const std::vector<MetricPoint>& p) override { pointsWrite([&] { real_.appendMetrics(run, p); }); }
  void replaceMetrics(long long run, const std::vector<MetricPoint>& p) override { pointsWrite([&] { real_.replaceMetrics(run, p); }); }
  void heartbeat(long long run, double now) override { real_.heartbeat(run, now); }
  void finishRun(long long run, store::RunStatus s, const std::string& reason, double at) override {
    real_.finishRun(run, s, reason, at);
  }
  void reopenRun(long long run, long long from, const std::string& host, long long pid) override {
    real_.reopenRun(run, from, host, pid);
  }
  void addArtifact(long long run, const store::Artifact& a, const std::string& file) override { real_.addArtifact(run, a, file); }
  void readArtifact(long long run, const std::string& path, const std::function<void(const char*, std::size_t)>& sink) override {
    real_.readArtifact(run, path, sink);
  }
  std::size_t removeArtifacts(long long run, const std::vector<std::string>& paths) override {
    return real_.removeArtifacts(run, paths);
  }
  void completeRun(long long run, const store::RunContents& c) override { real_.completeRun(run, c); }
  void checkWritable() override { real_.checkWritable(); }
  std::optional<long long> findByRunDirectory(const std::string& p) override { return real_.findByRunDirectory(p); }
  std::optional<long long> createRunForDirectory(const store::NewRun& r, const std::string& d,
                                                 const store::RunContents& c) override {
    return real_.createRunForDirectory(r, d, c);
  }
  std::vector<store::RunRecord> listRuns() override { return real_.listRuns(); }
  std::optional<store::RunRecord> run(long long id) override { return real_.run(id); }
  std::vector<MetricPoint> metricHistory(long long run, const std::string& key) override { return real_.metricHistory(run, key); }
  std::vector<MetricPoint> metricCurves(long long run, std::size_t most) override { return real_.metricCurves(run, most); }
  void addTags(long long run, const std::vector<std::string>& t) override { real_.addTags(run, t); }
  void removeTags(long long run, const std::vector<std::string>& t) override { real_.removeTags(run, t); }
  void setNote(long long run, const std::string& n) override { real_.setNote(run, n); }
  bool deleteRun(long long run) override { return real_.deleteRun(run); }
  std::vector<long long> markStale(double now, double grace, const ProcessAlive& alive) override {
    return real_.markStale(now, grace, alive);
  }

 private:
  template <typename F>
  void pointsWrite(F&& write) {
    ++attempts;
    if (failures.load() <= 0) return write();
    --failures;
    if (lostCommit) write();
    throw store::StoreError("store `" + location() + "`: server closed the connection unexpectedly");
  }
  RunStore& real_;
};

class RecorderTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ipu-recorder-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    real_ = store::openStore((dir_ / "ipu.db").string(), store::OpenMode::Create);
    failing_ = std::make_unique<FailingStore>(*real_);
    store::NewRun r;
    r.training = "t";
    r.host = "h";
    r.pid = 1;
    r.startedAt = store::nowSeconds();
    id_ = real_->createRun(r);
  }
  void TearDown() override {
    failing_.reset();
    real_.reset();
    fs::remove_all(dir_);
  }

  // Steps `from` to `to` of the run through the recorder, about a second apart
  // in batches (every 20 steps, 60 ms each).
  void steps(StoreRecorder& rec, long long from, long long to) {
    for (long long g = from; g <= to; ++g) {
      train::StepInfo s;
      s.phase = "p";
      s.step = g;
      s.globalStep = g;
      s.loss = 10.0 - g * 0.01;
      s.lr = 0.1;
      std::map<std::string, double> logged;
      rec.step(train::Source::Emulator, s, logged);
      if (g % 20 == 0) ::usleep(60000);
    }
  }

  fs::path dir_;
  std::unique_ptr<RunStore> real_;
  std::unique_ptr<FailingStore> failing_;
  long long id_ = 0;
};

// Writes fail for a while in the middle of the run, then work again: the
// record ends complete, every step once (also when the failed writes had in
// fact committed: a lost commit is not recorded twice).
TEST_P(RecorderTest, AStoreThatFailsForAWhileGetsEveryStepOnce) {
  failing_->lostCommit = GetParam();
  {
    StoreRecorder rec(*failing_, id_, (dir_ / "run").string(), false);
    steps(rec, 1, 100);
    failing_->failures = 4;
    steps(rec, 101, 300);
    rec.finish(store::RunStatus::Finished, "");
    EXPECT_FALSE(rec.failed()) << rec.failure();
  }
  EXPECT_EQ(failing_->failures.load(), 0) << "the store was not written to while it failed";
  const auto r = real_->run(id_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, store::RunStatus::Finished);
  EXPECT_EQ(r->metrics.at("loss").count, 300);
  EXPECT_DOUBLE_EQ(r->metrics.at("loss").last, 10.0 - 300 * 0.01);
  const auto points = real_->metricHistory(id_, "loss");
  ASSERT_EQ(points.size(), 300u);
  for (std::size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].step, static_cast<long long>(i) + 1);
}

INSTANTIATE_TEST_SUITE_P(Recorder, RecorderTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "LostCommit" : "FailedWrite"; });

}  // namespace
}  // namespace ipu::runner
