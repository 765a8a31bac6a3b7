// The run store's test suite, run against both backends behind the one
// RunStore interface: SQLite (a file in a temporary directory) and
// PostgreSQL (a real server this process starts: postgres_server.h). Each
// test gets an empty store. Plus the filter language of `ipu runs --where`,
// which needs no database.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "interpreter/store/filter.h"
#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"
#include "tests/store/postgres_server.h"

namespace ipu::store {
namespace {

namespace fs = std::filesystem;

enum class Backend { Sqlite, Postgres };

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::Sqlite) {
      std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      for (char& c : test)
        if (c == '/') c = '_';
      dir_ = fs::temp_directory_path() / ("ipu-store-test-" + std::to_string(::getpid()) + "-" + test);
      fs::remove_all(dir_);
      location_ = (dir_ / "sub" / "ipu.db").string();  // the directory is created too
    } else {
      auto& server = testing::postgresServer();
      ASSERT_TRUE(server.running()) << server.error();
      location_ = server.createDatabase();
    }
    store_ = openStore(location_, OpenMode::Create);
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::unique_ptr<SqlConnection> raw() {
    return GetParam() == Backend::Sqlite ? connectSqlite(location_, false) : connectPostgres(location_);
  }

  // The SQLite store's bytes with its WAL folded into the file first, so
  // they say everything ("" for PostgreSQL): to check a store left untouched.
  std::string sqliteBytes() {
    if (GetParam() != Backend::Sqlite) return "";
    raw()->query("PRAGMA wal_checkpoint(TRUNCATE)");
    std::ifstream in(location_, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  long long newRun(const std::string& training = "t", std::map<std::string, std::string> params = {{"mapping.replicas", "4"}},
                   RunKind kind = RunKind::Run, double startedAt = 1000) {
    NewRun r;
    r.kind = kind;
    r.training = training;
    r.script = "run t { }\n";
    r.planHash = "abc";
    r.parameters = std::move(params);
    r.host = "h";
    r.pid = 42;
    r.startedAt = startedAt;
    return store_->createRun(r);
  }

  fs::path dir_;
  std::string location_;
  std::unique_ptr<RunStore> store_;
};

TEST_P(StoreTest, RecordsARunWithItsParametersMetricsAndSummaries) {
  long long id = newRun("pretrain", {{"mapping.replicas", "4"}, {"optimizer.beta1", "0.9"}});
  EXPECT_GT(id, 0);
  // Out of order, a non-finite value, and two batches.
  store_->appendMetrics(id, {{"loss", 2, 5.0, 1}, {"loss", 1, 7.0, 1}, {"loss", 3, std::nan(""), 1}});
  store_->appendMetrics(id, {{"loss", 4, 4.5, 2}, {"lr", 4, 0.001, 2}});
  store_->finishRun(id, RunStatus::Finished, "", 2000);

  auto runs = store_->listRuns();
  ASSERT_EQ(runs.size(), 1u);
  const RunRecord& r = runs[0];
  EXPECT_EQ(r.id, id);
  EXPECT_EQ(r.name, "pretrain-" + std::to_string(id));
  EXPECT_EQ(r.kind, RunKind::Run);
  EXPECT_EQ(r.status, RunStatus::Finished);
  EXPECT_EQ(r.startedAt, 1000);
  EXPECT_EQ(r.endedAt, 2000);
  EXPECT_EQ(r.parameters.at("mapping.replicas"), "4");
  EXPECT_EQ(r.parameters.at("optimizer.beta1"), "0.9");
  const MetricSummary& loss = r.metrics.at("loss");
  EXPECT_EQ(loss.count, 4);
  EXPECT_EQ(loss.last, 4.5);
  EXPECT_EQ(loss.lastStep, 4);
  EXPECT_EQ(loss.min, 4.5);
  EXPECT_EQ(loss.max, 7.0);

  auto history = store_->metricHistory(id, "loss");
  ASSERT_EQ(history.size(), 4u);
  EXPECT_EQ(history[0].step, 1);
  EXPECT_EQ(history[0].value, 7.0);
  EXPECT_TRUE(std::isnan(history[2].value));  // kept, as NaN
  EXPECT_EQ(store_->metricHistory(id).size(), 5u);

  auto full = store_->run(id);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->script, "run t { }\n");
  EXPECT_FALSE(store_->run(id + 1000));
}

TEST_P(StoreTest, DoublesRoundTripExactly) {
  long long id = newRun();
  const double tricky[] = {0.1 + 0.2, 1e-300, 123456789.123456789, -2.5e17};
  std::vector<MetricPoint> points;
  for (int i = 0; i < 4; ++i) points.push_back({"x", i, tricky[i], 1});
  store_->appendMetrics(id, points);
  auto h = store_->metricHistory(id, "x");
  ASSERT_EQ(h.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h[static_cast<std::size_t>(i)].value, tricky[i]);
}

TEST_P(StoreTest, ListsNewestFirst) {
  long long a = newRun("a", {}, RunKind::Run, 100);
  long long b = newRun("b", {}, RunKind::Estimate, 300);
  long long c = newRun("c", {}, RunKind::Run, 200);
  auto runs = store_->listRuns();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].id, b);
  EXPECT_EQ(runs[0].kind, RunKind::Estimate);
  EXPECT_EQ(runs[1].id, c);
  EXPECT_EQ(runs[2].id, a);
}

