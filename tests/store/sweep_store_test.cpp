// Sweeps and trials in the run store (interpreter/store/sweep_store.h), on
// both backends: SQLite (a file in a temporary directory) and PostgreSQL (a
// real server this process starts: postgres_server.h). The protocol one
// agent at a time, with the clock given (so staleness is exact); the
// migration of a version 1 store (a file made by ipu before sweeps existed,
// tests/store/v1_store.db); and four agent processes on one store, one of
// them killed with SIGKILL in the middle of a trial (SweepAgents).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"
#include "interpreter/store/sweep_records.h"
#include "interpreter/store/sweep_store.h"
#include "tests/store/postgres_server.h"
#include "tests/store/sweep_grid.h"

extern char** environ;

namespace ipu::store {
namespace {

namespace fs = std::filesystem;
using testing::gridSpec;
using testing::nextGridCell;
using testing::testMetric;

enum class Backend { Sqlite, Postgres };

class SweepStoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::Sqlite) {
      std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      for (char& c : test)
        if (c == '/') c = '_';
      dir_ = fs::temp_directory_path() / ("ipu-sweep-test-" + std::to_string(::getpid()) + "-" + test);
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      location_ = (dir_ / "ipu.db").string();
    } else {
      auto& server = testing::postgresServer();
      ASSERT_TRUE(server.running()) << server.error();
      location_ = server.createDatabase();
    }
    store_ = openSweepStore(location_, OpenMode::Create);
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::unique_ptr<SqlConnection> raw() {
    return GetParam() == Backend::Sqlite ? connectSqlite(location_, false) : connectPostgres(location_);
  }

  SweepRecord newSweep(const sweep::SweepSpec& spec = gridSpec("lr_grid"), double now = 1000) {
    CreatedSweep c = store_->createOrResumeSweep(spec, "sweep lr_grid { }\n", now);
    EXPECT_TRUE(c.created);
    return c.sweep;
  }

  static ClaimOptions as(const std::string& agent, double staleAfter = 60, int maxAttempts = 3) {
    ClaimOptions o;
    o.agent = agent;
    o.staleAfter = staleAfter;
    o.maxAttempts = maxAttempts;
    return o;
  }

  Claim claim(const SweepRecord& s, const std::string& agent, double now, double staleAfter = 60, int maxAttempts = 3) {
    return store_->claimTrial(s.id, as(agent, staleAfter, maxAttempts), nextGridCell, now);
  }

  bool finish(const Claim& c, double now) {
    return store_->endTrial(c.lease, {TrialState::Finished, testMetric(c.trial.assignment), std::nullopt, ""}, now);
  }

  fs::path dir_;
  std::string location_;
  std::unique_ptr<SweepStore> store_;
};

TEST_P(SweepStoreTest, CreatesASweepAndResumesItByName) {
  const sweep::SweepSpec spec = gridSpec("lr_grid");
  CreatedSweep first = store_->createOrResumeSweep(spec, "script one", 1000);
  EXPECT_TRUE(first.created);
  EXPECT_EQ(first.sweep.name, "lr_grid");
  EXPECT_EQ(first.sweep.state, SweepState::Running);
  EXPECT_EQ(first.sweep.script, "script one");
  EXPECT_DOUBLE_EQ(first.sweep.createdAt, 1000);
  // The spec comes back as it went in, all 64 bits of the seed included.
  EXPECT_EQ(toJson(first.sweep.spec), toJson(spec));
  EXPECT_EQ(first.sweep.spec.seed, 0xfedcba9876543210ULL);
  EXPECT_EQ(first.sweep.spec.parameters[2].values[1], sweep::ParamValue::ofName("fp32"));

  CreatedSweep again = store_->createOrResumeSweep(spec, "script two", 2000);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.sweep.id, first.sweep.id);
  EXPECT_EQ(again.sweep.script, "script two");
  EXPECT_DOUBLE_EQ(again.sweep.createdAt, 1000);
  EXPECT_EQ(store_->listSweeps().size(), 1u);
  EXPECT_FALSE(store_->sweep("lr_gird").has_value());
}

