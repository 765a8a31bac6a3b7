// Sweeps and trials over any SqlConnection (sweep_store.h), written once for
// SQLite and PostgreSQL.
//
// Atomicity. On SQLite every write transaction holds the database's one write
// lock from its start (BEGIN IMMEDIATE), so a claim is trivially atomic. On
// PostgreSQL (READ COMMITTED) a claim takes the queued trial of the lowest
// index with SELECT ... FOR UPDATE SKIP LOCKED, so agents claiming at once
// take different trials without waiting for each other; proposing a new
// trial and re-queueing stale ones happen under the sweep row's lock
// (SELECT ... FOR UPDATE), so one agent at a time proposes, from a history
// no one else is changing. Locks are always taken sweep row first, then
// trial rows, so two transactions cannot wait for each other in a cycle.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include "interpreter/store/sql_connection.h"
#include "interpreter/store/sql_schema.h"
#include "interpreter/store/sweep_records.h"
#include "interpreter/store/sweep_store.h"

namespace ipu::store {

namespace {

SqlValue orNull(double v) { return std::isfinite(v) ? SqlValue(v) : SqlValue(nullptr); }
SqlValue text(const char* s) { return std::string(s); }

constexpr const char* kTrialColumns =
    "sweep_id, trial_index, assignment_key, assignment, state, agent, attempts, created_at, started_at,"
    " heartbeat_at, ended_at, run_id, metric, reason";

bool reaches(const sweep::Metric& m, double value) {
  if (!m.target || !std::isfinite(value)) return false;
  return m.goal == sweep::Goal::Minimize ? value <= *m.target : value >= *m.target;
}

class SweepSqlStore : public SweepStore {
 public:
  SweepSqlStore(std::string location, std::unique_ptr<SqlConnection> conn)
      : location_(std::move(location)), db_(std::move(conn)) {
    openSchema(*db_, location_);
  }

  const std::string& location() const override { return location_; }

  CreatedSweep createOrResumeSweep(const sweep::SweepSpec& spec, const std::string& script, double now) override {
    std::lock_guard<std::mutex> lock(mutex_);
    CreatedSweep out;
    const std::string specText = toJson(spec).dump();
    const SqlValue seed = static_cast<long long>(spec.seed);  // the 64 bits, as a signed BIGINT
    inWriteTransaction(*db_, [&] {
      auto rows = db_->query("SELECT id FROM sweeps WHERE name = ?" + forUpdate(), {spec.name});
      if (rows.empty()) {
        // ON CONFLICT: another process may create the same sweep at this moment (PostgreSQL).
        rows = db_->query("INSERT INTO sweeps(name, spec, script, method, state, seed, created_at)"
                          " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING id",
                          {spec.name, specText, script, text(sweep::methodName(spec.method)),
                           text(name(SweepState::Running)), seed, now});
        out.created = !rows.empty();
        if (!out.created) rows = db_->query("SELECT id FROM sweeps WHERE name = ?" + forUpdate(), {spec.name});
      }
      if (rows.empty()) throw StoreError("store `" + location_ + "`: the sweep `" + spec.name + "` got no id");
      const long long id = cellInt(rows[0][0]);
      if (!out.created) refuseAnotherSpecWhileLive(id, spec.name, specText, now);
      if (!out.created) {
        db_->query("UPDATE sweeps SET spec = ?, script = ?, method = ?, seed = ?, state = ? WHERE id = ?",
                   {specText, script, text(sweep::methodName(spec.method)), seed, text(name(SweepState::Running)), id});
        out.requeued = static_cast<long long>(
            db_->query("UPDATE trials SET state = ?, attempts = 0, agent = '', started_at = NULL, heartbeat_at = NULL,"
                       " ended_at = NULL, run_id = NULL, metric = NULL, reason = ''"
                       " WHERE sweep_id = ? AND state IN (?, ?) RETURNING trial_index",
                       {text(name(TrialState::Queued)), id, text(name(TrialState::Failed)), text(name(TrialState::Killed))})
                .size());
      }
      out.sweep = *loadSweep(id);
    });
    return out;
  }

