// The run store over any SqlConnection: every read and write of runs,
// written once for SQLite and PostgreSQL. The tables (sql_schema.cpp) follow
// MLflow's split (docs/tracking.md):
//
//   ipu_meta          key/value; `schema_version`
//   runs              one row per run or estimate: status, times, host, heartbeat, script, plan hash, note
//   params            (run_id, key) -> value: the resolved values, written once
//   metrics           (run_id, key, step, value, recorded_at): the full history
//   metric_summaries  (run_id, key) -> latest, minimum, maximum, count: what listing reads
//   tags              (run_id, tag)
//   artifacts         (run_id, kind, path, phase, step, size, sha256, host, run_directory, content, created_at):
//                     the run directory, every checkpoint; `content` its bytes when kept in the store
//   artifact_contents (id, data): those bytes on SQLite (PostgreSQL keeps them as large objects)
//
// Every write is one short transaction (SQLite: BEGIN IMMEDIATE) so that
// writers queue on the busy timeout instead of failing; metric points come in
// batches. The sweep tables (sweeps, trials) are sweep_sql_store.cpp's.
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <unordered_map>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"
#include "interpreter/store/sql_schema.h"
#include "runtime/ir/sha256.h"

namespace ipu::store {

namespace {

SqlValue orNull(double v) { return std::isfinite(v) ? SqlValue(v) : SqlValue(nullptr); }

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
  SqlStore(const std::string& location, std::unique_ptr<SqlConnection> conn)
      : location_(printableLocation(location)), db_(std::move(conn)) {
    openSchema(*db_, location_);
  }

  const std::string& location() const override { return location_; }

  long long createRun(const NewRun& r) override {
    std::lock_guard<std::mutex> lock(mutex_);
    long long id = 0;
    write([&] { id = insertRun(r); });
    return id;
  }

  std::optional<long long> createRunForDirectory(const NewRun& r, const std::string& directory,
                                                 const RunContents& contents) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<long long> id;
    write([&] {
      // SQLite's write transaction holds the database's write lock from its
      // start (BEGIN IMMEDIATE); PostgreSQL's imports wait on one lock.
      if (db_->dialect() == SqlDialect::Postgres) db_->query("SELECT pg_advisory_xact_lock(7305931413)");
      if (!db_->query("SELECT 1 FROM artifacts WHERE kind = ? AND path = ?", {std::string("run_directory"), directory}).empty())
        return;
      id = insertRun(r);
      db_->query("INSERT INTO artifacts(run_id, kind, path) VALUES (?, ?, ?)", {*id, std::string("run_directory"), directory});
      recordContents(*id, contents);
    });
    return id;
  }

 private:
  // The run's row, name and parameters; inside the caller's write transaction.
  long long insertRun(const NewRun& r) {
    long long id = 0;
    {
      auto rows = db_->query(
          "INSERT INTO runs(kind, training, status, script, plan_hash, host, pid, started_at, heartbeat_at)"
          " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
          {std::string(name(r.kind)), r.training, std::string(name(RunStatus::Running)), r.script, r.planHash,
           r.host, r.pid, r.startedAt, r.startedAt});
      if (rows.empty()) throw StoreError("store `" + location_ + "`: a new run got no id");
      id = cellInt(rows[0][0]);
      db_->query("UPDATE runs SET name = ? WHERE id = ?", {r.name.empty() ? r.training + "-" + std::to_string(id) : r.name, id});
      std::vector<std::vector<SqlValue>> params;
      for (const auto& [k, v] : r.parameters) params.push_back({id, k, v});
      db_->executeMany("INSERT INTO params(run_id, key, value) VALUES (?, ?, ?)", params);
    }
    return id;
  }

 public:

  void appendMetrics(long long run, const std::vector<MetricPoint>& points) override {
    if (points.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      // Points of a deleted run would be rows of no run.
      if (db_->query("SELECT 1 FROM runs WHERE id = ?", {run}).empty())
        throw RunGone("store `" + location_ + "`: run " + std::to_string(run) + " is no longer in the store (it was deleted)");
      std::map<std::string, MetricSummary> touched;
      for (const auto& p : points) touched.emplace(p.key, MetricSummary{});
      insertPoints(run, points);
      // The summaries of the keys in this batch, merged in memory and written back.
      for (const auto& row : db_->query(
               "SELECT key, latest, latest_step, minimum, maximum, count FROM metric_summaries WHERE run_id = ?",
               {run})) {
        auto it = touched.find(cellText(row[0]));
        if (it == touched.end()) continue;
        it->second = MetricSummary{cellDouble(row[1]), cellDouble(row[3]), cellDouble(row[4]), cellInt(row[2]), cellInt(row[5])};
      }
      for (const auto& p : points) merge(touched[p.key], p.step, p.value);
      writeSummaries(run, touched);
      db_->query("UPDATE runs SET heartbeat_at = ? WHERE id = ?", {nowSeconds(), run});
    });
  }

  void replaceMetrics(long long run, const std::vector<MetricPoint>& points) override {
    if (points.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      if (db_->query("SELECT 1 FROM runs WHERE id = ?", {run}).empty())
        throw RunGone("store `" + location_ + "`: run " + std::to_string(run) + " is no longer in the store (it was deleted)");
      // Per key, the steps the batch covers: what a lost commit may have recorded already.
      std::map<std::string, std::pair<long long, long long>> range;
      for (const auto& p : points) {
        auto [it, fresh] = range.emplace(p.key, std::make_pair(p.step, p.step));
        if (!fresh) it->second = {std::min(it->second.first, p.step), std::max(it->second.second, p.step)};
      }
      for (const auto& [key, steps] : range)
        db_->query("DELETE FROM metrics WHERE run_id = ? AND key = ? AND step >= ? AND step <= ?",
                   {run, key, steps.first, steps.second});
      insertPoints(run, points);
      std::map<std::string, MetricSummary> summaries;
      for (const auto& [key, steps] : range) {
        MetricSummary& s = summaries[key];
        for (const auto& row : db_->query("SELECT step, value FROM metrics WHERE run_id = ? AND key = ? ORDER BY step", {run, key}))
          merge(s, cellInt(row[0]), cellDouble(row[1]));
      }
      writeSummaries(run, summaries);
      db_->query("UPDATE runs SET heartbeat_at = ? WHERE id = ?", {nowSeconds(), run});
      db_->query("UPDATE runs SET status = ?, stop_reason = '', ended_at = NULL WHERE id = ? AND status = ?",
                 {std::string(name(RunStatus::Running)), run, std::string(name(RunStatus::Killed))});
    });
  }

  void completeRun(long long run, const RunContents& contents) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      if (db_->query("SELECT 1 FROM runs WHERE id = ?", {run}).empty())
        throw RunGone("store `" + location_ + "`: run " + std::to_string(run) + " is no longer in the store (it was deleted)");
      db_->query("DELETE FROM metrics WHERE run_id = ?", {run});
      db_->query("DELETE FROM metric_summaries WHERE run_id = ?", {run});
      recordContents(run, contents);
    });
  }

  void checkWritable() override {
    std::lock_guard<std::mutex> lock(mutex_);
    db_->beginWrite();
    try {
      // Statements that write no row but need the right (and the lock) to
      // write each table a run writes: SQLite refuses them on a read-only
      // file, PostgreSQL to a user without INSERT or UPDATE.
      for (const char* table : {"runs", "params", "metrics", "metric_summaries", "tags", "artifacts"})
        db_->query(std::string("INSERT INTO ") + table + " SELECT * FROM " + table + " WHERE 1 = 0");
      db_->query("UPDATE runs SET heartbeat_at = heartbeat_at WHERE 1 = 0");
    } catch (...) {
      db_->rollback();
      throw;
    }
    db_->rollback();
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

  void reopenRun(long long run, long long fromStep, const std::string& host, long long pid) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      db_->query("DELETE FROM metrics WHERE run_id = ? AND step >= ?", {run, fromStep});
      std::map<std::string, MetricSummary> all;
      for (const auto& row : db_->query("SELECT key, step, value FROM metrics WHERE run_id = ? ORDER BY key, step", {run}))
        merge(all[cellText(row[0])], cellInt(row[1]), cellDouble(row[2]));
      db_->query("DELETE FROM metric_summaries WHERE run_id = ?", {run});
      writeSummaries(run, all);
      db_->query("UPDATE runs SET status = ?, stop_reason = '', ended_at = NULL, heartbeat_at = ?, host = ?, pid = ?"
                 " WHERE id = ?",
                 {std::string(name(RunStatus::Running)), nowSeconds(), host, pid, run});
    });
  }

  void addArtifact(long long run, const Artifact& a, const std::string& contentFile) override {
    std::lock_guard<std::mutex> lock(mutex_);
    write([&] {
      if (db_->query("SELECT 1 FROM runs WHERE id = ?", {run}).empty())
        throw RunGone("store `" + location_ + "`: run " + std::to_string(run) + " is no longer in the store (it was deleted)");
      std::optional<long long> content;
      if (!contentFile.empty()) content = keepContent(contentFile, a.sha256);
      Artifact kept = a;
      kept.stored = content.has_value();
      upsertArtifact(run, kept, content);
    });
  }

  void readArtifact(long long run, const std::string& path,
                    const std::function<void(const char*, std::size_t)>& sink) override {
    std::lock_guard<std::mutex> lock(mutex_);
    read([&] {
      auto rows = db_->query("SELECT content, sha256 FROM artifacts WHERE run_id = ? AND path = ?", {run, path});
      if (rows.empty() || !rows[0][0])
        throw StoreError("store `" + location_ + "`: run " + std::to_string(run) + " has no bytes of `" + path +
                         "` in the store (it was recorded with --artifacts files)");
      ir::Sha256 hash;
      db_->readContent(cellInt(rows[0][0]), [&](const char* bytes, std::size_t n) {
        hash.add(std::string_view(bytes, n));
        sink(bytes, n);
      });
      const std::string got = hash.hex(), recorded = cellText(rows[0][1]);
      if (got != recorded)
        throw ArtifactDamaged("store `" + location_ + "`: the bytes of `" + path + "` of run " + std::to_string(run) +
                              " are damaged: their SHA-256 is " + got + ", recorded as " + recorded);
    });
  }

  std::size_t removeArtifacts(long long run, const std::vector<std::string>& paths) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t removed = 0;
    write([&] {
      removed = 0;
      for (const auto& path : paths) {
        auto rows = db_->query("SELECT content FROM artifacts WHERE run_id = ? AND path = ?", {run, path});
        if (rows.empty()) continue;
        if (rows[0][0]) db_->deleteContent(cellInt(rows[0][0]));
        db_->query("DELETE FROM artifacts WHERE run_id = ? AND path = ?", {run, path});
        ++removed;
      }
    });
    return removed;
  }

  std::optional<long long> findByRunDirectory(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto rows = db_->query("SELECT run_id FROM artifacts WHERE kind = ? AND path = ? ORDER BY run_id DESC",
                           {std::string("run_directory"), path});
    if (rows.empty()) return std::nullopt;
    return cellInt(rows[0][0]);
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
        auto it = index.find(cellInt(row[0]));
        if (it != index.end()) out[it->second].parameters.emplace(cellText(row[1]), cellText(row[2]));
      }
      for (const auto& row :
           db_->query("SELECT run_id, key, latest, latest_step, minimum, maximum, count FROM metric_summaries")) {
        auto it = index.find(cellInt(row[0]));
        if (it != index.end())
          out[it->second].metrics[cellText(row[1])] =
              MetricSummary{cellDouble(row[2]), cellDouble(row[4]), cellDouble(row[5]), cellInt(row[3]), cellInt(row[6])};
      }
      for (const auto& row : db_->query("SELECT run_id, tag FROM tags ORDER BY tag")) {
        auto it = index.find(cellInt(row[0]));
        if (it != index.end()) out[it->second].tags.push_back(cellText(row[1]));
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
      out->script = cellText(rows[0][13]);
      for (const auto& row : db_->query("SELECT key, value FROM params WHERE run_id = ?", {id}))
        out->parameters.emplace(cellText(row[0]), cellText(row[1]));
      for (const auto& row : db_->query(
               "SELECT key, latest, latest_step, minimum, maximum, count FROM metric_summaries WHERE run_id = ?", {id}))
        out->metrics[cellText(row[0])] =
            MetricSummary{cellDouble(row[1]), cellDouble(row[3]), cellDouble(row[4]), cellInt(row[2]), cellInt(row[5])};
      for (const auto& row : db_->query("SELECT tag FROM tags WHERE run_id = ? ORDER BY tag", {id}))
        out->tags.push_back(cellText(row[0]));
      for (const auto& row : db_->query("SELECT kind, path, phase, step, size, sha256, host, run_directory, content, created_at"
                                        " FROM artifacts WHERE run_id = ? ORDER BY kind DESC, path",
                                        {id})) {
        Artifact a;
        a.kind = cellText(row[0]);
        a.path = cellText(row[1]);
        a.phase = cellText(row[2]);
        a.step = row[3] ? cellInt(row[3]) : -1;
        a.size = row[4] ? cellInt(row[4]) : -1;
        a.sha256 = cellText(row[5]);
        a.host = cellText(row[6]);
        a.runDirectory = cellText(row[7]);
        a.stored = row[8].has_value();
        a.createdAt = cellDouble(row[9]);
        out->artifacts.push_back(std::move(a));
      }
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
    for (const auto& row : rows) out.push_back({cellText(row[0]), cellInt(row[1]), cellDouble(row[2]), cellDouble(row[3])});
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
        const std::string key = cellText(k[0]);
        const long long first = cellInt(k[1]), last = cellInt(k[2]), count = cellInt(k[3]);
        const long long width = (last - first + most) / most;  // ceil((last - first + 1) / most)
        auto rows = count <= most || width <= 1
                        ? db_->query("SELECT step, value, recorded_at FROM metrics WHERE run_id = ? AND key = ?"
                                     " ORDER BY step",
                                     {run, key})
                        : db_->query("SELECT AVG(step), AVG(value), MAX(recorded_at) FROM metrics"
                                     " WHERE run_id = ? AND key = ? GROUP BY (step - ?) / ? ORDER BY 1",
                                     {run, key, first, width});
        for (const auto& row : rows) {
          double step = cellDouble(row[0]);
          out.push_back({key, static_cast<long long>(std::llround(step)), cellDouble(row[1]), cellDouble(row[2])});
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
      // A sweep's trial keeps its result, without the run.
      db_->query("UPDATE trials SET run_id = NULL WHERE run_id = ?", {run});
      for (const auto& row : db_->query("SELECT content FROM artifacts WHERE run_id = ? AND content IS NOT NULL", {run}))
        db_->deleteContent(cellInt(row[0]));
      for (const char* table : {"metrics", "metric_summaries", "params", "tags", "artifacts"})
        db_->query(std::string("DELETE FROM ") + table + " WHERE run_id = ?", {run});
      db_->query("DELETE FROM runs WHERE id = ?", {run});
    });
    return existed;
  }

  std::vector<long long> markStale(double now, double graceSeconds, const ProcessAlive& alive) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<long long> ids;
    write([&] {
      const double before = now - graceSeconds;
      for (const auto& row :
           db_->query("SELECT id, host, pid FROM runs WHERE status = ? AND heartbeat_at < ? ORDER BY id",
                      {std::string("running"), before}))
        if (!alive || !alive(cellText(row[1]), cellInt(row[2]))) ids.push_back(cellInt(row[0]));
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
    inWriteTransaction(*db_, std::forward<F>(body));
  }
  template <typename F>
  void read(F&& body) {
    inReadTransaction(*db_, std::forward<F>(body));
  }

  // A run's points, summaries, artifacts and end, into a record that has no
  // points; inside the caller's write transaction.
  void recordContents(long long run, const RunContents& c) {
    insertPoints(run, c.points);
    std::map<std::string, MetricSummary> all;
    for (const auto& p : c.points) merge(all[p.key], p.step, p.value);
    writeSummaries(run, all);
    for (const auto& a : c.artifacts) upsertArtifact(run, a, std::nullopt, /*keepExisting=*/true);
    db_->query("UPDATE runs SET status = ?, stop_reason = ?, ended_at = ?, heartbeat_at = ? WHERE id = ?",
               {std::string(name(c.status)), c.reason, orNull(c.endedAt), orNull(c.endedAt), run});
  }

  // An artifact's row; inside the caller's write transaction. One already
  // recorded at that path is replaced (its bytes in the store too), or, with
  // `keepExisting`, kept as it is.
  void upsertArtifact(long long run, const Artifact& a, std::optional<long long> content, bool keepExisting = false) {
    auto before = db_->query("SELECT content FROM artifacts WHERE run_id = ? AND path = ?", {run, a.path});
    if (!before.empty()) {
      if (keepExisting) return;
      if (before[0][0] && (!content || cellInt(before[0][0]) != *content)) db_->deleteContent(cellInt(before[0][0]));
      db_->query("DELETE FROM artifacts WHERE run_id = ? AND path = ?", {run, a.path});
    }
    auto text = [](const std::string& v) { return v.empty() ? SqlValue(nullptr) : SqlValue(v); };
    auto number = [](long long v) { return v < 0 ? SqlValue(nullptr) : SqlValue(v); };
    db_->query("INSERT INTO artifacts(run_id, kind, path, phase, step, size, sha256, host, run_directory, content, created_at)"
               " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               {run, a.kind, a.path, text(a.phase), number(a.step), number(a.size), text(a.sha256), text(a.host),
                text(a.runDirectory), content ? SqlValue(*content) : SqlValue(nullptr),
                std::isfinite(a.createdAt) ? SqlValue(a.createdAt) : SqlValue(nowSeconds())});
  }

  // The bytes of `file` kept in the store, read in chunks; their SHA-256
  // must be `sha256`. Returns the contents' id (none: the database cannot
  // hold so many bytes in one value). Inside a write transaction.
  std::optional<long long> keepContent(const std::string& file, const std::string& sha256) {
    std::FILE* f = std::fopen(file.c_str(), "rb");
    if (f == nullptr) throw StoreError("cannot read `" + file + "` to keep it in the store: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(::fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
      std::fclose(f);
      throw StoreError("`" + file + "` is not a regular file: it is not kept in the store");
    }
    ir::Sha256 hash;
    long long id = 0;
    try {
      id = db_->writeContent(static_cast<std::uint64_t>(st.st_size), [&](char* buffer, std::size_t capacity) {
        const std::size_t n = std::fread(buffer, 1, capacity, f);
        if (n == 0 && std::ferror(f)) throw StoreError("cannot read `" + file + "`: " + std::strerror(errno));
        hash.add(std::string_view(buffer, n));
        return n;
      });
    } catch (...) {
      std::fclose(f);
      throw;
    }
    std::fclose(f);
    if (id < 0) return std::nullopt;  // more than the database holds in one value: recorded without its bytes
    if (!sha256.empty() && hash.hex() != sha256)
      throw StoreError("`" + file + "` changed while it was kept in the store (its SHA-256 is no longer the one recorded)");
    return id;
  }

  void insertPoints(long long run, const std::vector<MetricPoint>& points) {
    std::vector<std::vector<SqlValue>> rows;
    rows.reserve(points.size());
    for (const auto& p : points) rows.push_back({run, p.key, p.step, orNull(p.value), p.time});
    db_->executeMany("INSERT INTO metrics(run_id, key, step, value, recorded_at) VALUES (?, ?, ?, ?, ?)", rows);
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
    r.id = cellInt(row[0]);
    r.name = cellText(row[1]);
    r.kind = parseRunKind(cellText(row[2])).value_or(RunKind::Run);
    r.training = cellText(row[3]);
    r.status = parseRunStatus(cellText(row[4])).value_or(RunStatus::Failed);
    r.stopReason = cellText(row[5]);
    r.startedAt = cellDouble(row[6]);
    r.endedAt = cellDouble(row[7]);
    r.heartbeatAt = cellDouble(row[8]);
    r.host = cellText(row[9]);
    r.pid = cellInt(row[10]);
    r.planHash = cellText(row[11]);
    r.note = cellText(row[12]);
    return r;
  }

  std::string location_;
  std::unique_ptr<SqlConnection> db_;
  std::mutex mutex_;
};

}  // namespace

