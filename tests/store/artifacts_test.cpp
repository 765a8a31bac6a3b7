// Artifacts in the run store (docs/tracking.md, "Artifacts"), on both
// backends: a checkpoint's bytes kept in the store (SQLite incremental blob
// I/O, PostgreSQL large objects) read back byte for byte, in chunks, with
// their checksum; a damaged copy refused and never put in place; a missing
// or different file fetched into place; pruning by a retention rule, never
// what a running run or an unfinished sweep's `from:` needs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "interpreter/runner/artifact_gc.h"
#include "interpreter/runner/checkpoint_fetch.h"
#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"
#include "interpreter/store/sweep_store.h"
#include "tests/store/postgres_server.h"
#include "tests/store/sweep_grid.h"

namespace ipu::store {
namespace {

namespace fs = std::filesystem;

enum class Backend { Sqlite, Postgres };

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ArtifactStoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : test)
      if (c == '/') c = '_';
    dir_ = fs::temp_directory_path() / ("ipu-artifacts-test-" + std::to_string(::getpid()) + "-" + test);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    if (GetParam() == Backend::Sqlite) {
      location_ = (dir_ / "ipu.db").string();
    } else {
      auto& server = testing::postgresServer();
      ASSERT_TRUE(server.running()) << server.error();
      location_ = server.createDatabase();
    }
    store_ = openStore(location_, OpenMode::Create);
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<SqlConnection> raw() {
    return GetParam() == Backend::Sqlite ? connectSqlite(location_, false) : connectPostgres(location_);
  }
  // How many contents the store keeps (rows of artifact_contents, large objects).
  long long contents() {
    return cellInt(raw()->query(GetParam() == Backend::Sqlite ? "SELECT count(*) FROM artifact_contents"
                                                              : "SELECT count(*) FROM pg_largeobject_metadata")
                       .at(0)[0]);
  }

  long long newRun(RunStatus status = RunStatus::Finished, const std::string& name = "",
                   std::map<std::string, std::string> parameters = {}) {
    NewRun r;
    r.training = "t";
    r.name = name;
    r.parameters = std::move(parameters);
    r.script = "run t { }\n";
    r.host = "h";
    r.startedAt = nowSeconds() - 100;
    const long long id = store_->createRun(r);
    if (status != RunStatus::Running) store_->finishRun(id, status, "", nowSeconds() - 50);
    return id;
  }

  // A checkpoint file of `bytes` pseudo-random bytes (the first one 'A') in
  // run directory `run`, recorded with its checksum, its bytes in the store
  // when `keep`.
  Artifact checkpoint(long long id, const std::string& rel, std::size_t bytes, long long step, bool keep,
                      const std::string& host = "") {
    const fs::path runDir = dir_ / ("run" + std::to_string(id));
    const fs::path file = runDir / rel;
    fs::create_directories(file.parent_path());
    std::mt19937 gen(static_cast<unsigned>(step + id * 1000));
    std::string data(bytes, '\0');
    for (char& c : data) c = static_cast<char>(gen());
    if (!data.empty()) data[0] = 'A';
    std::ofstream(file, std::ios::binary) << data;
    Artifact a;
    a.kind = "checkpoint";
    a.path = rel;
    a.runDirectory = runDir.string();
    a.phase = fs::path(rel).parent_path().filename().string();
    a.step = step;
    a.host = host;
    std::string error;
    EXPECT_TRUE(runner::fileDigest(file.string(), a.sha256, a.size, error)) << error;
    store_->addArtifact(id, a, keep ? file.string() : "");
    a.stored = keep;
    return a;
  }

  fs::path dir_;
  std::string location_;
  std::unique_ptr<RunStore> store_;
};

TEST_P(ArtifactStoreTest, KeepsACheckpointsBytesWithItsChecksumAndReadsThemBackInChunks) {
  const long long id = newRun();
  // 2.5 MiB: more than two chunks of kContentChunkBytes.
  const Artifact a = checkpoint(id, "checkpoints/one/step-00000002.ipt", (5u << 20) / 2, 2, true, "hostA");
  const std::string original = readAll(artifactFile(a));
  auto r = store_->run(id);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->artifacts.size(), 1u);
  const Artifact& got = r->artifacts[0];
  EXPECT_EQ(got.path, "checkpoints/one/step-00000002.ipt");
  EXPECT_EQ(got.runDirectory, a.runDirectory);
  EXPECT_EQ(got.phase, "one");
  EXPECT_EQ(got.step, 2);
  EXPECT_EQ(got.size, static_cast<long long>(original.size()));
  EXPECT_EQ(got.sha256, a.sha256);
  EXPECT_EQ(got.sha256.size(), 64u);
  EXPECT_EQ(got.host, "hostA");
  EXPECT_TRUE(got.stored);
  std::string back;
  int chunks = 0;
  store_->readArtifact(id, a.path, [&](const char* p, std::size_t n) {
    back.append(p, n);
    ++chunks;
  });
  EXPECT_EQ(back, original);
  EXPECT_GE(chunks, 3);
  EXPECT_EQ(contents(), 1);
}