// A sweep another command is running keeps its spec: a second `ipu sweep`
// of the same name with another grid is refused while the sweep was created
// moments ago or one of its trials' agents beats, and resumes it (taking its
// spec) once nobody runs it; the same spec always resumes.
TEST_P(SweepStoreTest, AnotherSpecIsRefusedWhileTheSweepIsRun) {
  const sweep::SweepSpec a = gridSpec("lr_grid");
  sweep::SweepSpec b = a;
  b.parameters[0].values.push_back(sweep::ParamValue::ofNumber(0.03));
  const SweepRecord s = newSweep(a, 1000);
  EXPECT_THROW(store_->createOrResumeSweep(b, "b", 1010), StoreError);
  EXPECT_EQ(toJson(store_->sweep("lr_grid")->spec), toJson(a));
  EXPECT_FALSE(store_->createOrResumeSweep(a, "a again", 1020).created);   // the same spec: resumed
  // A trial running, its agent beating.
  Claim c = claim(s, "agent", 1100);
  ASSERT_EQ(c.outcome, ClaimOutcome::Trial);
  try {
    store_->createOrResumeSweep(b, "b", 1130);
    ADD_FAILURE() << "another spec replaced a running sweep's";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("is being run with another specification"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ipu sweep cancel lr_grid"), std::string::npos) << e.what();
  }
  EXPECT_EQ(toJson(store_->sweep("lr_grid")->spec), toJson(a));
  // Its agent silent for a minute: nobody runs it, and the grid may grow.
  CreatedSweep grown = store_->createOrResumeSweep(b, "b", 1200);
  EXPECT_FALSE(grown.created);
  EXPECT_EQ(toJson(grown.sweep.spec), toJson(b));
}

// Two commands creating one sweep with different grids at the same moment,
// on connections of their own: one creates it, the other is refused, and the
// store keeps the creator's spec.
TEST_P(SweepStoreTest, TwoCreationsWithDifferentSpecsAtOnceLeaveOneSpec) {
  const sweep::SweepSpec a = gridSpec("lr_grid");
  sweep::SweepSpec b = a;
  b.parameters[0].values = {sweep::ParamValue::ofNumber(0.5)};
  for (int round = 0; round < 5; ++round) {
    const std::string sweepName = "race_" + std::to_string(round);
    sweep::SweepSpec specs[2] = {a, b};
    specs[0].name = specs[1].name = sweepName;
    std::atomic<int> created{0}, refused{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i)
      threads.emplace_back([&, i] {
        auto own = openSweepStore(location_, OpenMode::Existing);
        while (!go) std::this_thread::yield();
        try {
          if (own->createOrResumeSweep(specs[i], "script", 5000).created) ++created;
        } catch (const StoreError&) {
          ++refused;
        }
      });
    go = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(created, 1) << sweepName;
    EXPECT_EQ(refused, 1) << sweepName;
    const auto kept = store_->sweep(sweepName);
    ASSERT_TRUE(kept.has_value());
    EXPECT_TRUE(toJson(kept->spec) == toJson(specs[0]) || toJson(kept->spec) == toJson(specs[1]));
  }
}

TEST_P(SweepStoreTest, ClaimsEveryGridCellOnceThenFinishes) {
  SweepRecord s = newSweep();
  std::set<std::string> keys;
  for (int i = 0; i < 12; ++i) {
    Claim c = claim(s, i % 2 ? "a" : "b", 1000 + i);
    ASSERT_EQ(c.outcome, ClaimOutcome::Trial) << i;
    EXPECT_EQ(c.trial.index, i);
    EXPECT_EQ(c.trial.state, TrialState::Running);
    EXPECT_EQ(c.trial.attempts, 1);
    EXPECT_EQ(c.trial.key, sweep::assignmentKey(c.trial.assignment));
    EXPECT_TRUE(keys.insert(c.trial.key).second) << c.trial.key;
    EXPECT_TRUE(finish(c, 1000.5 + i));
  }
  EXPECT_EQ(claim(s, "a", 2000).outcome, ClaimOutcome::Finished);
  SweepStatus st = store_->status(s.id);
  EXPECT_EQ(st.sweep.state, SweepState::Finished);
  EXPECT_EQ(st.counts[TrialState::Finished], 12);
  EXPECT_EQ(st.counts[TrialState::Queued], 0);
  ASSERT_TRUE(st.best.has_value());
  EXPECT_NEAR(st.best->metric, 0.015, 1e-12);
  EXPECT_EQ(st.best->key, "lr=0.001 phase.pretrain.micro_batch=2 precision.compute=fp16");
}

TEST_P(SweepStoreTest, WaitsWhileTrialsRunAndFinishesWhenTheyEnd) {
  SweepRecord s = newSweep();
  std::vector<Claim> held;
  for (int i = 0; i < 12; ++i) held.push_back(claim(s, "a", 1000));
  EXPECT_EQ(claim(s, "b", 1001).outcome, ClaimOutcome::Wait);  // nothing to propose, but trials may yet fail
  for (const auto& c : held) EXPECT_TRUE(finish(c, 1002));
  EXPECT_EQ(claim(s, "b", 1003).outcome, ClaimOutcome::Finished);
}

TEST_P(SweepStoreTest, ADeadAgentsTrialIsQueuedAgainAndItsLeaseLost) {
  SweepRecord s = newSweep();
  Claim a = claim(s, "a", 1000);
  ASSERT_EQ(a.outcome, ClaimOutcome::Trial);
  EXPECT_EQ(store_->heartbeatTrial(a.lease, 1030), LeaseState::Held);
  // 59 s after its last heartbeat agent a is alive: b gets a new cell.
  Claim b1 = claim(s, "b", 1089);
  EXPECT_EQ(b1.trial.index, 1);
  // 61 s after: presumed dead; its trial goes to b before any new cell.
  Claim b2 = claim(s, "b", 1091);
  ASSERT_EQ(b2.outcome, ClaimOutcome::Trial);
  EXPECT_EQ(b2.trial.index, 0);
  EXPECT_EQ(b2.trial.attempts, 2);
  EXPECT_EQ(b2.trial.agent, "b");
  EXPECT_EQ(b2.trial.key, a.trial.key);
  // Agent a comes back: it can no longer write the trial.
  EXPECT_EQ(store_->heartbeatTrial(a.lease, 1092), LeaseState::Lost);
  EXPECT_FALSE(store_->attachRun(a.lease, 7));
  EXPECT_FALSE(finish(a, 1093));
  EXPECT_TRUE(finish(b2, 1094));
  auto trials = store_->trials(s.id);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state, TrialState::Finished);
  EXPECT_EQ(trials[0].agent, "b");
  EXPECT_DOUBLE_EQ(trials[0].endedAt, 1094);
  EXPECT_DOUBLE_EQ(trials[0].heartbeatAt, 1094);
  EXPECT_DOUBLE_EQ(trials[0].startedAt, 1091);
  EXPECT_FALSE(trials[0].runId.has_value());
}