TEST_P(StoreTest, TagsNotesAndDelete) {
  long long id = newRun();
  long long other = newRun();
  store_->addTags(id, {"baseline", "fp16"});
  store_->addTags(id, {"baseline"});  // twice is once
  store_->setNote(id, "the first try");
  store_->appendMetrics(id, {{"loss", 1, 1.0, 1}});
  store_->addArtifact(id, {"run_directory", "/r/1"});
  auto r = store_->run(id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tags, (std::vector<std::string>{"baseline", "fp16"}));
  EXPECT_EQ(r->note, "the first try");
  store_->removeTags(id, {"fp16"});
  EXPECT_EQ(store_->run(id)->tags, std::vector<std::string>{"baseline"});
  EXPECT_TRUE(store_->deleteRun(id));
  EXPECT_FALSE(store_->deleteRun(id));
  EXPECT_FALSE(store_->run(id));
  EXPECT_TRUE(store_->metricHistory(id).empty());
  EXPECT_FALSE(store_->findByRunDirectory("/r/1"));
  ASSERT_EQ(store_->listRuns().size(), 1u);
  EXPECT_EQ(store_->listRuns()[0].id, other);
}

// Points a process still sends for a run deleted under it are refused, not
// kept as rows of no run; a run is recorded with its directory once.
TEST_P(StoreTest, NoRowsOfADeletedRunAndOneRunPerDirectory) {
  long long id = newRun();
  store_->appendMetrics(id, {{"loss", 1, 2.0, 1001}});
  EXPECT_TRUE(store_->deleteRun(id));
  EXPECT_THROW(store_->appendMetrics(id, {{"loss", 2, 1.5, 1002}}), StoreError);
  EXPECT_TRUE(raw()->query("SELECT 1 FROM metrics WHERE run_id = ?", {id}).empty());
  EXPECT_TRUE(raw()->query("SELECT 1 FROM metric_summaries WHERE run_id = ?", {id}).empty());

  NewRun r;
  r.training = "imported";
  r.startedAt = 1000;
  RunContents contents;
  contents.points = {{"loss", 1, 3.0, 1001}, {"loss", 2, 2.5, 1002}};
  contents.artifacts = {{"checkpoint", "/runs/imported/1/checkpoints/p/final.ipt"}};
  contents.status = RunStatus::Finished;
  contents.endedAt = 1010;
  const std::optional<long long> first = store_->createRunForDirectory(r, "/runs/imported/1", contents);
  ASSERT_TRUE(first);
  EXPECT_FALSE(store_->createRunForDirectory(r, "/runs/imported/1", contents));
  EXPECT_EQ(store_->findByRunDirectory("/runs/imported/1"), first);
  EXPECT_EQ(store_->listRuns().size(), 1u);
  // Recorded whole, in the one transaction: points, summary, checkpoint, end.
  const auto whole = store_->run(*first);
  EXPECT_EQ(whole->status, RunStatus::Finished);
  EXPECT_EQ(whole->endedAt, 1010);
  EXPECT_EQ(whole->metrics.at("loss").count, 2);
  EXPECT_EQ(whole->metrics.at("loss").last, 2.5);
  EXPECT_EQ(whole->artifacts.size(), 2u);
}