TEST_P(ArtifactStoreTest, FetchesACheckpointThatIsMissingOrDifferentIntoPlace) {
  const long long id = newRun(RunStatus::Finished, "source");
  const Artifact a = checkpoint(id, "checkpoints/one/final.ipt", 300000, 6, true);
  const std::string original = readAll(artifactFile(a));
  auto r = store_->run(id);
  ASSERT_TRUE(r);
  // Another host: the run directory is not here.
  const fs::path elsewhere = dir_ / "elsewhere" / "checkpoints/one/final.ipt";
  runner::CheckpointFile f = runner::ensureCheckpoint(*store_, *r, r->artifacts[0], elsewhere.string());
  ASSERT_TRUE(f.ok) << f.problem;
  EXPECT_TRUE(f.fetched);
  EXPECT_EQ(readAll(elsewhere), original);
  // There and right: used as it is.
  f = runner::ensureCheckpoint(*store_, *r, r->artifacts[0], elsewhere.string());
  ASSERT_TRUE(f.ok);
  EXPECT_FALSE(f.fetched);
  // There and different: replaced by the recorded bytes.
  std::ofstream(elsewhere, std::ios::binary) << "not these weights";
  f = runner::ensureCheckpoint(*store_, *r, r->artifacts[0], elsewhere.string());
  ASSERT_TRUE(f.ok) << f.problem;
  EXPECT_TRUE(f.fetched);
  EXPECT_EQ(readAll(elsewhere), original);
  // Nothing else is left beside it (no temporary file).
  EXPECT_EQ(std::distance(fs::directory_iterator(elsewhere.parent_path()), fs::directory_iterator()), 1);
  // localCheckpoint: its own file when that is here, else a copy under the cache.
  f = runner::localCheckpoint(*store_, *r, r->artifacts[0], (dir_ / "cache").string());
  ASSERT_TRUE(f.ok);
  EXPECT_EQ(f.path, artifactFile(a));
  fs::remove_all(a.runDirectory);
  f = runner::localCheckpoint(*store_, *r, r->artifacts[0], (dir_ / "cache").string());
  ASSERT_TRUE(f.ok) << f.problem;
  EXPECT_TRUE(f.fetched);
  EXPECT_EQ(f.path, (dir_ / "cache" / "store-artifacts" / std::to_string(id) / "checkpoints/one/final.ipt").string());
  EXPECT_EQ(readAll(f.path), original);
}

TEST_P(ArtifactStoreTest, AFetchedCopyStaysInTheCache) {
  // A record whose path climbs out (`..`): its copy goes under the cache, by its file name.
  const long long id = newRun(RunStatus::Finished, "climber");
  Artifact a = checkpoint(id, "checkpoints/one/final.ipt", 1000, 2, false);
  const std::string file = artifactFile(a);
  a.path = "../../outside.ipt";
  store_->addArtifact(id, a, file);
  auto r = store_->run(id);
  ASSERT_TRUE(r);
  const Artifact* climbing = nullptr;
  for (const auto& x : r->artifacts)
    if (x.path == "../../outside.ipt") climbing = &x;
  ASSERT_NE(climbing, nullptr);
  runner::CheckpointFile f = runner::localCheckpoint(*store_, *r, *climbing, (dir_ / "cache").string());
  ASSERT_TRUE(f.ok) << f.problem;
  EXPECT_EQ(f.path, (dir_ / "cache" / "store-artifacts" / std::to_string(id) / "outside.ipt").string());
  EXPECT_FALSE(runner::staysInside("../x.ipt"));
  EXPECT_FALSE(runner::staysInside("/abs/x.ipt"));
  EXPECT_FALSE(runner::staysInside("checkpoints/../../x.ipt"));
  EXPECT_TRUE(runner::staysInside("checkpoints/one/final.ipt"));
}