bool isPostgresLocation(const std::string& location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

std::unique_ptr<SqlConnection> connectStore(const std::string& location, OpenMode mode) {
  if (isPostgresLocation(location)) return connectPostgres(location);
  // What SQLite would take but a store cannot be: a database that vanishes
  // with the command, a URI the next command would read as another file,
  // and a URI of a server this ipu does not speak to (read as a path, it
  // would make directories named after it).
  if (location.empty()) throw StoreError("the store location is empty: give --store a file (or a postgresql:// URI)");
  if (location == ":memory:" || location.rfind("file:", 0) == 0)
    throw StoreError("`" + location + "` is an SQLite " + (location == ":memory:" ? "in-memory database" : "URI") +
                     ", which a run store cannot be: give --store the path of a file, e.g. runs/ipu.db (or a postgresql:// URI)");
  if (const auto scheme = location.find("://"); scheme != std::string::npos)
    throw StoreError("`" + location.substr(0, scheme + 3) + "` is not a store this ipu can open: give --store a file, or a URI "
                     "starting with postgresql:// or postgres://");
  {
    std::error_code ec;
    if (std::filesystem::is_directory(location, ec))
      throw StoreError("`" + location + "` is a directory: give --store a file, e.g. " +
                       (std::filesystem::path(location) / "ipu.db").string());
  }
  if (mode == OpenMode::Create) {
    std::filesystem::path parent = std::filesystem::path(location).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) throw StoreError("cannot create `" + parent.string() + "` for the store: " + ec.message());
  }
  return connectSqlite(location, mode == OpenMode::Create);
}

std::unique_ptr<RunStore> openStore(const std::string& location, OpenMode mode) {
  return std::make_unique<SqlStore>(location, connectStore(location, mode));
}

}  // namespace ipu::store