// A batch written again after a commit whose outcome was not known (a lost
// connection) replaces itself: no point twice, the summary as if written once.
TEST_P(StoreTest, ABatchWrittenAgainIsNotRecordedTwice) {
  long long id = newRun();
  store_->appendMetrics(id, {{"loss", 1, 5.0, 1}, {"loss", 2, 4.0, 1}});
  const std::vector<MetricPoint> batch{{"loss", 3, 3.0, 2}, {"loss", 4, 2.0, 2}, {"eval.loss", 4, 2.5, 2}};
  store_->appendMetrics(id, batch);   // committed, though the writer did not hear so
  store_->markStale(1e12, 0, nullptr);  // and gc marked the silent run killed meanwhile
  store_->replaceMetrics(id, batch);
  store_->replaceMetrics(id, batch);
  const auto r = store_->run(id);
  EXPECT_EQ(r->status, RunStatus::Running);  // its process goes on recording
  EXPECT_EQ(r->metrics.at("loss").count, 4);
  EXPECT_EQ(r->metrics.at("loss").last, 2.0);
  EXPECT_EQ(r->metrics.at("loss").max, 5.0);
  EXPECT_EQ(r->metrics.at("eval.loss").count, 1);
  EXPECT_EQ(store_->metricHistory(id, "loss").size(), 4u);
  // A batch that never reached the store is simply recorded.
  store_->replaceMetrics(id, {{"loss", 5, 1.0, 3}});
  EXPECT_EQ(store_->run(id)->metrics.at("loss").count, 5);
  EXPECT_TRUE(store_->deleteRun(id));
  EXPECT_THROW(store_->replaceMetrics(id, batch), RunGone);
}

// `ipu runs import` of a run the store holds in part: the record becomes the
// directory's, every point once, ended as the directory says.
TEST_P(StoreTest, APartialRecordIsCompleted) {
  long long id = newRun();
  store_->appendMetrics(id, {{"loss", 1, 5.0, 1}, {"loss", 2, 4.0, 1}});
  RunContents c;
  for (int s = 1; s <= 6; ++s) c.points.push_back({"loss", s, 6.0 - s, 1});
  c.artifacts = {{"checkpoint", "/r/checkpoints/p/final.ipt"}};
  c.status = RunStatus::Finished;
  c.endedAt = 2000;
  store_->completeRun(id, c);
  store_->completeRun(id, c);  // twice: the same
  const auto r = store_->run(id);
  EXPECT_EQ(r->status, RunStatus::Finished);
  EXPECT_EQ(r->endedAt, 2000);
  EXPECT_EQ(r->metrics.at("loss").count, 6);
  EXPECT_EQ(r->metrics.at("loss").last, 0.0);
  EXPECT_EQ(store_->metricHistory(id, "loss").size(), 6u);
  ASSERT_EQ(r->artifacts.size(), 1u);
}