TEST_P(SweepStoreTest, ATrialWhoseAgentsKeepDyingFailsAfterTheRetryLimit) {
  SweepRecord s = newSweep();
  ASSERT_EQ(claim(s, "a", 1000, 10, 2).trial.index, 0);
  ASSERT_EQ(claim(s, "b", 1020, 10, 2).trial.index, 0);  // attempt 2
  // Both dead; the third claim fails trial 0 for good and proposes cell 1.
  Claim c = claim(s, "c", 1040, 10, 2);
  EXPECT_EQ(c.trial.index, 1);
  auto trials = store_->trials(s.id);
  EXPECT_EQ(trials[0].state, TrialState::Failed);
  EXPECT_EQ(trials[0].attempts, 2);
  EXPECT_NE(trials[0].reason.find("stopped sending heartbeats"), std::string::npos) << trials[0].reason;
  // The same by requeueStale alone: c's trial, silent, with attempts to spare.
  StaleTrials stale = store_->requeueStale(s.id, 1100, 10, 2);
  EXPECT_EQ(stale.requeued, std::vector<long long>{1});
  EXPECT_TRUE(stale.failed.empty());
  EXPECT_EQ(store_->trials(s.id)[1].state, TrialState::Queued);
}

TEST_P(SweepStoreTest, PauseResumeAndCancel) {
  SweepRecord s = newSweep();
  Claim running = claim(s, "a", 1000);
  EXPECT_EQ(store_->setSweepState(s.id, SweepState::Paused), SweepState::Running);
  EXPECT_EQ(claim(s, "b", 1001).outcome, ClaimOutcome::Paused);
  EXPECT_EQ(store_->heartbeatTrial(running.lease, 1002), LeaseState::Held);  // running trials go on
  EXPECT_EQ(store_->setSweepState(s.id, SweepState::Paused), SweepState::Paused);  // no change
  EXPECT_EQ(store_->setSweepState(s.id, SweepState::Running), SweepState::Paused);
  EXPECT_EQ(claim(s, "b", 1003).outcome, ClaimOutcome::Trial);

  EXPECT_EQ(store_->setSweepState(s.id, SweepState::Cancelled), SweepState::Running);
  EXPECT_EQ(claim(s, "c", 1004).outcome, ClaimOutcome::Cancelled);
  EXPECT_EQ(store_->heartbeatTrial(running.lease, 1005), LeaseState::Cancelled);
  EXPECT_TRUE(store_->endTrial(running.lease, {TrialState::Killed, kNoTime, std::nullopt, "cancelled"}, 1006));
  EXPECT_THROW(store_->setSweepState(s.id, SweepState::Paused), StoreError);
  // Resumed: the killed trial is queued again and claimed first.
  EXPECT_EQ(store_->setSweepState(s.id, SweepState::Running), SweepState::Cancelled);
  Claim again = claim(s, "c", 1007);
  EXPECT_EQ(again.trial.index, running.trial.index);
  EXPECT_EQ(again.trial.attempts, 2);
  EXPECT_THROW(store_->setSweepState(s.id, SweepState::Finished), std::invalid_argument);
}

TEST_P(SweepStoreTest, ResumingARunningSweepQueuesItsKilledTrialsAgain) {
  // An agent stopped with Ctrl-C: its trial is killed, the sweep still running.
  SweepRecord s = newSweep();
  Claim interrupted = claim(s, "a", 1000);
  ASSERT_TRUE(store_->endTrial(interrupted.lease, {TrialState::Killed, kNoTime, std::nullopt, "the agent was interrupted"}, 1001));
  EXPECT_EQ(store_->setSweepState(s.id, SweepState::Running), SweepState::Running);
  EXPECT_EQ(store_->trials(s.id)[static_cast<std::size_t>(interrupted.trial.index)].state, TrialState::Queued);
  Claim again = claim(s, "b", 1002);
  EXPECT_EQ(again.trial.index, interrupted.trial.index);
}

