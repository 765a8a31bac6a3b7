// Sweeps and their trials in the run store (docs/sweeps.md, "Agents and the
// store"): the shared state through which any number of agent processes, on
// one host (SQLite) or several (PostgreSQL), run one sweep without a server.
//
// An agent's loop is
//
//   for (;;) {
//     Claim c = store.claimTrial(sweep, options, propose);   // atomic
//     if (c.outcome == ClaimOutcome::Wait) { sleep; continue; }
//     if (c.outcome != ClaimOutcome::Trial) break;            // paused, cancelled, finished
//     // train c.trial.assignment; a thread calls heartbeatTrial(c.lease) every few
//     // seconds and stops the training when it answers Lost or Cancelled
//     store.endTrial(c.lease, {TrialState::Finished, metric, runId});
//   }
//
// A claim first re-queues the trials whose agent died (no heartbeat for
// `staleAfter` seconds), so there is no controller process to keep alive:
// any live agent recovers a dead one's trial. A trial is held by a lease
// (the agent and the attempt that claimed it): an agent that lost its lease
// (it was presumed dead and its trial went to another) can no longer write
// the trial, so a trial's result is recorded once.
//
// The identity of a trial within its sweep is its assignment (the key of
// sweep::assignmentKey): a cell has one row, so a finished cell never runs
// twice, and re-running a sweep (createOrResumeSweep) queues its failed and
// killed cells again.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/store/run_store.h"
#include "interpreter/sweep/space.h"

namespace ipu::store {

// running: agents claim trials. paused: agents claim none; running trials
// go on. cancelled: agents claim none; running trials are stopped (their
// heartbeat answers Cancelled) and end `killed`. finished: no trial is left
// to run (every proposal was made and every trial ended), or a trial reached
// the metric's target.
enum class SweepState { Running, Paused, Cancelled, Finished };

// queued: waiting for an agent. running: claimed, its agent alive.
// finished: trained to the end, with its metric. failed: its training
// failed, or its agents died `maxAttempts` times. killed: stopped because
// the sweep was cancelled. stopped: stopped early (hyperband, a hook), with
// the metric it had reached; a result like finished, never re-run.
enum class TrialState { Queued, Running, Finished, Failed, Killed, Stopped };

const char* name(SweepState s);
const char* name(TrialState s);
std::optional<SweepState> parseSweepState(const std::string& text);
std::optional<TrialState> parseTrialState(const std::string& text);

struct SweepRecord {
  long long id = 0;
  std::string name;
  sweep::SweepSpec spec;
  std::string script;  // the script text the sweep was declared in
  SweepState state = SweepState::Running;
  double createdAt = kNoTime;
};

struct TrialRecord {
  long long sweepId = 0;
  long long index = 0;  // 0, 1, 2, ... in the order trials were proposed
  std::string key;      // sweep::assignmentKey(assignment)
  sweep::Assignment assignment;
  TrialState state = TrialState::Queued;
  std::string agent;    // the agent that claimed it last ("" if never claimed)
  int attempts = 0;     // claims so far
  double createdAt = kNoTime, startedAt = kNoTime, heartbeatAt = kNoTime, endedAt = kNoTime;
  std::optional<long long> runId;  // its recorded run (runs.id)
  double metric = kNoTime;         // the final value of the sweep's metric (NaN: none)
  std::string reason;              // why it failed, was stopped or killed
};

// Who holds a running trial: the agent and the attempt that claimed it.
struct TrialLease {
  long long sweepId = 0;
  long long index = 0;
  std::string agent;
  int attempt = 0;
};

struct ClaimOptions {
  std::string agent;        // an id unique among live agents, e.g. "host:pid"
  double staleAfter = 60;   // seconds without a heartbeat after which an agent is presumed dead
  int maxAttempts = 3;      // claims of one trial before a dying trial fails for good
};

// Proposes the next assignment, or nothing when the method has nothing more
// to propose (a grid with every cell made, a run cap reached by the method's
// own count). Called inside the claim's transaction, with every trial of the
// sweep (in index order; the running and queued ones too, so that a
// Bayesian proposer can allow for them); no other agent proposes meanwhile.
// The assignment must not have the key of an existing trial
// (std::invalid_argument otherwise: that is a bug of the proposer).
using Proposer = std::function<std::optional<sweep::Assignment>(const SweepRecord&, const std::vector<TrialRecord>&)>;

enum class ClaimOutcome {
  Trial,      // `trial` and `lease` are this agent's
  Wait,       // nothing to claim now, but trials are running (they may fail and be re-queued): claim again later
  Paused,     // the sweep is paused: claim again later, or leave
  Cancelled,  // the sweep is cancelled: leave
  Finished,   // the sweep is finished: leave
};

struct Claim {
  ClaimOutcome outcome = ClaimOutcome::Wait;
  TrialRecord trial;
  TrialLease lease;
};

enum class LeaseState {
  Held,       // go on
  Lost,       // the trial was re-queued (this agent was presumed dead) or ended: stop, write nothing
  Cancelled,  // the sweep was cancelled: stop the training, end the trial `killed`
};

struct TrialOutcome {
  TrialState state = TrialState::Finished;  // Finished, Failed, Stopped or Killed
  double metric = kNoTime;
  std::optional<long long> runId;
  std::string reason;
};

struct StaleTrials {
  std::vector<long long> requeued;  // indices of trials queued again
  std::vector<long long> failed;    // indices of trials that used up their attempts
};

struct SweepStatus {
  SweepRecord sweep;
  std::map<TrialState, long long> counts;  // every state, zero included
  std::optional<TrialRecord> best;         // the finished trial with the best metric (by the goal)
};

struct CreatedSweep {
  SweepRecord sweep;
  bool created = false;  // false: an existing sweep of that name was resumed
  long long requeued = 0;  // resumed: failed and killed trials queued again
};

// One object may be shared by an agent's threads (its training and its
// heartbeat): calls are serialised on its one connection.
class SweepStore {
 public:
  virtual ~SweepStore() = default;
  virtual const std::string& location() const = 0;