// A store that opens but cannot be written: checkWritable says so (ipu run
// refuses to start on it); on one that can, it writes nothing.
TEST_P(StoreTest, AStoreThatCannotBeWrittenIsFoundOut) {
  long long id = newRun();
  const std::string before = sqliteBytes();
  EXPECT_NO_THROW(store_->checkWritable());
  EXPECT_EQ(sqliteBytes(), before);
  EXPECT_EQ(store_->listRuns().size(), 1u);
  EXPECT_EQ(store_->run(id)->metrics.size(), 0u);
  if (GetParam() == Backend::Sqlite) {
    // A file this user may read, not write (in a directory it may write, for
    // SQLite's shared-memory file). Root writes any file whatever its mode,
    // so under root a child process does the reading as `nobody`.
    store_.reset();
    fs::permissions(location_, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    fs::permissions(dir_, fs::perms::all);
    fs::permissions(fs::path(location_).parent_path(), fs::perms::all);
    auto check = [&]() -> int {  // 0: reads, and refused as unwritable
      try {
        auto reader = openStore(location_, OpenMode::Existing);
        if (reader->listRuns().size() != 1u) return 2;
        try {
          reader->checkWritable();
        } catch (const StoreError& e) {
          return std::string(e.what()).find("readonly") != std::string::npos ? 0 : 3;
        }
        return 4;
      } catch (const StoreError&) {
        return 5;
      }
    };
    if (::geteuid() != 0) {
      EXPECT_EQ(check(), 0);
      return;
    }
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(6);
      ::_exit(check());
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1 reads, 2 lists another count, 3 refused for another reason, 4 not refused, "
                                         "5 does not open, 6 cannot become nobody";
  } else {
    // A database user with the right to read only.
    auto admin = raw();
    admin->execute("CREATE ROLE reader LOGIN; GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader");
    std::string uri = location_;
    uri.replace(uri.find("://ipu@"), 7, "://reader@");
    auto reader = openStore(uri, OpenMode::Existing);
    EXPECT_EQ(reader->listRuns().size(), 1u);  // it reads
    EXPECT_THROW(reader->checkWritable(), StoreError);
    admin->execute("DROP OWNED BY reader; DROP ROLE reader");
  }
}

TEST_P(StoreTest, ArtifactsFindTheRunOfADirectory) {
  long long id = newRun();
  store_->addArtifact(id, {"run_directory", "/runs/t/20261121-085340"});
  store_->addArtifact(id, {"checkpoint", "/runs/t/20261121-085340/checkpoints/one/final.ipt"});
  store_->addArtifact(id, {"checkpoint", "/runs/t/20261121-085340/checkpoints/one/final.ipt"});  // once
  EXPECT_EQ(store_->findByRunDirectory("/runs/t/20261121-085340"), id);
  EXPECT_FALSE(store_->findByRunDirectory("/runs/t/other"));
  EXPECT_EQ(store_->run(id)->artifacts.size(), 2u);
}

TEST_P(StoreTest, SilentRunsBecomeKilledOthersStay) {
  long long silent = newRun();
  long long alive = newRun();
  long long done = newRun();
  const double now = nowSeconds();
  store_->heartbeat(silent, now - 120);
  store_->heartbeat(alive, now - 5);
  store_->finishRun(done, RunStatus::Finished, "", now - 500);
  // A silent run whose process is still there (as `alive` says) stays.
  long long stalled = newRun();
  store_->heartbeat(stalled, now - 120);
  auto killed = store_->markStale(now, 30, [&](const std::string& host, long long pid) {
    EXPECT_EQ(host, "h");
    EXPECT_EQ(pid, 42);
    return false;
  });
  EXPECT_EQ(killed, (std::vector<long long>{silent, stalled}));
  store_->reopenRun(stalled, 0, "h", 42);
  store_->heartbeat(stalled, now - 120);
  EXPECT_TRUE(store_->markStale(now, 30, [](const std::string&, long long) { return true; }).empty());
  EXPECT_EQ(store_->run(stalled)->status, RunStatus::Running);
  EXPECT_EQ(store_->run(silent)->status, RunStatus::Killed);
  EXPECT_EQ(store_->run(silent)->endedAt, now - 120);  // when it was last heard of
  EXPECT_EQ(store_->run(alive)->status, RunStatus::Running);
  EXPECT_EQ(store_->run(done)->status, RunStatus::Finished);
  EXPECT_EQ(store_->markStale(now, 30, nullptr), std::vector<long long>{stalled});
  EXPECT_TRUE(store_->markStale(now, 30, nullptr).empty());  // idempotent
}

TEST_P(StoreTest, ReopeningDropsStepsToBeRecordedAgain) {
  long long id = newRun();
  std::vector<MetricPoint> points;
  for (int s = 1; s <= 10; ++s) points.push_back({"loss", s, 10.0 - s, 1});
  store_->appendMetrics(id, points);
  store_->finishRun(id, RunStatus::Cancelled, "Ctrl-C", 5);
  store_->reopenRun(id, 7, "other-host", 4242);
  auto r = store_->run(id);
  EXPECT_EQ(r->status, RunStatus::Running);
  EXPECT_EQ(r->host, "other-host");  // the resuming process, whose liveness counts now
  EXPECT_EQ(r->pid, 4242);
  EXPECT_TRUE(std::isnan(r->endedAt));
  EXPECT_EQ(r->metrics.at("loss").count, 6);
  EXPECT_EQ(r->metrics.at("loss").last, 4.0);
  EXPECT_EQ(r->metrics.at("loss").min, 4.0);
  EXPECT_EQ(store_->metricHistory(id, "loss").size(), 6u);
}

TEST_P(StoreTest, OpeningAgainIsIdempotentAndKeepsTheData) {
  long long id = newRun();
  store_.reset();
  for (int i = 0; i < 3; ++i) {
    auto again = openStore(location_, OpenMode::Existing);
    ASSERT_EQ(again->listRuns().size(), 1u);
    EXPECT_EQ(again->listRuns()[0].id, id);
  }
  auto db = raw();
  auto rows = db->query("SELECT value FROM ipu_meta WHERE key = 'schema_version'");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(*rows[0][0], std::to_string(kSchemaVersion));
}

std::string fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_P(StoreTest, ANewerSchemaIsRefusedAndLeftUntouched) {
  long long id = newRun();
  store_.reset();
  {
    auto db = raw();
    db->query("UPDATE ipu_meta SET value = '99' WHERE key = 'schema_version'");
  }
  const std::string before = sqliteBytes();
  try {
    openStore(location_, OpenMode::Create);
    FAIL() << "a store of schema version 99 was opened";
  } catch (const StoreError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("schema version 99"), std::string::npos) << what;
    EXPECT_NE(what.find("newer ipu"), std::string::npos) << what;
    EXPECT_NE(what.find("untouched"), std::string::npos) << what;
  }
  if (GetParam() == Backend::Sqlite) {
    EXPECT_EQ(fileBytes(location_), before);
  }
  auto db = raw();
  EXPECT_EQ(*db->query("SELECT value FROM ipu_meta WHERE key = 'schema_version'")[0][0], "99");
  EXPECT_EQ(db->query("SELECT id FROM runs").size(), 1u);
  (void)id;
}