TEST_P(SweepStoreTest, AFinishedSweepCannotBePausedResumedOrCancelled) {
  sweep::SweepSpec spec = gridSpec("lr_grid");
  spec.metric.target = 0.02;  // reached by the first cell (0.015)
  SweepRecord s = newSweep(spec);
  Claim c = claim(s, "a", 1000);
  Claim other = claim(s, "b", 1000);
  EXPECT_TRUE(finish(c, 1001));
  EXPECT_EQ(store_->status(s.id).sweep.state, SweepState::Finished);
  EXPECT_EQ(claim(s, "a", 1002).outcome, ClaimOutcome::Finished);
  EXPECT_TRUE(finish(other, 1003));  // a trial running when the target was reached still records its result
  for (SweepState to : {SweepState::Paused, SweepState::Running, SweepState::Cancelled}) {
    try {
      store_->setSweepState(s.id, to);
      ADD_FAILURE() << "changed a finished sweep to " << name(to);
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("is finished"), std::string::npos) << e.what();
    }
  }
}

TEST_P(SweepStoreTest, ResumingRunsFailedAndKilledCellsAgainAndNeverFinishedOnes) {
  SweepRecord s = newSweep();
  std::set<std::string> finished;
  for (int i = 0; i < 3; ++i) {
    Claim c = claim(s, "a", 1000);
    ASSERT_TRUE(finish(c, 1001));
    finished.insert(c.trial.key);
  }
  Claim failing = claim(s, "a", 1002);
  ASSERT_TRUE(store_->endTrial(failing.lease, {TrialState::Failed, kNoTime, std::nullopt, "diverged"}, 1003));
  Claim stopped = claim(s, "a", 1004);
  ASSERT_TRUE(store_->endTrial(stopped.lease, {TrialState::Stopped, 0.5, std::nullopt, "hyperband"}, 1005));
  Claim killed = claim(s, "a", 1006);
  ASSERT_TRUE(store_->endTrial(killed.lease, {TrialState::Killed, kNoTime, std::nullopt, "cancelled"}, 1007));
  ASSERT_EQ(store_->setSweepState(s.id, SweepState::Cancelled), SweepState::Running);

  // `ipu sweep FILE` again: the same sweep, running, two cells queued again.
  CreatedSweep again = store_->createOrResumeSweep(gridSpec("lr_grid"), "sweep lr_grid { }\n", 2000);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.requeued, 2);
  EXPECT_EQ(again.sweep.state, SweepState::Running);
  std::vector<long long> order;
  for (;;) {
    Claim c = claim(s, "b", 2001);
    if (c.outcome != ClaimOutcome::Trial) {
      EXPECT_EQ(c.outcome, ClaimOutcome::Finished);
      break;
    }
    EXPECT_EQ(finished.count(c.trial.key), 0u) << "ran a finished cell again: " << c.trial.key;
    EXPECT_EQ(c.trial.attempts, 1);  // attempts start again
    order.push_back(c.trial.index);
    ASSERT_TRUE(finish(c, 2002));
  }
  // The failed and killed cells first, then the 6 never started; the stopped one is a result.
  EXPECT_EQ(order, (std::vector<long long>{failing.trial.index, killed.trial.index, 6, 7, 8, 9, 10, 11}));
  SweepStatus st = store_->status(s.id);
  EXPECT_EQ(st.counts[TrialState::Finished], 11);
  EXPECT_EQ(st.counts[TrialState::Stopped], 1);
}

TEST_P(SweepStoreTest, AProposalOfAnExistingCellIsRefusedAndNothingWritten) {
  SweepRecord s = newSweep();
  Claim first = claim(s, "a", 1000);
  auto same = [&](const SweepRecord&, const std::vector<TrialRecord>&) -> std::optional<sweep::Assignment> {
    return first.trial.assignment;
  };
  EXPECT_THROW(store_->claimTrial(s.id, as("b"), same, 1001), std::invalid_argument);
  EXPECT_EQ(store_->trials(s.id).size(), 1u);
  EXPECT_EQ(claim(s, "b", 1002).trial.index, 1);  // the store is usable after the rollback
}

TEST_P(SweepStoreTest, TheRunCapLimitsTrialsAndTheProposerSeesTheHistory) {
  sweep::SweepSpec spec = gridSpec("random_lr");
  spec.method = sweep::Method::Random;
  spec.runCap = 4;
  SweepRecord s = newSweep(spec);
  std::vector<std::size_t> seen;
  auto endless = [&](const SweepRecord& sw, const std::vector<TrialRecord>& trials) -> std::optional<sweep::Assignment> {
    EXPECT_EQ(sw.spec.runCap, 4);
    seen.push_back(trials.size());
    return sweep::Assignment{{"lr", sweep::ParamValue::ofNumber(0.001 * static_cast<double>(trials.size() + 1))}};
  };
  for (int i = 0; i < 4; ++i) {
    Claim c = store_->claimTrial(s.id, as("a"), endless, 1000);
    ASSERT_EQ(c.outcome, ClaimOutcome::Trial);
    ASSERT_TRUE(store_->endTrial(c.lease, {TrialState::Finished, 1.0 / (i + 1), std::nullopt, ""}, 1001));
  }
  EXPECT_EQ(store_->claimTrial(s.id, as("a"), endless, 1002).outcome, ClaimOutcome::Finished);
  EXPECT_EQ(seen, (std::vector<std::size_t>{0, 1, 2, 3}));  // never asked past the cap
}