TEST_P(ArtifactStoreTest, ADamagedCopyIsRefusedAndNeverPutInPlace) {
  const long long id = newRun(RunStatus::Finished, "damaged_run");
  const Artifact a = checkpoint(id, "checkpoints/one/step-00000004.ipt", 100000, 4, true);
  // One byte changed in the store ('A' -> 'Z').
  if (GetParam() == Backend::Sqlite)
    raw()->execute("UPDATE artifact_contents SET data = X'5A' || substr(data, 2)");
  else
    raw()->execute("SELECT lo_put(content::oid, 0, '\\x5a'::bytea) FROM artifacts WHERE content IS NOT NULL");
  EXPECT_THROW(store_->readArtifact(id, a.path, [](const char*, std::size_t) {}), ArtifactDamaged);
  auto r = store_->run(id);
  ASSERT_TRUE(r);
  const fs::path destination = dir_ / "elsewhere" / a.path;
  runner::CheckpointFile f = runner::ensureCheckpoint(*store_, *r, r->artifacts[0], destination.string());
  EXPECT_FALSE(f.ok);
  EXPECT_NE(f.problem.find("damaged"), std::string::npos) << f.problem;
  EXPECT_NE(f.problem.find("damaged_run"), std::string::npos) << f.problem;
  EXPECT_NE(f.problem.find(a.path), std::string::npos) << f.problem;
  EXPECT_NE(f.problem.find("restore the file"), std::string::npos) << f.problem;
  EXPECT_FALSE(fs::exists(destination));
  EXPECT_TRUE(!fs::exists(destination.parent_path()) || fs::is_empty(destination.parent_path()));
}

TEST_P(ArtifactStoreTest, ACheckpointKeptAsAFileOnlyIsNotFetched) {
  const long long id = newRun(RunStatus::Finished, "files_run");
  const Artifact a = checkpoint(id, "checkpoints/one/final.ipt", 1000, 3, false, "hostB");
  EXPECT_EQ(contents(), 0);
  EXPECT_THROW(store_->readArtifact(id, a.path, [](const char*, std::size_t) {}), StoreError);
  auto r = store_->run(id);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->artifacts[0].stored);
  runner::CheckpointFile f = runner::ensureCheckpoint(*store_, *r, r->artifacts[0], (dir_ / "x" / a.path).string());
  EXPECT_FALSE(f.ok);
  EXPECT_NE(f.problem.find("not in the store"), std::string::npos) << f.problem;
  EXPECT_NE(f.problem.find("hostB"), std::string::npos) << f.problem;
}

TEST_P(ArtifactStoreTest, RemovingArtifactsOrTheirRunRemovesTheirBytes) {
  const long long id = newRun();
  checkpoint(id, "checkpoints/one/step-00000002.ipt", 5000, 2, true);
  checkpoint(id, "checkpoints/one/final.ipt", 5000, 4, true);
  EXPECT_EQ(contents(), 2);
  // Recording one again replaces its bytes, never leaves the old ones.
  checkpoint(id, "checkpoints/one/final.ipt", 6000, 4, true);
  EXPECT_EQ(contents(), 2);
  EXPECT_EQ(store_->removeArtifacts(id, {"checkpoints/one/step-00000002.ipt", "no/such.ipt"}), 1u);
  EXPECT_EQ(contents(), 1);
  EXPECT_EQ(store_->run(id)->artifacts.size(), 1u);
  EXPECT_TRUE(store_->deleteRun(id));
  EXPECT_EQ(contents(), 0);
  // Bytes removed behind the store's back do not stop a run from being deleted.
  const long long other = newRun();
  checkpoint(other, "checkpoints/one/final.ipt", 5000, 4, true);
  raw()->execute(GetParam() == Backend::Sqlite ? "DELETE FROM artifact_contents"
                                               : "SELECT lo_unlink(content::oid) FROM artifacts WHERE content IS NOT NULL");
  EXPECT_TRUE(store_->deleteRun(other));
  EXPECT_FALSE(store_->run(other));
}