// A schema version that is not a whole number this ipu can hold (one that
// overflows an int, or is not a number) is a version it cannot read: refused
// as a newer store's, never read as a small number and written over.
TEST_P(StoreTest, AnUnreadableSchemaVersionIsRefusedAndLeftUntouched) {
  newRun();
  store_.reset();
  for (const std::string version : {"99999999999999999999999", "4294967298", "2147483648", "-1", "3.5", "three", ""}) {
    raw()->query("UPDATE ipu_meta SET value = ? WHERE key = 'schema_version'", {version});
    const std::string before = sqliteBytes();
    EXPECT_THROW(openStore(location_, OpenMode::Create), StoreError) << "version `" << version << "`";
    if (GetParam() == Backend::Sqlite) {
      EXPECT_EQ(fileBytes(location_), before) << "version `" << version << "`";
    }
    EXPECT_EQ(*raw()->query("SELECT value FROM ipu_meta WHERE key = 'schema_version'")[0][0], version);
  }
}

// A store URI's password is never printed: not in the location, not where
// libpq's message quotes the URI (a malformed host, a bad % escape, a
// password parameter). Nothing listens on port 1, so each fails at once.
TEST(StoreLocation, PasswordsAreNeverPrinted) {
  EXPECT_EQ(printableLocation("postgresql://ann:s3cret@db.example:5432/runs"), "postgresql://ann:***@db.example:5432/runs");
  EXPECT_EQ(printableLocation("postgres://ann@db/runs?sslmode=require&password=s3cret"), "postgres://ann@db/runs?sslmode=require&password=***");
  EXPECT_EQ(printableLocation("runs/ipu.db"), "runs/ipu.db");
  // libpq's user part ends at the first `@` before a `/`, past a `?` (found
  // by tests/fuzz/fuzz_store_uri.cpp).
  EXPECT_EQ(printableLocation("postgresql://ann:s3c?ret@db/runs"), "postgresql://ann:***@db/runs");
  EXPECT_EQ(printableLocation("postgresql://ann@db/runs?password= s3c ret"), "postgresql://ann@db/runs?password=***");
  EXPECT_EQ(printableLocation("postgresql://ann@db/runs?pass%77ord=s3cret&x=1"), "postgresql://ann@db/runs?pass%77ord=***&x=1");
  for (const std::string uri : {"postgresql://ann:s3cretpw@[localhost:1/runs", "postgresql://ann:s3c%zzretpw@localhost:1/runs",
                                "postgresql://ann:s3c%72etpw@localhost:1/runs", "postgresql://ann@localhost:1/runs?password=s3cretpw",
                                "postgresql://ann@localhost:1/runs?password=s3cretpw&sslmode=bogus",
                                "postgresql://ann:s3cret?pw@localhost:1/runs?sslmode=bogus"}) {
    try {
      connectPostgres(uri);
      ADD_FAILURE() << "connected to " << uri;
    } catch (const StoreError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
      EXPECT_EQ(what.find("s3c%"), std::string::npos) << what;
      EXPECT_NE(what.find("***"), std::string::npos) << what;
    }
  }
}