TEST_P(SweepStoreTest, TheBestTrialFollowsTheGoal) {
  sweep::SweepSpec spec = gridSpec("acc");
  spec.metric.name = "eval.accuracy";
  spec.metric.goal = sweep::Goal::Maximize;
  SweepRecord s = newSweep(spec);
  const double metrics[] = {0.3, 0.9, std::nan(""), 0.5};
  for (double m : metrics) {
    Claim c = claim(s, "a", 1000);
    ASSERT_TRUE(store_->endTrial(c.lease, {TrialState::Finished, m, std::nullopt, ""}, 1001));
  }
  Claim stoppedHigher = claim(s, "a", 1002);  // stopped early: not a candidate for best
  ASSERT_TRUE(store_->endTrial(stoppedHigher.lease, {TrialState::Stopped, 0.95, std::nullopt, "hyperband"}, 1003));
  SweepStatus st = store_->status(s.id);
  ASSERT_TRUE(st.best.has_value());
  EXPECT_EQ(st.best->index, 1);
  EXPECT_DOUBLE_EQ(st.best->metric, 0.9);
  EXPECT_TRUE(std::isnan(store_->trials(s.id)[2].metric));
}

TEST_P(SweepStoreTest, ATrialLinksToItsRunAndOutlivesItsDeletion) {
  SweepRecord s = newSweep();
  auto runs = openStore(location_, OpenMode::Existing);
  NewRun r;
  r.training = "tiny_pretrain";
  r.script = "x";
  r.host = "h";
  r.startedAt = 1000;
  const long long runId = runs->createRun(r);
  Claim c = claim(s, "a", 1000);
  EXPECT_TRUE(store_->attachRun(c.lease, runId));
  EXPECT_EQ(store_->trials(s.id)[0].runId, std::optional<long long>(runId));
  EXPECT_TRUE(store_->heartbeatTrial(c.lease, 1010) == LeaseState::Held);
  EXPECT_DOUBLE_EQ(store_->trials(s.id)[0].heartbeatAt, 1010);
  EXPECT_TRUE(store_->endTrial(c.lease, {TrialState::Finished, 0.25, runId, ""}, 1020));
  EXPECT_EQ(store_->status(s.id).best->runId, std::optional<long long>(runId));
  EXPECT_TRUE(runs->deleteRun(runId));
  TrialRecord t = store_->trials(s.id)[0];
  EXPECT_FALSE(t.runId.has_value());
  EXPECT_DOUBLE_EQ(t.metric, 0.25);
}

TEST_P(SweepStoreTest, AClaimNeedsAnAgentAndASweep) {
  SweepRecord s = newSweep();
  EXPECT_THROW(store_->claimTrial(s.id, as(""), nextGridCell, 1000), std::invalid_argument);
  EXPECT_THROW(store_->claimTrial(s.id + 100, as("a"), nextGridCell, 1000), StoreError);
  EXPECT_THROW(store_->status(s.id + 100), StoreError);
}

TEST_P(SweepStoreTest, ConcurrentClaimsNeverProposeOrTakeACellTwice) {
  // Six agents (threads, each with its own connection) claim and end trials
  // of a 120-cell space as fast as they can: every proposal races.
  sweep::SweepSpec spec = gridSpec("race");
  spec.parameters = {spec.parameters[0]};
  spec.parameters[0].values.clear();
  for (int i = 0; i < 120; ++i) spec.parameters[0].values.push_back(sweep::ParamValue::ofInteger(i));
  SweepRecord s = newSweep(spec);
  std::vector<std::thread> agents;
  std::vector<std::string> errors(6);
  std::vector<int> ran(6, 0);
  for (int a = 0; a < 6; ++a)
    agents.emplace_back([&, a] {
      try {
        auto st = openSweepStore(location_, OpenMode::Existing);
        for (;;) {
          Claim c = st->claimTrial(s.id, as("t" + std::to_string(a)), nextGridCell, nowSeconds());
          if (c.outcome == ClaimOutcome::Wait) {  // the last trials are running: let them end
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            continue;
          }
          if (c.outcome != ClaimOutcome::Trial) break;
          if (!st->endTrial(c.lease, {TrialState::Finished, 1.0, std::nullopt, ""}, nowSeconds()))
            errors[static_cast<std::size_t>(a)] = "lost a lease";
          ++ran[static_cast<std::size_t>(a)];
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(a)] = e.what();
      }
    });
  for (auto& t : agents) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  auto trials = store_->trials(s.id);
  ASSERT_EQ(trials.size(), 120u);
  std::set<std::string> keys;
  for (const auto& t : trials) {
    keys.insert(t.key);
    EXPECT_EQ(t.state, TrialState::Finished);
    EXPECT_EQ(t.attempts, 1);
  }
  EXPECT_EQ(keys.size(), 120u);
  int total = 0;
  for (int n : ran) total += n;
  EXPECT_EQ(total, 120);
}

