// The run store's schema (docs/tracking.md, "The schema"): version 1 (runs,
// their parameters, metrics, tags and artifacts) and version 2 (sweeps and
// their trials), created and migrated in one transaction. A new store is
// made by the same steps as an old one is migrated (create version 1, then
// migrate), so every migration runs on every new store too.
#include "interpreter/store/sql_schema.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "interpreter/store/run_store.h"

namespace ipu::store {

namespace {

// Creates version 1 of the tables. Types read the same in both databases
// (SQLite maps DOUBLE PRECISION to REAL and BIGINT to INTEGER).
std::string schemaV1(SqlDialect d) {
  const std::string id = d == SqlDialect::Sqlite ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGSERIAL PRIMARY KEY";
  return "CREATE TABLE runs ("
         " id " + id + ","
         " name TEXT NOT NULL DEFAULT '',"
         " kind TEXT NOT NULL,"
         " training TEXT NOT NULL,"
         " status TEXT NOT NULL,"
         " stop_reason TEXT NOT NULL DEFAULT '',"
         " script TEXT NOT NULL,"
         " plan_hash TEXT NOT NULL,"
         " host TEXT NOT NULL,"
         " pid BIGINT NOT NULL,"
         " started_at DOUBLE PRECISION NOT NULL,"
         " ended_at DOUBLE PRECISION,"
         " heartbeat_at DOUBLE PRECISION NOT NULL,"
         " note TEXT NOT NULL DEFAULT '');"
         "CREATE INDEX runs_status ON runs(status);"
         "CREATE TABLE params ("
         " run_id BIGINT NOT NULL REFERENCES runs(id),"
         " key TEXT NOT NULL,"
         " value TEXT NOT NULL,"
         " PRIMARY KEY (run_id, key));"
         "CREATE TABLE metrics ("
         " run_id BIGINT NOT NULL REFERENCES runs(id),"
         " key TEXT NOT NULL,"
         " step BIGINT NOT NULL,"
         " value DOUBLE PRECISION,"
         " recorded_at DOUBLE PRECISION NOT NULL);"
         "CREATE INDEX metrics_run_key_step ON metrics(run_id, key, step);"
         "CREATE TABLE metric_summaries ("
         " run_id BIGINT NOT NULL REFERENCES runs(id),"
         " key TEXT NOT NULL,"
         " latest DOUBLE PRECISION,"
         " latest_step BIGINT NOT NULL,"
         " minimum DOUBLE PRECISION,"
         " maximum DOUBLE PRECISION,"
         " count BIGINT NOT NULL,"
         " PRIMARY KEY (run_id, key));"
         "CREATE TABLE tags ("
         " run_id BIGINT NOT NULL REFERENCES runs(id),"
         " tag TEXT NOT NULL,"
         " PRIMARY KEY (run_id, tag));"
         "CREATE TABLE artifacts ("
         " run_id BIGINT NOT NULL REFERENCES runs(id),"
         " kind TEXT NOT NULL,"
         " path TEXT NOT NULL,"
         " PRIMARY KEY (run_id, path));"
         "CREATE INDEX artifacts_path ON artifacts(path);";
}

// Version 2: sweeps and their trials (interpreter/store/sweep_store.h). A
// trial's identity in its sweep is its assignment: (sweep_id,
// assignment_key) is unique, so a grid cell has one row whatever happens to
// its agents. `run_id` is the trial's recorded run, cleared if that run is
// deleted. Specs and assignments are JSON (store/sweep_records.h); a seed is
// its 64 bits as a signed BIGINT.
std::string schemaV2(SqlDialect d) {
  const std::string id = d == SqlDialect::Sqlite ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGSERIAL PRIMARY KEY";
  return "CREATE TABLE sweeps ("
         " id " + id + ","
         " name TEXT NOT NULL UNIQUE,"
         " spec TEXT NOT NULL,"
         " script TEXT NOT NULL,"
         " method TEXT NOT NULL,"
         " state TEXT NOT NULL,"
         " seed BIGINT NOT NULL,"
         " created_at DOUBLE PRECISION NOT NULL);"
         "CREATE TABLE trials ("
         " sweep_id BIGINT NOT NULL REFERENCES sweeps(id),"
         " trial_index BIGINT NOT NULL,"
         " assignment_key TEXT NOT NULL,"
         " assignment TEXT NOT NULL,"
         " state TEXT NOT NULL,"
         " agent TEXT NOT NULL DEFAULT '',"
         " attempts BIGINT NOT NULL DEFAULT 0,"
         " created_at DOUBLE PRECISION NOT NULL,"
         " started_at DOUBLE PRECISION,"
         " heartbeat_at DOUBLE PRECISION,"
         " ended_at DOUBLE PRECISION,"
         " run_id BIGINT REFERENCES runs(id),"
         " metric DOUBLE PRECISION,"
         " reason TEXT NOT NULL DEFAULT '',"
         " PRIMARY KEY (sweep_id, trial_index),"
         " UNIQUE (sweep_id, assignment_key));"
         "CREATE INDEX trials_state ON trials(sweep_id, state);"
         "CREATE INDEX trials_run ON trials(run_id);";
}

// Version 3: run parameters take the names of the table of mapping fields
// (runtime/ir/mapping_fields.h), the names of the language and the plan:
// `mapping.optimizer_state_streaming = true` became `mapping.optimizer_state =
// streaming` (and `weights_streaming` likewise), at the top level and under
// `phases.NAME.`. Runs recorded before keep their values under the new names,
// so one filter finds old and new runs alike.
std::string renamedParametersV3() {
  std::string sql;
  for (const char* field : {"optimizer_state", "weights"}) {
    const std::string old = std::string("mapping.") + field + "_streaming";
    const std::string dotted = "." + old;
    const std::string n = std::to_string(dotted.size());
    sql += "UPDATE params SET key = substr(key, 1, length(key) - 10),"
           " value = CASE value WHEN 'true' THEN 'streaming' ELSE 'on_chip' END"
           " WHERE key = '" + old + "' OR (length(key) > " + n + " AND substr(key, length(key) - " + n +
           " + 1) = '" + dotted + "');";
  }
  return sql;
}

// Version 4: every checkpoint a run writes, with what it is and where
// (docs/tracking.md, "Artifacts"): its phase and global step, size,
// SHA-256, the host that wrote it, the run directory its path is relative
// to, and its bytes when they are kept in the store (`content`: a row of
// `artifact_contents` on SQLite, a large object's id on PostgreSQL).
// Artifacts recorded before keep their absolute paths; their host is their
// run's.
std::string schemaV4(SqlDialect d) {
  std::string sql;
  for (const char* column : {"phase TEXT", "step BIGINT", "size BIGINT", "sha256 TEXT", "host TEXT",
                             "run_directory TEXT", "content BIGINT", "created_at DOUBLE PRECISION"})
    sql += std::string("ALTER TABLE artifacts ADD COLUMN ") + column + ";";
  sql += "UPDATE artifacts SET host = (SELECT host FROM runs WHERE runs.id = artifacts.run_id);";
  if (d == SqlDialect::Sqlite) sql += "CREATE TABLE artifact_contents (id INTEGER PRIMARY KEY AUTOINCREMENT, data BLOB NOT NULL);";
  return sql;
}

bool hasTable(SqlConnection& db, const std::string& table) {
  auto rows = db.dialect() == SqlDialect::Sqlite
                  ? db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", {table})
                  : db.query("SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?", {table});
  return !rows.empty();
}

// The schema version the store records: 0 when it records none (a new
// database, or one that is not a store), -1 when the value is not a version
// this ipu can read (not a whole number, or one too large to be one of its
// own: a newer ipu's, or damage), `text` the value as stored.
int schemaVersion(SqlConnection& db, std::string& text) {
  text.clear();
  if (!hasTable(db, "ipu_meta")) return 0;
  auto rows = db.query("SELECT value FROM ipu_meta WHERE key = 'schema_version'");
  if (rows.empty() || !rows[0][0]) return 0;
  text = *rows[0][0];
  const bool digits = !text.empty() && text.size() <= 9 && text.find_first_not_of("0123456789") == std::string::npos;
  return digits ? std::stoi(text) : -1;
}

// Whether the database holds any table (a store's, or another application's).
bool hasAnyTable(SqlConnection& db) {
  return db.dialect() == SqlDialect::Sqlite
             ? !db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1").empty()
             : !db.query("SELECT 1 FROM pg_tables WHERE schemaname = current_schema() LIMIT 1").empty();
}

[[noreturn]] void refuseNewer(const std::string& location, const std::string& version) {
  throw StoreError("the store `" + location + "` has schema version " + version +
                   ", written by a newer ipu (or damaged); this ipu reads versions up to " + std::to_string(kSchemaVersion) +
                   ". It was left untouched: use a newer ipu, or another store (--store or IPU_STORE)");
}

[[noreturn]] void refuseForeign(const std::string& location) {
  throw StoreError("`" + location + "` is a database but not an ipu run store (it has other tables); it was left "
                   "untouched: give --store a new file or an empty database");
}

}  // namespace

namespace {

void openSchemaOnce(SqlConnection& db, const std::string& location) {
  // Read first, write nothing: a newer store, or a database that is not a
  // store, must come out as it went in (not even switched to WAL).
  std::string text;
  int version = schemaVersion(db, text);
  if (version < 0 || version > kSchemaVersion) refuseNewer(location, text);
  // Tables without a version: another application's, or a store another
  // process created (tables and version in one transaction) since the
  // version was read; read it again to tell them apart.
  if (version == 0 && hasAnyTable(db)) {
    version = schemaVersion(db, text);
    if (version < 0 || version > kSchemaVersion) refuseNewer(location, text);
    if (version == 0) refuseForeign(location);
  }
  if (db.dialect() == SqlDialect::Sqlite) {
    db.query("PRAGMA journal_mode = WAL");
    db.execute("PRAGMA synchronous = NORMAL");
  }
  if (version == kSchemaVersion) return;
  inWriteTransaction(db, [&] {
    // Several processes may open (or migrate) a store at once: one does it,
    // the others find it done once they get the lock.
    if (db.dialect() == SqlDialect::Postgres) db.query("SELECT pg_advisory_xact_lock(7305931412)");
    int now = schemaVersion(db, text);
    if (now < 0 || now > kSchemaVersion) refuseNewer(location, text);
    if (now == kSchemaVersion) return;
    if (now == 0) {
      if (hasAnyTable(db)) refuseForeign(location);
      db.execute("CREATE TABLE IF NOT EXISTS ipu_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
      db.execute(schemaV1(db.dialect()));
      db.query("INSERT INTO ipu_meta(key, value) VALUES ('schema_version', '1')");
      now = 1;
    }
    // Migrations from version N to N+1, each in this transaction; records of
    // the older version are kept as they are.
    if (now == 1) {
      db.execute(schemaV2(db.dialect()));
      now = 2;
    }
    if (now == 2) {
      db.execute(renamedParametersV3());
      now = 3;
    }
    if (now == 3) {
      db.execute(schemaV4(db.dialect()));
      now = 4;
    }
    db.query("UPDATE ipu_meta SET value = ? WHERE key = 'schema_version'", {std::to_string(now)});
  });
}

}  // namespace

void openSchema(SqlConnection& db, const std::string& location) {
  // Processes setting up one new SQLite store at once: switching it to WAL
  // needs the file to itself, and SQLite answers "database is locked" at
  // once (without its busy handler, to avoid a deadlock) to a reader that
  // would write while another writes. Each step is safe to take again (it
  // reads what is there first), so it is, with a growing pause, for as long
  // as the busy timeout would have waited.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    try {
      openSchemaOnce(db, location);
      return;
    } catch (const StoreBusy&) {
      if (Clock::now() + pause > deadline) throw;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
  }
}

}  // namespace ipu::store