// A store whose path cannot be looked at (a directory without search
// permission, a loop of symbolic links: the second stands in for the first,
// which root, who runs the tests, can always search) is a user error that
// names the location and what to check, not an abort on a filesystem
// exception (exit 134 for `ipu runs`, `sweep list`, `report`, `runs gc`).
TEST(StoreLocation, APathThatCannotBeLookedAtIsAStoreError) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("ipu_store_loop_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(dir / "loop", dir / "loop");
  const std::string location = (dir / "loop" / "runs.db").string();
  try {
    openStore(location, OpenMode::Existing);
    ADD_FAILURE() << "opened " << location;
  } catch (const StoreError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(location), std::string::npos) << what;
    EXPECT_NE(what.find("cannot look for a store"), std::string::npos) << what;
  }
  std::filesystem::remove_all(dir);
}

// Locations SQLite would take but a store cannot be are refused with what to
// give instead, before anything is made: an in-memory database (it keeps
// nothing), an SQLite URI (the next command would read another file), a
// mistyped server URI (read as a path it made directories), a directory.
TEST_P(StoreTest, LocationsThatCannotBeAStoreAreRefused) {
  if (GetParam() != Backend::Sqlite) GTEST_SKIP() << "SQLite locations";
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  const std::string mistyped = "postgresq://user@localhost/db";
  for (const std::string& location : {std::string(":memory:"), std::string("file:uri.db"), mistyped, std::string(""),
                                      dir_.string(), std::string("mysql://localhost/x")}) {
    try {
      openStore(location, OpenMode::Create);
      ADD_FAILURE() << "`" << location << "` was opened as a store";
    } catch (const StoreError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("give --store") != std::string::npos) << what;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "postgresq:"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "uri.db"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / ":memory:"));
  std::filesystem::current_path(cwd);
}

// A database with another application's tables (whatever their names) is
// refused before anything is written: no ipu table added, and an SQLite file
// not switched to WAL (its bytes as they were, no -wal file beside it).
TEST_P(StoreTest, ADatabaseThatIsNotAStoreIsRefused) {
  store_.reset();
  for (const char* table : {"accounts", "runs"}) {
    std::string other, before;
    if (GetParam() == Backend::Sqlite) {
      other = (dir_ / (std::string("other_") + table + ".db")).string();
      {
        auto db = connectSqlite(other, true);
        db->execute(std::string("CREATE TABLE ") + table + " (id INTEGER)");
      }
      before = fileBytes(other);
    } else {
      other = testing::postgresServer().createDatabase();
      connectPostgres(other)->execute(std::string("CREATE TABLE ") + table + " (x INTEGER)");
    }
    try {
      openStore(other, OpenMode::Create);
      ADD_FAILURE() << "a database with a table `" << table << "` was opened as a store";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("not an ipu run store"), std::string::npos) << e.what();
    }
    if (GetParam() == Backend::Sqlite) {
      EXPECT_EQ(fileBytes(other), before) << table;
      EXPECT_FALSE(std::filesystem::exists(other + "-wal")) << table;
    } else {
      EXPECT_TRUE(connectPostgres(other)
                      ->query("SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'ipu_meta'")
                      .empty())
          << table;
    }
  }
}

TEST_P(StoreTest, AMissingStoreIsAnError) {
  if (GetParam() == Backend::Sqlite) {
    EXPECT_THROW(openStore((dir_ / "nothing" / "ipu.db").string(), OpenMode::Existing), StoreError);
    EXPECT_FALSE(fs::exists(dir_ / "nothing"));
  } else {
    try {
      openStore(testing::postgresServer().uri("no_such_database"), OpenMode::Create);
      FAIL() << "connected to a database that does not exist";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("no_such_database"), std::string::npos) << e.what();
    }
  }
}

TEST_P(StoreTest, ManyPointsInOneBatch) {
  long long id = newRun();
  std::vector<MetricPoint> points;
  for (int s = 1; s <= 5000; ++s) points.push_back({"loss", s, 1.0 / s, 1});
  store_->appendMetrics(id, points);
  auto r = store_->run(id);
  EXPECT_EQ(r->metrics.at("loss").count, 5000);
  EXPECT_EQ(r->metrics.at("loss").last, 1.0 / 5000);
  EXPECT_EQ(r->metrics.at("loss").max, 1.0);
  EXPECT_EQ(store_->metricHistory(id, "loss").size(), 5000u);
}