// Every row of every table a version 1 store has, in a fixed order.
std::map<std::string, std::vector<SqlRow>> dumpV1(SqlConnection& db) {
  std::map<std::string, std::vector<SqlRow>> out;
  for (const char* table : {"runs", "params", "metrics", "metric_summaries", "tags", "artifacts"}) {
    // Version 1's columns: later versions add some to `artifacts`.
    const std::string columns = std::string(table) == "artifacts" ? "run_id, kind, path" : "*";
    auto first = db.query("SELECT " + columns + " FROM " + table + " LIMIT 1");
    std::string order;
    for (std::size_t i = 1; i <= (first.empty() ? 1 : first[0].size()); ++i) order += (i > 1 ? ", " : "") + std::to_string(i);
    out[table] = db.query("SELECT " + columns + " FROM " + table + " ORDER BY " + order);
  }
  return out;
}

std::string schemaVersion(SqlConnection& db) {
  return cellText(db.query("SELECT value FROM ipu_meta WHERE key = 'schema_version'").at(0)[0]);
}

// The statements that add (or drop) version 4's columns of `artifacts`.
std::string v4Columns(Backend b, const std::string& verb) {
  std::string sql;
  for (const char* c : {"phase", "step", "size", "sha256", "host", "run_directory", "content", "created_at"})
    sql += "ALTER TABLE artifacts " + verb + " " + c + ";";
  if (b == Backend::Postgres) return sql;
  return sql + "DROP TABLE artifact_contents;";
}

TEST_P(SweepStoreTest, MigratesAVersion1StoreKeepingEveryRecord) {
  // A version 1 store: on SQLite the file ipu 5f87031 made (an estimate of
  // examples/tiny_bert.ipu and two runs of ipu_store_writer, a tag, a note);
  // on PostgreSQL this store taken back to version 1.
  if (GetParam() == Backend::Sqlite) {
    store_.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(location_ + suffix);
    fs::copy_file(fs::path(IPU_SOURCE_DIR) / "tests/store/v1_store.db", location_);
  } else {
    auto runs = openStore(location_, OpenMode::Existing);
    NewRun r;
    r.training = "t";
    r.script = "x";
    r.parameters = {{"lr", "0.001"}};
    long long id = runs->createRun(r);
    runs->appendMetrics(id, {{"loss", 1, 2.5, 1000}});
    runs->addTags(id, {"baseline"});
    runs->addArtifact(id, {"checkpoint", "/runs/t/1/checkpoints/p/final.ipt"});
    store_.reset();
    auto db = raw();
    db->execute("DROP TABLE trials; DROP TABLE sweeps; UPDATE ipu_meta SET value = '1' WHERE key = 'schema_version'");
    db->execute(v4Columns(Backend::Postgres, "DROP COLUMN"));
  }
  std::map<std::string, std::vector<SqlRow>> before;
  {
    auto db = raw();
    ASSERT_EQ(schemaVersion(*db), "1");
    before = dumpV1(*db);
  }
  ASSERT_FALSE(before["runs"].empty());
  ASSERT_FALSE(before["metrics"].empty());
  store_ = openSweepStore(location_, OpenMode::Existing);
  // Version 3 renamed the streaming parameters to the mapping fields' names
  // (`mapping.optimizer_state_streaming = true` is `mapping.optimizer_state =
  // streaming`); everything else is kept as it was.
  std::map<std::string, std::vector<SqlRow>> expected = before;
  int renamed = 0;
  for (auto& row : expected["params"]) {
    std::string key = cellText(row.at(1));
    for (const char* field : {"mapping.optimizer_state", "mapping.weights"}) {
      const std::string old = std::string(field) + "_streaming";
      if (key.size() >= old.size() && key.compare(key.size() - old.size(), old.size(), old) == 0 &&
          (key.size() == old.size() || key[key.size() - old.size() - 1] == '.')) {
        row[1] = key.substr(0, key.size() - 10);
        row[2] = cellText(row[2]) == "true" ? "streaming" : "on_chip";
        ++renamed;
      }
    }
  }
  std::sort(expected["params"].begin(), expected["params"].end());
  if (GetParam() == Backend::Sqlite) {
    EXPECT_GE(renamed, 6);  // the file's estimate has two phases
  }
  {
    auto db = raw();
    EXPECT_EQ(schemaVersion(*db), std::to_string(kSchemaVersion));
    auto after = dumpV1(*db);
    std::sort(after["params"].begin(), after["params"].end());
    EXPECT_EQ(after, expected);
    if (GetParam() == Backend::Sqlite) {
      auto rows = db->query("SELECT value FROM params WHERE key = 'phases.long.mapping.optimizer_state'");
      ASSERT_EQ(rows.size(), 1u);
      EXPECT_EQ(cellText(rows[0][0]), "on_chip");
    }
  }
  if (GetParam() == Backend::Sqlite) {
    auto runs = openStore(location_, OpenMode::Existing)->listRuns();
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[1].tags, (std::vector<std::string>{"baseline", "writer-a"}));
    EXPECT_EQ(runs[2].kind, RunKind::Estimate);
    EXPECT_EQ(runs[0].metrics.at("loss").count, 25);
  }
  // And it is a current store now: sweeps work, opening again changes nothing.
  SweepRecord s = newSweep();
  EXPECT_EQ(claim(s, "a", 1000).outcome, ClaimOutcome::Trial);
  store_ = openSweepStore(location_, OpenMode::Existing);
  EXPECT_EQ(store_->trials(s.id).size(), 1u);
}

