// `ipu run`'s engine: executes the phases of a run on virtual IPUs (trainer.h)
// and reports through the shared run events (runtime/train/events.h). It
// never prints and never throws: problems are Errors (error.h) pointing into
// the script, and the caller renders them.
//
//   Options o;
//   o.observer = &progressBar;          // phaseStart / step / phaseEnd
//   o.cancel = &ctrlC;                  // set from a signal handler
//   o.checkpointDirectory = runDir + "/checkpoints";
//   o.resume = resumeFlag;
//   o.datasetDirectory = scriptDir;     // relative dataset paths resolve here
//   if (auto need = checkHostMemory(run, hostMemoryAvailable()); !need) { report(need.error()); }
//   auto outcome = emu::run(run, o);
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/emulator/error.h"
#include "runtime/emulator/instances.h"
#include "runtime/ir/execution_plan.h"
#include "runtime/train/events.h"

namespace ipu::emu {

// The text corpus shipped with ipu (runtime/emulator/corpus), used by language
// models whose training declares no dataset (`kind: synthetic`).
std::string defaultCorpusPath();

struct Options {
  std::optional<long long> seed;        // overrides the run's `seed`
  int hostThreads = 0;                  // threads running the virtual IPUs; 0: one per hardware thread
  const std::atomic<bool>* cancel = nullptr;   // checked between pipeline cycles (micro batches)
  train::Observer* observer = nullptr;
  train::Policies policies;             // learningRate is required for `lr: lua f`
  std::string checkpointDirectory;      // "": no checkpoints
  long long checkpointEvery = 0;        // also every N steps (0: only at the end of each phase)
  bool resume = false;                  // continue from the latest checkpoint in checkpointDirectory
  // A resume continues from the latest checkpoint at or before this global
  // step (the last step up to which the run's log has every record, so no
  // step goes unrecorded: a record torn by a crash is run again); -1: the
  // latest of all. Instance 0's value counts on every instance.
  long long resumeAtMost = -1;
  std::string datasetDirectory;         // relative dataset paths resolve against it (the script's directory)
  std::string builtinCorpus = defaultCorpusPath();
  int evaluationSamples = 512;          // held-out samples evaluated at the end of each phase
  long long stepLimit = 0;              // at most this many steps per phase (0: the plan's steps)
  // What the checkpoints belong to (a digest of the plan; "" for none):
  // written into every checkpoint and required of the ones resumed from.
  std::string planIdentity;
  // Weights that the phases starting from the model's initialisation (those
  // without `from`) start from instead: a checkpoint of another run, such as
  // the best trial of a sweep (docs/sweeps.md, `from:`). Only its weights are
  // taken, not its optimizer state; it must hold a tensor of the model's shape
  // for every parameter (IPU5005 otherwise). "": the initialisation.
  std::string initialWeights;
  // An MPI job's instances (instances.h; docs/run.md, "Across processes and
  // hosts"): each runs its share of the replicas. Instance 0 alone writes
  // checkpoints; the others get their observer's decisions (stop, the
  // checkpoint to start from) from it, and all stop for Ctrl-C at the same
  // step. Null or one instance: this process runs every replica.
  std::shared_ptr<Instances> instances;
};

enum class Status { Completed, Cancelled, Stopped };

struct PhaseOutcome {
  std::string name;
  long long steps = 0;                  // steps done (all of them unless cancelled or stopped)
  double lastLoss = train::kNotMeasured;
  std::map<std::string, double> evaluation;   // held-out metrics (trainer.h, evaluate)
  std::string checkpoint;               // the last checkpoint written ("" if none)
};

struct RunOutcome {
  Status status = Status::Completed;
  std::string stopReason;
  std::vector<PhaseOutcome> phases;
  // MPI instances (Options::instances), for a run that ran to its end: per
  // instance, the gradient and batch-norm bytes it sent and received in this
  // invocation (Instances::bytesSent), and what the plan says it sends for
  // the steps run (ir::instanceTraffic). Empty in one process.
  std::vector<double> instanceBytesSent, instanceBytesReceived, instanceBytesPlanned;
};

Expected<RunOutcome> run(const ir::RunPlan& plan, const Options& options);

// What `run` refuses about a plan's declarations, found without the host,
// is the kernel table's (runtime/runnable/runnable.h: runProblems), which
// `ipu check`, `plan` and `estimate` read without linking the emulator.
// One phase on its own (as a run of that phase; a `from` phase must then have
// its final checkpoint in options.checkpointDirectory). A PhasePlan carries no
// seed: set options.seed to the run's.
Expected<RunOutcome> run(const ir::PhasePlan& phase, const Options& options);

// What emulating a run needs on the host, largest phase (bytes).
struct HostMemory {
  double total = 0;
  double parameters = 0;      // weights, gradients and accumulators of every replica
  double optimizerState = 0;  // moments and master weights
  double activations = 0;     // micro batches in flight
  double data = 0;            // the corpus
};
HostMemory hostMemoryNeeded(const ir::RunPlan& plan, const Options& options = {});
// MemAvailable of this host (bytes), 0 when unknown.
double hostMemoryAvailable();
// IPU5003 when `available` (bytes) is less than the run needs.
Expected<bool> checkHostMemory(const ir::RunPlan& plan, double available, const Options& options = {});

// Checkpoints of a run: <directory>/<phase>/step-NNNNNNNN.ipt and final.ipt.
std::string checkpointPath(const std::string& directory, const std::string& phase, long long step, bool final);

}  // namespace ipu::emu