TEST_P(StoreTest, CurvesAreThinnedInTheDatabase) {
  long long id = newRun();
  std::vector<MetricPoint> points;
  for (int s = 1; s <= 1000; ++s) points.push_back({"loss", s, 2.0 * s, static_cast<double>(s)});
  for (int s = 1; s <= 30; ++s) points.push_back({"eval", s, 1.0, 1});
  points.push_back({"loss", 1001, std::nan(""), 1001});  // a non-finite point is left out of its bucket's mean
  store_->appendMetrics(id, points);
  auto curves = store_->metricCurves(id, 100);
  std::vector<MetricPoint> loss, eval;
  for (const auto& p : curves) (p.key == "loss" ? loss : eval).push_back(p);
  ASSERT_EQ(eval.size(), 30u);  // short series come whole
  // 1,001 steps in ranges of 11: 91 ranges; the mean of step s's values is 2 x the mean step.
  ASSERT_EQ(loss.size(), 91u);
  EXPECT_EQ(loss[0].step, 6);  // steps 1..11
  EXPECT_DOUBLE_EQ(loss[0].value, 12.0);
  EXPECT_DOUBLE_EQ(loss[0].time, 11.0);
  EXPECT_EQ(loss[89].step, 985);  // steps 980..990
  EXPECT_DOUBLE_EQ(loss[89].value, 1970.0);
  EXPECT_EQ(loss[90].step, 996);  // steps 991..1001, the last one NaN
  EXPECT_DOUBLE_EQ(loss[90].value, 2.0 * 995.5);
  for (std::size_t i = 1; i < loss.size(); ++i) EXPECT_LT(loss[i - 1].step, loss[i].step);
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreTest, ::testing::Values(Backend::Sqlite));
INSTANTIATE_TEST_SUITE_P(Postgres, StoreTest, ::testing::Values(Backend::Postgres));

// ------------------------------------------------------------------ filters

RunRecord record(long long id, std::map<std::string, std::string> params, std::map<std::string, double> metrics,
                 std::vector<std::string> tags = {}, RunStatus status = RunStatus::Finished) {
  RunRecord r;
  r.id = id;
  r.name = "t-" + std::to_string(id);
  r.status = status;
  r.startedAt = 1000.0 * static_cast<double>(id);
  r.endedAt = r.startedAt + 10.0 * static_cast<double>(id);
  r.parameters = std::move(params);
  for (const auto& [k, v] : metrics) r.metrics[k] = MetricSummary{v, v - 1, v + 1, 10, 10};
  r.tags = std::move(tags);
  return r;
}

class FilterTest : public ::testing::Test {
 protected:
  std::vector<RunRecord> runs{
      record(1, {{"mapping.replicas", "2"}, {"optimizer.kind", "lamb"}}, {{"mlm_accuracy", 0.10}}, {"baseline"}),
      record(2, {{"mapping.replicas", "4"}, {"optimizer.kind", "adam"}}, {{"mlm_accuracy", 0.20}}),
      record(3, {{"mapping.replicas", "8"}, {"optimizer.kind", "lamb"}}, {{"mlm_accuracy", 0.30}}, {}, RunStatus::Failed),
      record(4, {{"mapping.replicas", "4"}}, {}, {"baseline", "fp16"}),
  };
  FieldResolver names{runs};

  std::vector<long long> select(const std::string& text) {
    auto parsed = Filter::parse(text, names);
    if (auto* e = std::get_if<FilterError>(&parsed)) {
      ADD_FAILURE() << text << ": " << e->message;
      return {};
    }
    std::vector<long long> ids;
    for (const auto& r : runs)
      if (std::get<Filter>(parsed).matches(r)) ids.push_back(r.id);
    return ids;
  }
  FilterError error(const std::string& text) {
    auto parsed = Filter::parse(text, names);
    if (auto* e = std::get_if<FilterError>(&parsed)) return *e;
    ADD_FAILURE() << text << " parsed";
    return {};
  }
  using Ids = std::vector<long long>;
};

TEST_F(FilterTest, TheIssuesExample) {
  EXPECT_EQ(select("mapping.replicas IN (2,4) AND (mlm_accuracy > 0.18 OR tag = 'baseline')"), (Ids{1, 2, 4}));
}

TEST_F(FilterTest, AndBindsTighterThanOr) {
  EXPECT_EQ(select("mapping.replicas = 8 OR mapping.replicas = 2 AND mlm_accuracy > 0.5"), (Ids{3}));
  EXPECT_EQ(select("(mapping.replicas = 8 OR mapping.replicas = 2) AND mlm_accuracy > 0.15"), (Ids{3}));
  EXPECT_EQ(select("mapping.replicas = 8 or mapping.replicas = 2 and mlm_accuracy > 0.05"), (Ids{1, 3}));
}