  // A new sweep named spec.name, running; or the existing one of that name,
  // resumed: its spec and script replaced by these (a grid may have grown:
  // cells are matched by assignment), its failed and killed trials queued
  // again with their attempts reset, its state running.
  virtual CreatedSweep createOrResumeSweep(const sweep::SweepSpec& spec, const std::string& script, double now) = 0;
  virtual std::optional<SweepRecord> sweep(const std::string& name) = 0;
  virtual std::vector<SweepRecord> listSweeps() = 0;  // oldest first
  virtual std::vector<TrialRecord> trials(long long sweepId) = 0;  // in index order

  // See the top of this file. Re-queues stale trials, then takes the queued
  // trial of the lowest index, else proposes a new one; all in one
  // transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: the queued trial
  // taken FOR UPDATE SKIP LOCKED, proposals under the sweep row's lock).
  virtual Claim claimTrial(long long sweepId, const ClaimOptions& options, const Proposer& propose, double now) = 0;
  virtual LeaseState heartbeatTrial(const TrialLease& lease, double now) = 0;
  // Links the running trial to its recorded run. False if the lease is lost.
  virtual bool attachRun(const TrialLease& lease, long long runId) = 0;
  // Ends the trial. False (and nothing written) if the lease is lost. A
  // finished trial that reaches the metric's target finishes the sweep.
  virtual bool endTrial(const TrialLease& lease, const TrialOutcome& outcome, double now) = 0;
  // Running trials silent for `staleAfter` seconds: queued again, or failed
  // once they were claimed `maxAttempts` times. claimTrial does this itself.
  virtual StaleTrials requeueStale(long long sweepId, double now, double staleAfter, int maxAttempts) = 0;

  // running -> paused; paused and cancelled -> running; running and paused
  // -> cancelled. To running, killed trials are queued again, also when the
  // sweep was running already (an agent stopped with Ctrl-C leaves its trial
  // killed). Changing to another state it is in does nothing; any other change (e.g. of a finished sweep) throws
  // StoreError saying why. Returns the state before.
  virtual SweepState setSweepState(long long sweepId, SweepState to) = 0;
  virtual SweepStatus status(long long sweepId) = 0;
};

// The same store as openStore (same location, same schema, same migration).
std::unique_ptr<SweepStore> openSweepStore(const std::string& location, OpenMode mode);

}  // namespace ipu::store
