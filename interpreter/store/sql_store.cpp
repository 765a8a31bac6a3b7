// The run store over any SqlConnection: the schema, its creation and
// migration, and every read and write, written once for SQLite and
// PostgreSQL. The tables follow MLflow's split (docs/tracking.md):
//
//   ipu_meta          key/value; `schema_version`
//   runs              one row per run or estimate: status, times, host, heartbeat, script, plan hash, note
//   params            (run_id, key) -> value: the resolved values, written once
//   metrics           (run_id, key, step, value, recorded_at): the full history
//   metric_summaries  (run_id, key) -> latest, minimum, maximum, count: what listing reads
//   tags              (run_id, tag)
//   artifacts         (run_id, kind, path): the run directory, checkpoints
//
// Every write is one short transaction (SQLite: BEGIN IMMEDIATE) so that
// writers queue on the busy timeout instead of failing; metric points come in
// batches. Schema creation and migration happen in one transaction, after the
// version was read and found not newer than this build's.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <unordered_map>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"

namespace ipu::store {

namespace {

long long toInt(const std::optional<std::string>& v) { return v ? std::atoll(v->c_str()) : 0; }
double toDouble(const std::optional<std::string>& v) {
  if (!v) return kNoTime;
  return std::strtod(v->c_str(), nullptr);
}
std::string toText(const std::optional<std::string>& v) { return v ? *v : std::string(); }
SqlValue orNull(double v) { return std::isfinite(v) ? SqlValue(v) : SqlValue(nullptr); }

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

// Merges one point into a summary: `latest` is the value at the highest step
// (the later arrival wins a tie); non-finite values are counted, not summarised.
void merge(MetricSummary& s, long long step, double value) {
  ++s.count;
  if (!std::isfinite(value)) return;
  if (std::isnan(s.last) || step >= s.lastStep) {
    s.last = value;
    s.lastStep = step;
  }
  s.min = std::isnan(s.min) ? value : std::min(s.min, value);
  s.max = std::isnan(s.max) ? value : std::max(s.max, value);
}

class SqlStore : public RunStore {
 public:
  SqlStore(std::string location, std::unique_ptr<SqlConnection> conn)
      : location_(std::move(location)), db_(std::move(conn)) {
    openSchema();
  }

  const std::string& location() const override { return location_; }

  long long createRun(const NewRun& r) override {
    std::lock_guard<std::mutex> lock(mutex_);
    long long id = 0;
    write([&] {
      auto rows = db_->query(
          "INSERT INTO runs(kind, training, status, script, plan_hash, host, pid, started_at, heartbeat_at)"
          " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
          {std::string(name(r.kind)), r.training, std::string(name(RunStatus::Running)), r.script, r.planHash,
           r.host, r.pid, r.startedAt, r.startedAt});
      if (rows.empty()) throw StoreError("store `" + location_ + "`: a new run got no id");
      id = toInt(rows[0][0]);
      db_->query("UPDATE runs SET name = ? WHERE id = ?", {r.training + "-" + std::to_string(id), id});
      std::vector<std::vector<SqlValue>> params;
      for (const auto& [k, v] : r.parameters) params.push_back({id, k, v});
      db_->executeMany("INSERT INTO params(run_id, key, value) VALUES (?, ?, ?)", params);
    });
    return id;
  }

  void appendMetrics(long long run, const std::vector<MetricPoint>& points) override {
    if (points.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      std::vector<std::vector<SqlValue>> rows;
      rows.reserve(points.size());
      std::map<std::string, MetricSummary> touched;
      for (const auto& p : points) {
        rows.push_back({run, p.key, p.step, orNull(p.value), p.time});
        touched.emplace(p.key, MetricSummary{});
      }
      db_->executeMany("INSERT INTO metrics(run_id, key, step, value, recorded_at) VALUES (?, ?, ?, ?, ?)", rows);
      // The summaries of the keys in this batch, merged in memory and written back.
      for (const auto& row : db_->query(
               "SELECT key, latest, latest_step, minimum, maximum, count FROM metric_summaries WHERE run_id = ?",
               {run})) {
        auto it = touched.find(toText(row[0]));
        if (it == touched.end()) continue;
        it->second = MetricSummary{toDouble(row[1]), toDouble(row[3]), toDouble(row[4]), toInt(row[2]), toInt(row[5])};
      }
      for (const auto& p : points) merge(touched[p.key], p.step, p.value);
      writeSummaries(run, touched);
      db_->query("UPDATE runs SET heartbeat_at = ? WHERE id = ?", {nowSeconds(), run});
    });
  }