TEST_F(FilterTest, NotAndNotIn) {
  EXPECT_EQ(select("NOT status = failed"), (Ids{1, 2, 4}));
  EXPECT_EQ(select("mapping.replicas NOT IN (2, 8)"), (Ids{2, 4}));
  EXPECT_EQ(select("NOT NOT tag = fp16"), (Ids{4}));
  EXPECT_EQ(select("tag != baseline"), (Ids{2, 3}));
  EXPECT_EQ(select("NOT (tag = baseline OR optimizer.kind = adam)"), (Ids{3}));
}

TEST_F(FilterTest, NumbersCompareAsNumbersTextAsText) {
  EXPECT_EQ(select("mapping.replicas > 2"), (Ids{2, 3, 4}));  // "8" > "2" and "4", numerically
  EXPECT_EQ(select("mapping.replicas >= 4.0"), (Ids{2, 3, 4}));
  EXPECT_EQ(select("optimizer.kind = 'lamb'"), (Ids{1, 3}));
  EXPECT_EQ(select("optimizer.kind = \"adam\""), (Ids{2}));
  EXPECT_EQ(select("optimizer.kind != lamb"), (Ids{2}));  // a run without the parameter matches no comparison
}

TEST_F(FilterTest, MetricsParametersAndBuiltins) {
  EXPECT_EQ(select("mlm_accuracy.max >= 1.2"), (Ids{2, 3}));
  EXPECT_EQ(select("metrics.mlm_accuracy < 0.15"), (Ids{1}));
  EXPECT_EQ(select("params.mapping.replicas = 4"), (Ids{2, 4}));
  EXPECT_EQ(select("id <= 2 AND duration >= 20"), (Ids{2}));
  EXPECT_EQ(select("started >= 3000"), (Ids{3, 4}));
  EXPECT_EQ(select("duration < 1m"), (Ids{1, 2, 3, 4}));
  EXPECT_EQ(select("name = t-3"), (Ids{3}));
  EXPECT_EQ(select("kind = run"), (Ids{1, 2, 3, 4}));
  EXPECT_EQ(select("started > '1970-01-02'"), (Ids{}));
}

TEST_F(FilterTest, AnUnknownNameSaysWhichExist) {
  FilterError e = error("mapping.replica = 2");
  EXPECT_EQ(e.offset, 0u);
  EXPECT_EQ(e.length, std::string("mapping.replica").size());
  EXPECT_NE(e.message.find("mapping.replica"), std::string::npos);
  EXPECT_NE(e.help.find("did you mean `mapping.replicas`"), std::string::npos) << e.help;
  EXPECT_NE(e.help.find("mlm_accuracy"), std::string::npos) << e.help;
}

TEST_F(FilterTest, MalformedFiltersPointAtTheMistake) {
  struct Case {
    std::string text;
    std::size_t offset;
    const char* says;
  } cases[] = {
      {"mapping.replicas IN (2, 4", 25, "expected `,` or `)`"},
      {"mlm_accuracy >", 14, "ends where a value"},
      {"(status = failed", 16, "expected `)`"},
      {"status = failed)", 15, "no `(`"},
      {"status = exploded", 9, "not a status"},
      {"mapping.replicas 4", 17, "expected a comparison"},
      {"tag > x", 4, "either there or not"},
      {"mlm_accuracy > high", 15, "is a number"},
      {"status = 'finished", 9, "not closed"},
      {"AND status = failed", 0, "before AND"},
      {"status = failed AND", 19, "ends where a condition"},
      {"mapping.replicas ! 2", 17, "`!` alone"},
      {"started > 'yesterday'", 10, "not a time"},
      {"   ", 0, "empty"},
      {std::string(100000, '(') + "x", 200, "nests deeper"},
  };
  for (const auto& c : cases) {
    FilterError e = error(c.text);
    EXPECT_EQ(e.offset, c.offset) << c.text << ": " << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.text << ": " << e.message;
  }
}

TEST_F(FilterTest, TheCaretSitsUnderTheMistake) {
  FilterError e = error("mapping.replicas IN (2, 4 AND x");
  EXPECT_EQ(renderFilterError("mapping.replicas IN (2, 4 AND x", e, "  "),
            "  mapping.replicas IN (2, 4 AND x\n"
            "                            ^^^\n");
}

}  // namespace
}  // namespace ipu::store