  // A sweep another command is running (created a moment ago, or with a
  // trial whose agent beat recently) keeps its spec: replacing it would run
  // that command's agents on this command's grid, and report this one's
  // cells done when they never ran. Resuming with another spec (a grid that
  // grew) is for a sweep nobody runs. Inside the caller's write transaction,
  // with the sweep's row locked, so two commands at once cannot both pass.
  static constexpr double kLiveWithinSeconds = 60;  // an agent's default `--stale-after`
  void refuseAnotherSpecWhileLive(long long id, const std::string& sweepName, const std::string& specText, double now) {
    auto rows = db_->query("SELECT spec, created_at FROM sweeps WHERE id = ?", {id});
    if (rows.empty()) return;
    // Compared as JSON: another release may have written the same spec with its keys in another order.
    const nlohmann::json stored = nlohmann::json::parse(cellText(rows[0][0]), nullptr, /*allow_exceptions=*/false);
    if (!stored.is_discarded() && stored == nlohmann::json::parse(specText)) return;
    const double created = cellDouble(rows[0][1]);
    const auto beat = db_->query("SELECT MAX(heartbeat_at) FROM trials WHERE sweep_id = ? AND state = ?",
                                 {id, text(name(TrialState::Running))});
    const bool beating = !beat.empty() && beat[0][0].has_value() && now - cellDouble(beat[0][0]) < kLiveWithinSeconds;
    if (!beating && now - created >= kLiveWithinSeconds) return;
    throw StoreError("store `" + location_ + "`: sweep `" + sweepName + "` is being run with another specification " +
                     (beating ? "(one of its trials is running)" : "(it was created moments ago)") +
                     ": wait for it to finish, cancel it (`ipu sweep cancel " + sweepName +
                     "`), or give this sweep another name");
  }

  std::optional<SweepRecord> sweep(const std::string& sweepName) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<SweepRecord> out;
    inReadTransaction(*db_, [&] {
      auto rows = db_->query("SELECT id FROM sweeps WHERE name = ?", {sweepName});
      if (!rows.empty()) out = loadSweep(cellInt(rows[0][0]));
    });
    return out;
  }

  std::vector<SweepRecord> listSweeps() override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<SweepRecord> out;
    inReadTransaction(*db_, [&] {
      for (const auto& row : db_->query("SELECT " + std::string(kSweepColumns) + " FROM sweeps ORDER BY created_at, id"))
        out.push_back(sweepFromRow(row));
    });
    return out;
  }