  void heartbeat(long long run, double now) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] { db_->query("UPDATE runs SET heartbeat_at = ? WHERE id = ? AND status = ?", {now, run, std::string("running")}); });
  }

  void finishRun(long long run, RunStatus status, const std::string& reason, double endedAt) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      db_->query("UPDATE runs SET status = ?, stop_reason = ?, ended_at = ?, heartbeat_at = ? WHERE id = ?",
                 {std::string(name(status)), reason, endedAt, endedAt, run});
    });
  }

  void reopenRun(long long run, long long fromStep) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      db_->query("DELETE FROM metrics WHERE run_id = ? AND step >= ?", {run, fromStep});
      std::map<std::string, MetricSummary> all;
      for (const auto& row : db_->query("SELECT key, step, value FROM metrics WHERE run_id = ? ORDER BY key, step", {run}))
        merge(all[toText(row[0])], toInt(row[1]), toDouble(row[2]));
      db_->query("DELETE FROM metric_summaries WHERE run_id = ?", {run});
      writeSummaries(run, all);
      db_->query("UPDATE runs SET status = ?, stop_reason = '', ended_at = NULL, heartbeat_at = ? WHERE id = ?",
                 {std::string(name(RunStatus::Running)), nowSeconds(), run});
    });
  }

  void addArtifact(long long run, const Artifact& a) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      db_->query("INSERT INTO artifacts(run_id, kind, path) VALUES (?, ?, ?) ON CONFLICT (run_id, path) DO NOTHING",
                 {run, a.kind, a.path});
    });
  }

  std::optional<long long> findByRunDirectory(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto rows = db_->query("SELECT run_id FROM artifacts WHERE kind = ? AND path = ? ORDER BY run_id DESC",
                           {std::string("run_directory"), path});
    if (rows.empty()) return std::nullopt;
    return toInt(rows[0][0]);
  }

  std::vector<RunRecord> listRuns() override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<RunRecord> out;
    read([&] {
      std::unordered_map<long long, std::size_t> index;
      for (const auto& row : db_->query(
               "SELECT id, name, kind, training, status, stop_reason, started_at, ended_at, heartbeat_at, host, pid,"
               " plan_hash, note FROM runs ORDER BY started_at DESC, id DESC")) {
        RunRecord r = fromRow(row);
        index.emplace(r.id, out.size());
        out.push_back(std::move(r));
      }
      for (const auto& row : db_->query("SELECT run_id, key, value FROM params")) {
        auto it = index.find(toInt(row[0]));
        if (it != index.end()) out[it->second].parameters.emplace(toText(row[1]), toText(row[2]));
      }
      for (const auto& row :
           db_->query("SELECT run_id, key, latest, latest_step, minimum, maximum, count FROM metric_summaries")) {
        auto it = index.find(toInt(row[0]));
        if (it != index.end())
          out[it->second].metrics[toText(row[1])] =
              MetricSummary{toDouble(row[2]), toDouble(row[4]), toDouble(row[5]), toInt(row[3]), toInt(row[6])};
      }
      for (const auto& row : db_->query("SELECT run_id, tag FROM tags ORDER BY tag")) {
        auto it = index.find(toInt(row[0]));
        if (it != index.end()) out[it->second].tags.push_back(toText(row[1]));
      }
    });
    return out;
  }

  std::optional<RunRecord> run(long long id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<RunRecord> out;
    read([&] {
      auto rows = db_->query(
          "SELECT id, name, kind, training, status, stop_reason, started_at, ended_at, heartbeat_at, host, pid,"
          " plan_hash, note, script FROM runs WHERE id = ?",
          {id});
      if (rows.empty()) return;
      out = fromRow(rows[0]);
      out->script = toText(rows[0][13]);
      for (const auto& row : db_->query("SELECT key, value FROM params WHERE run_id = ?", {id}))
        out->parameters.emplace(toText(row[0]), toText(row[1]));
      for (const auto& row : db_->query(
               "SELECT key, latest, latest_step, minimum, maximum, count FROM metric_summaries WHERE run_id = ?", {id}))
        out->metrics[toText(row[0])] =
            MetricSummary{toDouble(row[1]), toDouble(row[3]), toDouble(row[4]), toInt(row[2]), toInt(row[5])};
      for (const auto& row : db_->query("SELECT tag FROM tags WHERE run_id = ? ORDER BY tag", {id}))
        out->tags.push_back(toText(row[0]));
      for (const auto& row : db_->query("SELECT kind, path FROM artifacts WHERE run_id = ? ORDER BY kind DESC, path", {id}))
        out->artifacts.push_back({toText(row[0]), toText(row[1])});
    });
    return out;
  }

  std::vector<MetricPoint> metricHistory(long long run, const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<MetricPoint> out;
    auto rows = key.empty()
                    ? db_->query("SELECT key, step, value, recorded_at FROM metrics WHERE run_id = ? ORDER BY key, step",
                                 {run})
                    : db_->query("SELECT key, step, value, recorded_at FROM metrics WHERE run_id = ? AND key = ?"
                                 " ORDER BY step",
                                 {run, key});
    out.reserve(rows.size());
    for (const auto& row : rows) out.push_back({toText(row[0]), toInt(row[1]), toDouble(row[2]), toDouble(row[3])});
    return out;
  }

  std::vector<MetricPoint> metricCurves(long long run, std::size_t maxPoints) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<MetricPoint> out;
    const long long most = static_cast<long long>(std::max<std::size_t>(maxPoints, 1));
    read([&] {
      auto keys = db_->query("SELECT key, MIN(step), MAX(step), COUNT(*) FROM metrics WHERE run_id = ? GROUP BY key"
                             " ORDER BY key",
                             {run});
      for (const auto& k : keys) {
        const std::string key = toText(k[0]);
        const long long first = toInt(k[1]), last = toInt(k[2]), count = toInt(k[3]);
        const long long width = (last - first + most) / most;  // ceil((last - first + 1) / most)
        auto rows = count <= most || width <= 1
                        ? db_->query("SELECT step, value, recorded_at FROM metrics WHERE run_id = ? AND key = ?"
                                     " ORDER BY step",
                                     {run, key})
                        : db_->query("SELECT AVG(step), AVG(value), MAX(recorded_at) FROM metrics"
                                     " WHERE run_id = ? AND key = ? GROUP BY (step - ?) / ? ORDER BY 1",
                                     {run, key, first, width});
        for (const auto& row : rows) {
          double step = toDouble(row[0]);
          out.push_back({key, static_cast<long long>(std::llround(step)), toDouble(row[1]), toDouble(row[2])});
        }
      }
    });
    return out;
  }

  void addTags(long long run, const std::vector<std::string>& tags) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      for (const auto& t : tags)
        db_->query("INSERT INTO tags(run_id, tag) VALUES (?, ?) ON CONFLICT (run_id, tag) DO NOTHING", {run, t});
    });
  }

  void removeTags(long long run, const std::vector<std::string>& tags) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      for (const auto& t : tags) db_->query("DELETE FROM tags WHERE run_id = ? AND tag = ?", {run, t});
    });
  }

  void setNote(long long run, const std::string& note) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] { db_->query("UPDATE runs SET note = ? WHERE id = ?", {note, run}); });
  }

  bool deleteRun(long long run) override {
    std::lock_guard<std::mutex> lock(mutex_);
    bool existed = false;
    write([&] {
      existed = !db_->query("SELECT id FROM runs WHERE id = ?", {run}).empty();
      for (const char* table : {"metrics", "metric_summaries", "params", "tags", "artifacts"})
        db_->query(std::string("DELETE FROM ") + table + " WHERE run_id = ?", {run});
      db_->query("DELETE FROM runs WHERE id = ?", {run});
    });
    return existed;
  }

  std::vector<long long> markStale(double now, double graceSeconds) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<long long> ids;
    write([&] {
      const double before = now - graceSeconds;
      for (const auto& row :
           db_->query("SELECT id FROM runs WHERE status = ? AND heartbeat_at < ? ORDER BY id",
                      {std::string("running"), before}))
        ids.push_back(toInt(row[0]));
      for (long long id : ids)
        db_->query("UPDATE runs SET status = ?, ended_at = heartbeat_at,"
                   " stop_reason = 'no heartbeat: the process ended without saying how' WHERE id = ?",
                   {std::string(name(RunStatus::Killed)), id});
    });
    return ids;
  }

 private:
  template <typename F>
  void write(F&& body) {
    db_->beginWrite();
    try {
      body();
      db_->commit();
    } catch (...) {
      db_->rollback();
      throw;
    }
  }
  template <typename F>
  void read(F&& body) {
    db_->beginRead();
    try {
      body();
      db_->commit();
    } catch (...) {
      db_->rollback();
      throw;
    }
  }

  void writeSummaries(long long run, const std::map<std::string, MetricSummary>& summaries) {
    std::vector<std::vector<SqlValue>> rows;
    for (const auto& [key, s] : summaries)
      rows.push_back({run, key, orNull(s.last), s.lastStep, orNull(s.min), orNull(s.max), s.count});
    for (const auto& row : rows)
      db_->query("INSERT INTO metric_summaries(run_id, key, latest, latest_step, minimum, maximum, count)"
                 " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, key) DO UPDATE SET latest = excluded.latest,"
                 " latest_step = excluded.latest_step, minimum = excluded.minimum, maximum = excluded.maximum,"
                 " count = excluded.count",
                 row);
  }

  static RunRecord fromRow(const SqlRow& row) {
    RunRecord r;
    r.id = toInt(row[0]);
    r.name = toText(row[1]);
    r.kind = parseRunKind(toText(row[2])).value_or(RunKind::Run);
    r.training = toText(row[3]);
    r.status = parseRunStatus(toText(row[4])).value_or(RunStatus::Failed);
    r.stopReason = toText(row[5]);
    r.startedAt = toDouble(row[6]);
    r.endedAt = toDouble(row[7]);
    r.heartbeatAt = toDouble(row[8]);
    r.host = toText(row[9]);
    r.pid = toInt(row[10]);
    r.planHash = toText(row[11]);
    r.note = toText(row[12]);
    return r;
  }

  bool hasTable(const std::string& table) {
    auto rows = db_->dialect() == SqlDialect::Sqlite
                    ? db_->query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", {table})
                    : db_->query("SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?",
                                 {table});
    return !rows.empty();
  }

  int schemaVersion() {
    if (!hasTable("ipu_meta")) return 0;
    auto rows = db_->query("SELECT value FROM ipu_meta WHERE key = 'schema_version'");
    return rows.empty() ? 0 : static_cast<int>(toInt(rows[0][0]));
  }

  void refuseNewer(int version) {
    throw StoreError("the store `" + location_ + "` has schema version " + std::to_string(version) +
                     ", written by a newer ipu; this ipu reads versions up to " + std::to_string(kSchemaVersion) +
                     ". It was left untouched: use a newer ipu, or another store (--store or IPU_STORE)");
  }

  void openSchema() {
    // Read first, write nothing: a newer store must come out as it went in.
    int version = schemaVersion();
    if (version > kSchemaVersion) refuseNewer(version);
    if (db_->dialect() == SqlDialect::Sqlite) {
      db_->query("PRAGMA journal_mode = WAL");
      db_->execute("PRAGMA synchronous = NORMAL");
    }
    if (version == kSchemaVersion) return;
    write([&] {
      // Several processes may open a new store at once: one creates, the
      // others find it created once they get the lock.
      if (db_->dialect() == SqlDialect::Postgres) db_->query("SELECT pg_advisory_xact_lock(7305931412)");
      int now = schemaVersion();
      if (now > kSchemaVersion) refuseNewer(now);
      if (now == kSchemaVersion) return;
      if (now == 0) {
        bool otherTables = db_->dialect() == SqlDialect::Sqlite
                               ? !db_->query("SELECT 1 FROM sqlite_master WHERE type = 'table'").empty()
                               : hasTable("runs");
        if (otherTables)
          throw StoreError("`" + location_ + "` is a database but not an ipu run store (it has other tables); "
                           "give --store a new file or an empty database");
        db_->execute("CREATE TABLE IF NOT EXISTS ipu_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
        db_->execute(schemaV1(db_->dialect()));
        db_->query("INSERT INTO ipu_meta(key, value) VALUES ('schema_version', ?)",
                   {std::to_string(kSchemaVersion)});
      }
      // Migrations from version N to N+1 go here, each in this transaction.
    });
  }

  std::string location_;
  std::unique_ptr<SqlConnection> db_;
  std::mutex mutex_;
};

}  // namespace

bool isPostgresLocation(const std::string& location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

std::unique_ptr<RunStore> openStore(const std::string& location, OpenMode mode) {
  if (isPostgresLocation(location)) return std::make_unique<SqlStore>(location, connectPostgres(location));
  if (mode == OpenMode::Create) {
    std::filesystem::path parent = std::filesystem::path(location).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) throw StoreError("cannot create `" + parent.string() + "` for the store: " + ec.message());
  }
  return std::make_unique<SqlStore>(location, connectSqlite(location, mode == OpenMode::Create));
}

}  // namespace ipu::store
