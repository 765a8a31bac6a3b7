// Where the trials of a sweep with `from:` start (interpreter/runner/
// sweep_start.h), found in a real SQLite store: a recorded run's newest
// checkpoint, the best finished trial of another sweep, and why there is
// none (the answer Wait while the other sweep may yet finish a trial).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "interpreter/runner/sweep_start.h"
#include "tests/store/sweep_grid.h"

using namespace ipu;
namespace fs = std::filesystem;
using runner::TrialStart;

namespace {

class SweepStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ipu-sweep-start-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::string db = (dir_ / "ipu.db").string();
    runs_ = store::openStore(db, store::OpenMode::Create);
    sweeps_ = store::openSweepStore(db, store::OpenMode::Existing);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A run of kind `kind` with checkpoint files `names` (written in that
  // order, `age` seconds apart, the last newest) recorded as its artifacts.
  long long run(const std::vector<std::string>& names, store::RunKind kind = store::RunKind::Run,
                bool writeFiles = true) {
    store::NewRun nr;
    nr.kind = kind;
    nr.training = "tiny_trial";
    nr.startedAt = store::nowSeconds();
    const long long id = runs_->createRun(nr);
    auto t = fs::file_time_type::clock::now() - std::chrono::hours(1);
    for (const auto& n : names) {
      const fs::path p = dir_ / std::to_string(id) / n;
      if (writeFiles) {
        fs::create_directories(p.parent_path());
        std::ofstream(p) << "weights";
        fs::last_write_time(p, t);
        t += std::chrono::seconds(10);
      }
      runs_->addArtifact(id, {"checkpoint", p.string()});
    }
    return id;
  }
  std::string path(long long run, const std::string& name) const { return (dir_ / std::to_string(run) / name).string(); }

  TrialStart fromRun(const std::string& idOrName) {
    return runner::resolveTrialStart({sweep::StartFrom::Kind::Run, idOrName}, *sweeps_, *runs_);
  }
  TrialStart fromBest(const std::string& sweep) {
    return runner::resolveTrialStart({sweep::StartFrom::Kind::SweepBest, sweep}, *sweeps_, *runs_);
  }
  // Claims the next cell of `sweepId` and ends it in `state` with `metric` and `runId`.
  void trial(long long sweepId, store::TrialState state, double metric, std::optional<long long> runId) {
    store::ClaimOptions o;
    o.agent = "test:1";
    store::Claim c = sweeps_->claimTrial(sweepId, o, ipu::testing::nextGridCell, store::nowSeconds());
    ASSERT_EQ(c.outcome, store::ClaimOutcome::Trial);
    store::TrialOutcome out;
    out.state = state;
    out.metric = metric;
    out.runId = runId;
    ASSERT_TRUE(sweeps_->endTrial(c.lease, out, store::nowSeconds()));
  }

  fs::path dir_;
  std::unique_ptr<store::RunStore> runs_;
  std::unique_ptr<store::SweepStore> sweeps_;
};

TEST_F(SweepStartTest, ARunStartsFromItsNewestCheckpointByIdOrName) {
  // Recorded out of training order (as an import may): the newest file wins.
  const long long id = run({"checkpoints/two/step-00000100.ipt", "checkpoints/one/final.ipt", "checkpoints/two/final.ipt"});
  for (const std::string& ref : {std::to_string(id), "tiny_trial-" + std::to_string(id)}) {
    TrialStart s = fromRun(ref);
    ASSERT_EQ(s.status, TrialStart::Status::Ready) << s.problem;
    EXPECT_EQ(s.checkpoint, path(id, "checkpoints/two/final.ipt"));
    EXPECT_EQ(s.runId, id);
    EXPECT_EQ(s.runName, "tiny_trial-" + std::to_string(id));
    EXPECT_EQ(s.trial, -1);
  }
  // Equal times: a phase's final checkpoint is after its steps'.
  const long long same = run({"checkpoints/one/final.ipt", "checkpoints/one/step-00000200.ipt"});
  const auto t = fs::last_write_time(path(same, "checkpoints/one/final.ipt"));
  fs::last_write_time(path(same, "checkpoints/one/step-00000200.ipt"), t);
  EXPECT_EQ(fromRun(std::to_string(same)).checkpoint, path(same, "checkpoints/one/final.ipt"));
}

TEST_F(SweepStartTest, RunsWithNothingToStartFromSayWhy) {
  TrialStart unknown = fromRun("tiny_trial-77");
  EXPECT_EQ(unknown.status, TrialStart::Status::Unavailable);
  EXPECT_NE(unknown.problem.find("there is no run `tiny_trial-77`"), std::string::npos) << unknown.problem;
  const long long estimate = run({}, store::RunKind::Estimate);
  EXPECT_NE(fromRun(std::to_string(estimate)).problem.find("is an estimate"), std::string::npos);
  const long long none = run({});
  EXPECT_NE(fromRun(std::to_string(none)).problem.find("recorded no checkpoint"), std::string::npos);
  const long long elsewhere = run({"checkpoints/one/final.ipt"}, store::RunKind::Run, /*writeFiles=*/false);
  TrialStart gone = fromRun(std::to_string(elsewhere));
  EXPECT_EQ(gone.status, TrialStart::Status::Unavailable);
  EXPECT_NE(gone.problem.find("not on this host"), std::string::npos) << gone.problem;
  // Something at the checkpoint's path that is not a file is said to be
  // that, not to be on another host.
  const long long fifo = run({"checkpoints/one/final.ipt"}, store::RunKind::Run, /*writeFiles=*/false);
  const std::string at = path(fifo, "checkpoints/one/final.ipt");
  fs::create_directories(fs::path(at).parent_path());
  ASSERT_EQ(::mkfifo(at.c_str(), 0600), 0);
  TrialStart pipe = fromRun(std::to_string(fifo));
  EXPECT_EQ(pipe.status, TrialStart::Status::Unavailable);
  EXPECT_NE(pipe.problem.find("is not a regular file"), std::string::npos) << pipe.problem;
  EXPECT_NE(pipe.problem.find(at), std::string::npos) << pipe.problem;
  EXPECT_EQ(pipe.problem.find("not on this host"), std::string::npos) << pipe.problem;
}

TEST_F(SweepStartTest, BestOfASweepWaitsForAFinishedTrialThenTakesTheBest) {
  TrialStart missing = fromBest("lr_grid");
  EXPECT_EQ(missing.status, TrialStart::Status::Unavailable);
  EXPECT_NE(missing.problem.find("is not in the store"), std::string::npos) << missing.problem;

  const long long sweepId = sweeps_->createOrResumeSweep(ipu::testing::gridSpec("lr_grid"), "", store::nowSeconds()).sweep.id;
  TrialStart none = fromBest("lr_grid");
  EXPECT_EQ(none.status, TrialStart::Status::Wait);
  EXPECT_NE(none.problem.find("has no finished trial yet (it is running)"), std::string::npos) << none.problem;

  // A stopped trial is not compared; a failed one neither: still waiting.
  const long long stoppedRun = run({"checkpoints/one/final.ipt"});
  trial(sweepId, store::TrialState::Stopped, 0.001, stoppedRun);
  trial(sweepId, store::TrialState::Failed, store::kNoTime, std::nullopt);
  EXPECT_EQ(fromBest("lr_grid").status, TrialStart::Status::Wait);

  const long long worse = run({"checkpoints/one/final.ipt"});
  const long long better = run({"checkpoints/one/step-00000100.ipt", "checkpoints/one/final.ipt"});
  trial(sweepId, store::TrialState::Finished, 0.5, worse);   // trial 2
  trial(sweepId, store::TrialState::Finished, 0.2, better);  // trial 3: the best (minimize)
  TrialStart best = fromBest("lr_grid");
  ASSERT_EQ(best.status, TrialStart::Status::Ready) << best.problem;
  EXPECT_EQ(best.trial, 3);
  EXPECT_EQ(best.runId, better);
  EXPECT_EQ(best.checkpoint, path(better, "checkpoints/one/final.ipt"));
  EXPECT_EQ(runner::describeStart({sweep::StartFrom::Kind::SweepBest, "lr_grid"}, best),
            "the best trial (3) of sweep `lr_grid`, run tiny_trial-" + std::to_string(better));
}

TEST_F(SweepStartTest, ASweepThatCanNoLongerFinishATrialIsUnavailable) {
  const long long sweepId = sweeps_->createOrResumeSweep(ipu::testing::gridSpec("lr_grid"), "", store::nowSeconds()).sweep.id;
  sweeps_->setSweepState(sweepId, store::SweepState::Paused);
  EXPECT_EQ(fromBest("lr_grid").status, TrialStart::Status::Wait);  // it may be resumed
  sweeps_->setSweepState(sweepId, store::SweepState::Cancelled);
  TrialStart s = fromBest("lr_grid");
  EXPECT_EQ(s.status, TrialStart::Status::Unavailable);
  EXPECT_NE(s.problem.find("has no finished trial, and it is cancelled"), std::string::npos) << s.problem;
}

}  // namespace