  std::vector<TrialRecord> trials(long long sweepId) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<TrialRecord> out;
    inReadTransaction(*db_, [&] { out = loadTrials(sweepId); });
    return out;
  }

  Claim claimTrial(long long sweepId, const ClaimOptions& options, const Proposer& propose, double now) override {
    if (options.agent.empty()) throw std::invalid_argument("claimTrial: an agent needs an id");
    std::lock_guard<std::mutex> lock(mutex_);
    Claim out;
    inWriteTransaction(*db_, [&] {
      bool sweepLocked = false;
      // Dead agents' trials first, so that they are claimed before new ones are proposed.
      if (!db_->query("SELECT 1 FROM trials WHERE sweep_id = ? AND state = ? AND heartbeat_at < ? LIMIT 1",
                      {sweepId, text(name(TrialState::Running)), now - options.staleAfter})
               .empty()) {
        lockSweep(sweepId);
        sweepLocked = true;
        requeueStaleLocked(sweepId, now, options.staleAfter, options.maxAttempts);
      }
      std::optional<SweepRecord> sweep = loadSweep(sweepId);
      if (!sweep) throw StoreError("store `" + location_ + "`: there is no sweep " + std::to_string(sweepId));
      if (sweep->state != SweepState::Running) {
        out.outcome = outcomeOf(sweep->state);
        return;
      }
      std::optional<long long> queued = pickQueued(sweepId);
      if (!queued && !sweepLocked) {
        // Proposing: under the sweep's lock, with its state and queue read again.
        lockSweep(sweepId);
        sweep = loadSweep(sweepId);
        if (sweep->state != SweepState::Running) {
          out.outcome = outcomeOf(sweep->state);
          return;
        }
        queued = pickQueued(sweepId);
      }
      if (queued) {
        db_->query("UPDATE trials SET state = ?, agent = ?, attempts = attempts + 1, started_at = ?, heartbeat_at = ?,"
                   " ended_at = NULL, reason = '' WHERE sweep_id = ? AND trial_index = ?",
                   {text(name(TrialState::Running)), options.agent, now, now, sweepId, *queued});
        claimed(out, sweepId, *queued);
        return;
      }
      std::vector<TrialRecord> history = loadTrials(sweepId);
      std::optional<sweep::Assignment> next;
      if (sweep->spec.runCap <= 0 || static_cast<long long>(history.size()) < sweep->spec.runCap)
        next = propose(*sweep, history);
      if (next) {
        const std::string key = sweep::assignmentKey(*next);
        for (const auto& t : history)
          if (t.key == key)
            throw std::invalid_argument("the proposer of sweep `" + sweep->name + "` proposed `" + key +
                                        "`, which is trial " + std::to_string(t.index) + " already");
        const long long index = history.empty() ? 0 : history.back().index + 1;
        db_->query("INSERT INTO trials(sweep_id, trial_index, assignment_key, assignment, state, agent, attempts,"
                   " created_at, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
                   {sweepId, index, key, toJson(*next).dump(), text(name(TrialState::Running)), options.agent, now, now,
                    now});
        claimed(out, sweepId, index);
        return;
      }
      // Nothing to propose. Trials still running (or queued, and being
      // claimed by others right now) may yet fail and be queued again.
      bool active = std::any_of(history.begin(), history.end(), [](const TrialRecord& t) {
        return t.state == TrialState::Running || t.state == TrialState::Queued;
      });
      if (active) {
        out.outcome = ClaimOutcome::Wait;
        return;
      }
      db_->query("UPDATE sweeps SET state = ? WHERE id = ?", {text(name(SweepState::Finished)), sweepId});
      out.outcome = ClaimOutcome::Finished;
    });
    return out;
  }

  LeaseState heartbeatTrial(const TrialLease& lease, double now) override {
    std::lock_guard<std::mutex> lock(mutex_);
    LeaseState out = LeaseState::Lost;
    inWriteTransaction(*db_, [&] {
      auto held = db_->query("UPDATE trials SET heartbeat_at = ?" + whereLeased() + " RETURNING trial_index",
                             withLease({now}, lease));
      if (held.empty()) return;
      auto state = db_->query("SELECT state FROM sweeps WHERE id = ?", {lease.sweepId});
      out = !state.empty() && cellText(state[0][0]) == name(SweepState::Cancelled) ? LeaseState::Cancelled
                                                                                    : LeaseState::Held;
    });
    return out;
  }

  bool attachRun(const TrialLease& lease, long long runId) override {
    std::lock_guard<std::mutex> lock(mutex_);
    bool out = false;
    inWriteTransaction(*db_, [&] {
      out = !db_->query("UPDATE trials SET run_id = ?" + whereLeased() + " RETURNING trial_index",
                        withLease({runId}, lease))
                 .empty();
    });
    return out;
  }

  bool endTrial(const TrialLease& lease, const TrialOutcome& o, double now) override {
    if (o.state == TrialState::Queued || o.state == TrialState::Running)
      throw std::invalid_argument("endTrial: a trial ends finished, failed, stopped or killed");
    std::lock_guard<std::mutex> lock(mutex_);
    bool out = false;
    inWriteTransaction(*db_, [&] {
      std::optional<SweepRecord> sweep = loadSweep(lease.sweepId);
      if (!sweep) return;
      const bool finishesSweep = o.state == TrialState::Finished && reaches(sweep->spec.metric, o.metric);
      if (finishesSweep) lockSweep(lease.sweepId);  // sweep row before trial row
      std::vector<SqlValue> params{text(name(o.state)), now, now, orNull(o.metric), o.reason};
      if (o.runId) params.push_back(*o.runId);
      params = withLease(std::move(params), lease);
      out = !db_->query(std::string("UPDATE trials SET state = ?, ended_at = ?, heartbeat_at = ?, metric = ?,") +
                            " reason = ?" + (o.runId ? ", run_id = ?" : "") + whereLeased() + " RETURNING trial_index",
                        params)
                 .empty();
      if (out && finishesSweep)
        db_->query("UPDATE sweeps SET state = ? WHERE id = ? AND state IN (?, ?)",
                   {text(name(SweepState::Finished)), lease.sweepId, text(name(SweepState::Running)),
                    text(name(SweepState::Paused))});
    });
    return out;
  }

  StaleTrials requeueStale(long long sweepId, double now, double staleAfter, int maxAttempts) override {
    std::lock_guard<std::mutex> lock(mutex_);
    StaleTrials out;
    inWriteTransaction(*db_, [&] {
      lockSweep(sweepId);
      out = requeueStaleLocked(sweepId, now, staleAfter, maxAttempts);
    });
    return out;
  }

  SweepState setSweepState(long long sweepId, SweepState to) override {
    if (to == SweepState::Finished) throw std::invalid_argument("a sweep finishes by itself");
    std::lock_guard<std::mutex> lock(mutex_);
    SweepState before = SweepState::Running;
    inWriteTransaction(*db_, [&] {
      auto rows = db_->query("SELECT name, state FROM sweeps WHERE id = ?" + forUpdate(), {sweepId});
      if (rows.empty()) throw StoreError("store `" + location_ + "`: there is no sweep " + std::to_string(sweepId));
      const std::string sweepName = cellText(rows[0][0]);
      before = parseSweepState(cellText(rows[0][1])).value_or(SweepState::Finished);
      // Resuming queues the killed trials again (an agent stopped with Ctrl-C
      // leaves its trial killed), also when the sweep was running already.
      auto requeueKilled = [&] {
        db_->query("UPDATE trials SET state = ?, agent = '', reason = '' WHERE sweep_id = ? AND state = ?",
                   {text(name(TrialState::Queued)), sweepId, text(name(TrialState::Killed))});
      };
      if (before == to) {
        if (to == SweepState::Running) requeueKilled();
        return;
      }
      if (before == SweepState::Finished)
        throw StoreError("the sweep `" + sweepName + "` is finished: there is nothing to " +
                         (to == SweepState::Running ? "resume" : to == SweepState::Paused ? "pause" : "cancel") +
                         " (`ipu sweep FILE` runs its failed trials again)");
      if (before == SweepState::Cancelled && to == SweepState::Paused)
        throw StoreError("the sweep `" + sweepName + "` is cancelled; `ipu sweep resume " + sweepName +
                         "` lets agents claim its trials again");
      db_->query("UPDATE sweeps SET state = ? WHERE id = ?", {text(name(to)), sweepId});
      if (to == SweepState::Running) requeueKilled();
    });
    return before;
  }

  SweepStatus status(long long sweepId) override {
    std::lock_guard<std::mutex> lock(mutex_);
    SweepStatus out;
    inReadTransaction(*db_, [&] {
      auto sweep = loadSweep(sweepId);
      if (!sweep) throw StoreError("store `" + location_ + "`: there is no sweep " + std::to_string(sweepId));
      out.sweep = *sweep;
      for (TrialState s : {TrialState::Queued, TrialState::Running, TrialState::Finished, TrialState::Failed,
                           TrialState::Killed, TrialState::Stopped})
        out.counts[s] = 0;
      for (const auto& row : db_->query("SELECT state, COUNT(*) FROM trials WHERE sweep_id = ? GROUP BY state", {sweepId}))
        if (auto s = parseTrialState(cellText(row[0]))) out.counts[*s] = cellInt(row[1]);
      const bool minimize = sweep->spec.metric.goal == sweep::Goal::Minimize;
      auto best = db_->query("SELECT " + std::string(kTrialColumns) +
                                 " FROM trials WHERE sweep_id = ? AND state = ? AND metric IS NOT NULL ORDER BY metric " +
                                 (minimize ? "ASC" : "DESC") + ", trial_index LIMIT 1",
                             {sweepId, text(name(TrialState::Finished))});
      if (!best.empty()) out.best = trialFromRow(best[0]);
    });
    return out;
  }

 private:
  static constexpr const char* kSweepColumns = "id, name, spec, script, state, created_at";

  std::string forUpdate() const { return db_->dialect() == SqlDialect::Postgres ? " FOR UPDATE" : ""; }

  // PostgreSQL: the sweep row's lock (SQLite's write lock is held already).
  void lockSweep(long long sweepId) {
    if (db_->dialect() == SqlDialect::Postgres) db_->query("SELECT id FROM sweeps WHERE id = ? FOR UPDATE", {sweepId});
  }

  std::optional<long long> pickQueued(long long sweepId) {
    auto rows = db_->query("SELECT trial_index FROM trials WHERE sweep_id = ? AND state = ? ORDER BY trial_index LIMIT 1" +
                               std::string(db_->dialect() == SqlDialect::Postgres ? " FOR UPDATE SKIP LOCKED" : ""),
                           {sweepId, text(name(TrialState::Queued))});
    if (rows.empty()) return std::nullopt;
    return cellInt(rows[0][0]);
  }

  static ClaimOutcome outcomeOf(SweepState s) {
    switch (s) {
      case SweepState::Paused: return ClaimOutcome::Paused;
      case SweepState::Cancelled: return ClaimOutcome::Cancelled;
      case SweepState::Finished: return ClaimOutcome::Finished;
      case SweepState::Running: break;
    }
    return ClaimOutcome::Wait;
  }

  void claimed(Claim& out, long long sweepId, long long index) {
    auto rows = db_->query("SELECT " + std::string(kTrialColumns) + " FROM trials WHERE sweep_id = ? AND trial_index = ?",
                           {sweepId, index});
    out.outcome = ClaimOutcome::Trial;
    out.trial = trialFromRow(rows.at(0));
    out.lease = TrialLease{sweepId, index, out.trial.agent, out.trial.attempts};
  }

  // " WHERE <the lease holds>", whose parameters withLease appends.
  static std::string whereLeased() {
    return " WHERE sweep_id = ? AND trial_index = ? AND state = 'running' AND agent = ? AND attempts = ?";
  }
  static std::vector<SqlValue> withLease(std::vector<SqlValue> params, const TrialLease& l) {
    params.insert(params.end(), {l.sweepId, l.index, l.agent, static_cast<long long>(l.attempt)});
    return params;
  }
  StaleTrials requeueStaleLocked(long long sweepId, double now, double staleAfter, int maxAttempts) {
    StaleTrials out;
    auto rows = db_->query("SELECT trial_index, attempts, agent FROM trials WHERE sweep_id = ? AND state = ?"
                           " AND heartbeat_at < ? ORDER BY trial_index",
                           {sweepId, text(name(TrialState::Running)), now - staleAfter});
    // Each update checks again that the trial is still running and silent:
    // its agent may have sent a heartbeat since the select (PostgreSQL).
    const std::string still = " WHERE sweep_id = ? AND trial_index = ? AND state = ? AND heartbeat_at < ? RETURNING trial_index";
    for (const auto& row : rows) {
      const long long index = cellInt(row[0]), attempts = cellInt(row[1]);
      const std::string agent = cellText(row[2]);
      const std::vector<SqlValue> where{sweepId, index, text(name(TrialState::Running)), now - staleAfter};
      if (attempts >= maxAttempts) {
        std::vector<SqlValue> params{text(name(TrialState::Failed)),
                                     "its agent (" + agent + ") stopped sending heartbeats, on each of its " +
                                         std::to_string(attempts) + " attempts"};
        params.insert(params.end(), where.begin(), where.end());
        if (!db_->query("UPDATE trials SET state = ?, ended_at = heartbeat_at, reason = ?" + still, params).empty())
          out.failed.push_back(index);
      } else {
        std::vector<SqlValue> params{text(name(TrialState::Queued)),
                                     "queued again: its agent (" + agent + ") stopped sending heartbeats"};
        params.insert(params.end(), where.begin(), where.end());
        if (!db_->query("UPDATE trials SET state = ?, reason = ?" + still, params).empty()) out.requeued.push_back(index);
      }
    }
    return out;
  }

  std::optional<SweepRecord> loadSweep(long long id) {
    auto rows = db_->query("SELECT " + std::string(kSweepColumns) + " FROM sweeps WHERE id = ?", {id});
    if (rows.empty()) return std::nullopt;
    return sweepFromRow(rows[0]);
  }

  std::vector<TrialRecord> loadTrials(long long sweepId) {
    std::vector<TrialRecord> out;
    for (const auto& row : db_->query("SELECT " + std::string(kTrialColumns) +
                                          " FROM trials WHERE sweep_id = ? ORDER BY trial_index",
                                      {sweepId}))
      out.push_back(trialFromRow(row));
    return out;
  }

  SweepRecord sweepFromRow(const SqlRow& row) {
    SweepRecord s;
    s.id = cellInt(row[0]);
    s.name = cellText(row[1]);
    const std::string what = "the spec of sweep `" + s.name + "` in `" + location_ + "`";
    try {
      s.spec = specFromJson(nlohmann::json::parse(cellText(row[2])), what);
    } catch (const nlohmann::json::exception& e) {
      throw StoreError(what + " is malformed: " + e.what());
    }
    s.script = cellText(row[3]);
    s.state = parseSweepState(cellText(row[4])).value_or(SweepState::Finished);
    s.createdAt = cellDouble(row[5]);
    return s;
  }

  TrialRecord trialFromRow(const SqlRow& row) {
    TrialRecord t;
    t.sweepId = cellInt(row[0]);
    t.index = cellInt(row[1]);
    t.key = cellText(row[2]);
    const std::string what = "trial " + std::to_string(t.index) + " of sweep " + std::to_string(t.sweepId);
    try {
      t.assignment = assignmentFromJson(nlohmann::json::parse(cellText(row[3])), what);
    } catch (const nlohmann::json::exception& e) {
      throw StoreError(what + " is malformed: " + e.what());
    }
    t.state = parseTrialState(cellText(row[4])).value_or(TrialState::Failed);
    t.agent = cellText(row[5]);
    t.attempts = static_cast<int>(cellInt(row[6]));
    t.createdAt = cellDouble(row[7]);
    t.startedAt = cellDouble(row[8]);
    t.heartbeatAt = cellDouble(row[9]);
    t.endedAt = cellDouble(row[10]);
    if (row[11]) t.runId = cellInt(row[11]);
    t.metric = cellDouble(row[12]);
    t.reason = cellText(row[13]);
    return t;
  }

  std::string location_;
  std::unique_ptr<SqlConnection> db_;
  std::mutex mutex_;
};

}  // namespace