// Version 4 records every checkpoint with what it is and where: a version 3
// store (this store taken back) gains the columns, keeps every record as it
// was, and its artifacts get their run's host.
TEST_P(SweepStoreTest, MigratesAVersion3StoreKeepingItsArtifacts) {
  auto runs = openStore(location_, OpenMode::Existing);
  NewRun r;
  r.training = "t";
  r.script = "x";
  r.host = "node07";
  long long id = runs->createRun(r);
  runs->appendMetrics(id, {{"loss", 1, 2.5, 1000}});
  runs->addArtifact(id, {"run_directory", "/runs/t/20261121-085340"});
  runs->addArtifact(id, {"checkpoint", "/runs/t/20261121-085340/checkpoints/p/final.ipt"});
  runs.reset();
  store_.reset();
  {
    auto db = raw();
    db->execute(v4Columns(GetParam(), "DROP COLUMN"));
    db->execute("UPDATE ipu_meta SET value = '3' WHERE key = 'schema_version'");
  }
  std::map<std::string, std::vector<SqlRow>> before;
  {
    auto db = raw();
    before = dumpV1(*db);
  }
  ASSERT_EQ(before["artifacts"].size(), 2u);
  store_ = openSweepStore(location_, OpenMode::Existing);
  auto db = raw();
  EXPECT_EQ(schemaVersion(*db), std::to_string(kSchemaVersion));
  EXPECT_EQ(dumpV1(*db), before);
  auto again = openStore(location_, OpenMode::Existing)->run(id);
  ASSERT_TRUE(again);
  ASSERT_EQ(again->artifacts.size(), 2u);
  for (const auto& a : again->artifacts) {
    EXPECT_EQ(a.host, "node07");
    EXPECT_EQ(a.step, -1);
    EXPECT_FALSE(a.stored);
  }
  EXPECT_EQ(again->artifacts[1].kind, "checkpoint");
  EXPECT_EQ(artifactFile(again->artifacts[1]), "/runs/t/20261121-085340/checkpoints/p/final.ipt");
}

// ------------------------------------------------------------------ agents

// Starts `argv` as a child process; its pid.
pid_t spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