TEST_P(ArtifactStoreTest, PruningKeepsTheLastAndTheFinalsAndWhatIsNeeded) {
  auto sweeps = openSweepStore(location_, OpenMode::Existing);
  // Phase one: steps 2, 4, final at 6; phase two: step 8 (the last).
  auto four = [&](long long id) {
    std::vector<Artifact> a;
    a.push_back(checkpoint(id, "checkpoints/one/step-00000002.ipt", 100, 2, true));
    a.push_back(checkpoint(id, "checkpoints/one/step-00000004.ipt", 100, 4, true));
    a.push_back(checkpoint(id, "checkpoints/one/final.ipt", 100, 6, true));
    a.push_back(checkpoint(id, "checkpoints/two/step-00000008.ipt", 100, 8, true));
    return a;
  };
  const long long done = newRun(RunStatus::Finished, "done");
  four(done);
  const long long running = newRun(RunStatus::Running, "running");
  four(running);
  const long long source = newRun(RunStatus::Finished, "source");
  four(source);
  // An unfinished sweep starts from `source`: kept whole.
  sweep::SweepSpec spec = testing::gridSpec("from_source");
  spec.from = sweep::StartFrom{sweep::StartFrom::Kind::Run, "source"};
  sweeps->createOrResumeSweep(spec, "script", nowSeconds());

  runner::RetentionRule rule;
  rule.keep = runner::KeepCheckpoints::Last;
  runner::PrunePlan plan = runner::planPrune(*store_, *sweeps, rule, nowSeconds());
  std::vector<std::string> pruned;
  for (const auto& p : plan.checkpoints) pruned.push_back(p.runName + ":" + p.artifact.path);
  std::sort(pruned.begin(), pruned.end());
  EXPECT_EQ(pruned, (std::vector<std::string>{"done:checkpoints/one/step-00000002.ipt", "done:checkpoints/one/step-00000004.ipt"}));
  EXPECT_EQ(plan.storeBytes, 200);
  EXPECT_EQ(plan.fileBytes, 200);
  ASSERT_EQ(plan.protectedRuns.size(), 1u);
  EXPECT_NE(plan.protectedRuns[0].find("from_source"), std::string::npos);
  // Only runs that ended long enough ago.
  rule.olderThanDays = 1;
  EXPECT_TRUE(runner::planPrune(*store_, *sweeps, rule, nowSeconds()).checkpoints.empty());
  EXPECT_EQ(runner::planPrune(*store_, *sweeps, rule, nowSeconds() + 2 * 86400).checkpoints.size(), 2u);
  rule.olderThanDays = 0;
  // Carried out: records, bytes in the store and files go; the rest stays.
  const long long before = contents();
  EXPECT_TRUE(runner::prune(*store_, plan).empty());
  EXPECT_EQ(contents(), before - 2);
  auto r = store_->run(done);
  ASSERT_EQ(r->artifacts.size(), 2u);
  EXPECT_FALSE(fs::exists(dir_ / ("run" + std::to_string(done)) / "checkpoints/one/step-00000002.ipt"));
  EXPECT_TRUE(fs::exists(dir_ / ("run" + std::to_string(done)) / "checkpoints/one/final.ipt"));
  EXPECT_EQ(store_->run(running)->artifacts.size(), 4u);
  EXPECT_EQ(store_->run(source)->artifacts.size(), 4u);
  // Once the sweep is finished, `source` is pruned like any run.
  sweeps->setSweepState(sweeps->sweep("from_source")->id, SweepState::Cancelled);
  EXPECT_EQ(runner::planPrune(*store_, *sweeps, rule, nowSeconds()).checkpoints.size(), 2u);
}

TEST_P(ArtifactStoreTest, PruningTheBestKeepsOnlyTheBestTrialsCheckpoints) {
  auto sweeps = openSweepStore(location_, OpenMode::Existing);
  const SweepRecord sw = sweeps->createOrResumeSweep(testing::gridSpec("grid"), "script", nowSeconds()).sweep;
  auto trialRun = [&](const std::string& name, double metric) {
    const long long id = newRun(RunStatus::Finished, name, {{"sweep", "grid"}});
    checkpoint(id, "checkpoints/one/step-00000002.ipt", 100, 2, true);
    checkpoint(id, "checkpoints/one/final.ipt", 100, 4, true);
    ClaimOptions o;
    o.agent = "test:1";
    Claim c = sweeps->claimTrial(sw.id, o, testing::nextGridCell, nowSeconds());
    EXPECT_EQ(c.outcome, ClaimOutcome::Trial);
    TrialOutcome out;
    out.state = TrialState::Finished;
    out.metric = metric;
    out.runId = id;
    EXPECT_TRUE(sweeps->endTrial(c.lease, out, nowSeconds()));
    return id;
  };
  trialRun("better", 1.0);
  trialRun("worse", 2.0);
  const long long alone = newRun(RunStatus::Finished, "alone");
  checkpoint(alone, "checkpoints/one/step-00000002.ipt", 100, 2, true);
  checkpoint(alone, "checkpoints/one/final.ipt", 100, 4, true);
  runner::RetentionRule rule;
  rule.keep = runner::KeepCheckpoints::Best;
  std::vector<std::string> pruned;
  for (const auto& p : runner::planPrune(*store_, *sweeps, rule, nowSeconds()).checkpoints)
    pruned.push_back(p.runName + ":" + p.artifact.path);
  std::sort(pruned.begin(), pruned.end());
  // The worse trial keeps nothing; the best and a run of no sweep keep their last.
  EXPECT_EQ(pruned, (std::vector<std::string>{"alone:checkpoints/one/step-00000002.ipt",
                                              "better:checkpoints/one/step-00000002.ipt",
                                              "worse:checkpoints/one/final.ipt",
                                              "worse:checkpoints/one/step-00000002.ipt"}));
}

INSTANTIATE_TEST_SUITE_P(Sqlite, ArtifactStoreTest, ::testing::Values(Backend::Sqlite));
INSTANTIATE_TEST_SUITE_P(Postgres, ArtifactStoreTest, ::testing::Values(Backend::Postgres));

}  // namespace
}  // namespace ipu::store