const char* name(SweepState s) {
  switch (s) {
    case SweepState::Running: return "running";
    case SweepState::Paused: return "paused";
    case SweepState::Cancelled: return "cancelled";
    case SweepState::Finished: return "finished";
  }
  return "finished";
}

const char* name(TrialState s) {
  switch (s) {
    case TrialState::Queued: return "queued";
    case TrialState::Running: return "running";
    case TrialState::Finished: return "finished";
    case TrialState::Failed: return "failed";
    case TrialState::Killed: return "killed";
    case TrialState::Stopped: return "stopped";
  }
  return "failed";
}

std::optional<SweepState> parseSweepState(const std::string& t) {
  for (SweepState s : {SweepState::Running, SweepState::Paused, SweepState::Cancelled, SweepState::Finished})
    if (t == name(s)) return s;
  return std::nullopt;
}

std::optional<TrialState> parseTrialState(const std::string& t) {
  for (TrialState s : {TrialState::Queued, TrialState::Running, TrialState::Finished, TrialState::Failed,
                       TrialState::Killed, TrialState::Stopped})
    if (t == name(s)) return s;
  return std::nullopt;
}

std::unique_ptr<SweepStore> openSweepStore(const std::string& location, OpenMode mode) {
  return std::make_unique<SweepSqlStore>(location, connectStore(location, mode));
}

}  // namespace ipu::store