std::vector<std::string> readLines(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST_P(SweepStoreTest, FourAgentsRunEveryCellExactlyOnceWhenOneIsKilledMidTrial) {
  const SweepRecord s = newSweep();
  const fs::path work = fs::temp_directory_path() / ("ipu-sweep-agents-" + std::to_string(::getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  const fs::path log = work / "trials.log";
  // A trial takes 0.8 s, heartbeats every 0.2 s; an agent silent for 3 s is dead.
  std::map<std::string, pid_t> agents;
  for (const char* name : {"victim", "a1", "a2", "a3"}) {
    agents[name] = spawn({IPU_SWEEP_AGENT, location_, s.name, log.string(), name, "0.8", "3", "0.2"});
    ASSERT_GT(agents[name], 0) << "cannot start " << IPU_SWEEP_AGENT;
  }
  // Kill the victim as soon as it has claimed a trial.
  std::string killedKey;
  const auto start = std::chrono::steady_clock::now();
  while (killedKey.empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    for (const auto& line : readLines(log)) {
      // "claim KEY AGENT": the key has spaces, the agent is the last word.
      auto space = line.rfind(' ');
      if (line.rfind("claim ", 0) == 0 && line.substr(space + 1) == "victim") {
        killedKey = line.substr(6, space - 6);
        break;
      }
    }
    if (killedKey.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(killedKey.empty()) << "the victim claimed no trial in 20 s";
  ASSERT_EQ(::kill(agents["victim"], SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(agents["victim"], &status, 0), agents["victim"]);
  EXPECT_TRUE(WIFSIGNALED(status));
  agents.erase("victim");

  // The others finish the sweep, the victim's trial included.
  for (const auto& [name, pid] : agents) {
    int st = 0;
    pid_t done = 0;
    while ((done = ::waitpid(pid, &st, WNOHANG)) == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (done == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      ADD_FAILURE() << "agent " << name << " did not finish in 60 s";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "agent " << name << " failed";
  }

  // In the store: 12 trials, one per cell, all finished once.
  std::set<std::string> cells;
  for (const auto& c : testing::gridCells(s.spec)) cells.insert(sweep::assignmentKey(c));
  auto trials = store_->trials(s.id);
  ASSERT_EQ(trials.size(), 12u);
  std::set<std::string> keys;
  for (const auto& t : trials) {
    keys.insert(t.key);
    EXPECT_EQ(t.state, TrialState::Finished) << t.key;
    EXPECT_NEAR(t.metric, testMetric(t.assignment), 1e-12);
    if (t.key == killedKey) {
      EXPECT_EQ(t.attempts, 2) << "the victim's trial was claimed again once";
      EXPECT_NE(t.agent, "victim");
    } else {
      EXPECT_EQ(t.attempts, 1) << t.key;
    }
  }
  EXPECT_EQ(keys, cells);
  EXPECT_EQ(store_->status(s.id).sweep.state, SweepState::Finished);
  // In the log: every cell's work done exactly once, never by the victim.
  std::map<std::string, int> done;
  for (const auto& line : readLines(log)) {
    if (line.rfind("done ", 0) != 0) continue;
    auto space = line.rfind(' ');
    EXPECT_NE(line.substr(space + 1), "victim");
    ++done[line.substr(5, space - 5)];
  }
  EXPECT_EQ(done.size(), 12u);
  for (const auto& [key, n] : done) EXPECT_EQ(n, 1) << key;
  EXPECT_EQ(done.count(killedKey), 1u);
  fs::remove_all(work);
}

INSTANTIATE_TEST_SUITE_P(Sqlite, SweepStoreTest, ::testing::Values(Backend::Sqlite));
INSTANTIATE_TEST_SUITE_P(Postgres, SweepStoreTest, ::testing::Values(Backend::Postgres));

// Values and keys (sweep/space.h) and the JSON the store keeps them as.
TEST(SweepRecords, CanonicalValuesAndKeys) {
  using sweep::ParamValue;
  EXPECT_EQ(ParamValue::ofNumber(0.1).canonical(), "0.1");  // the shortest text that reads back exactly
  EXPECT_EQ(ParamValue::ofNumber(1).canonical(), "1");
  EXPECT_EQ(ParamValue::ofInteger(-3).canonical(), "-3");
  EXPECT_EQ(ParamValue::ofBoolean(true).canonical(), "true");
  EXPECT_EQ(ParamValue::ofName("fp16").canonical(), "fp16");
  EXPECT_EQ(ParamValue::ofText("a \"b\"").canonical(), "\"a \\\"b\\\"\"");
  // Sorted by path, whatever the order given.
  EXPECT_EQ(sweep::assignmentKey({{"z", ParamValue::ofInteger(1)}, {"a", ParamValue::ofName("x")}}), "a=x z=1");
  EXPECT_NE(sweep::assignmentKey({{"p", ParamValue::ofName("fp16")}}),
            sweep::assignmentKey({{"p", ParamValue::ofText("fp16")}}));
}

TEST(SweepRecords, JsonRoundTripsEveryKindAndRefusesMalformedSpecs) {
  using sweep::ParamValue;
  sweep::Assignment a{{"a", ParamValue::ofNumber(1)},      {"b", ParamValue::ofInteger(1)}, {"c", ParamValue::ofBoolean(false)},
                      {"d", ParamValue::ofName("fp16")}, {"e", ParamValue::ofText("fp16")}};
  nlohmann::json j = nlohmann::json::parse(toJson(a).dump());
  EXPECT_EQ(j.dump(), R"({"a":1.0,"b":1,"c":false,"d":{"name":"fp16"},"e":"fp16"})");
  EXPECT_EQ(assignmentFromJson(j, "a"), a);

  sweep::SweepSpec spec = gridSpec("s");
  spec.method = sweep::Method::Bayes;
  spec.metric.target = 0.5;
  spec.earlyTerminate = {true, 2, 3, 81};
  spec.from = sweep::StartFrom{sweep::StartFrom::Kind::SweepBest, "phase1"};
  sweep::ParamSpec wd;
  wd.path = "optimizer.weight_decay";
  wd.distribution = sweep::Distribution::QLogUniform;
  wd.min = 1e-5;
  wd.max = 1e-1;
  wd.q = 1e-5;
  spec.parameters.push_back(wd);
  sweep::SweepSpec back = specFromJson(nlohmann::json::parse(toJson(spec).dump()), "spec");
  EXPECT_EQ(toJson(back), toJson(spec));
  EXPECT_EQ(back.parameters.back().distribution, sweep::Distribution::QLogUniform);
  EXPECT_EQ(back.from->kind, sweep::StartFrom::Kind::SweepBest);
  EXPECT_EQ(*back.metric.target, 0.5);

  nlohmann::json bad = toJson(spec);
  bad["method"] = "hillclimb";
  EXPECT_THROW(specFromJson(bad, "spec"), StoreError);
  bad = toJson(spec);
  bad["parameters"][0]["values"][0] = nlohmann::json::array();
  EXPECT_THROW(specFromJson(bad, "spec"), StoreError);
  bad = toJson(spec);
  bad.erase("metric");
  EXPECT_THROW(specFromJson(bad, "spec"), StoreError);
}

}  // namespace
}  // namespace ipu::store
