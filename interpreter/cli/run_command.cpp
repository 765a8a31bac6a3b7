// `ipu run FILE`: train the script's runs on the emulator, with a progress
// display, a run directory and a record in the run store (docs/run.md).
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/instances.h"
#include "interpreter/cli/session_output.h"
#include "interpreter/cli/training_options.h"
#include "interpreter/runner/step_export.h"

namespace ipu::cli {

namespace {

const char* kHelp = R"(usage: ipu run FILE [options]

Train the script's runs on the emulator (small models), with a progress
display, a run directory of checkpoints, metrics and events, and a record in
the run store (docs/run.md, docs/tracking.md). Ctrl-C stops cleanly after the
current micro batch (exit 130); a second Ctrl-C ends the process.

options:
  --runs-dir DIR         where run directories go (default: runs)
  --resume[=DIR]         continue the latest run of the training (or DIR)
  --steps N              at most N steps per phase (a quick try)
  --threads N            host threads for the virtual IPUs (default: all)
  --instances N          run the replicas as N MPI instances on this host
                         (mpirun; `mpirun -n N ipu run` spans hosts; docs/run.md)
  --checkpoint-every N   steps between checkpoints (default: 100)
  --artifacts store|files
                         keep the checkpoints' bytes in the run store too
                         (`store`, the default for a PostgreSQL store), or
                         only in the run directory (`files`, the default for
                         SQLite); every checkpoint is recorded either way
  --set PATH=VALUE       run with VALUE in place of what the script writes at
                         PATH (repeatable); paths as in a sweep's parameters
                         (lr, phase.NAME.micro_batch, optimizer.weight_decay,
                         mapping.replicas, model.hidden), values as in the
                         script (2e-4, 500 steps, every_layer), checked alike
  --name NAME            the run's name in the store (default TRAINING-ID)
  --tag TAG              a tag for the run in the store (repeatable)
  --export-steps N DIR   also write the first N steps (weights, batches,
                         gradients) to DIR as NumPy files (docs/emulator.md)
  --store PATH|URI       the run store (default: $IPU_STORE, else DIR/ipu.db)
  --no-store             record nothing in the run store
  --color auto|always|never
                         colour (default auto: only on a terminal; NO_COLOR disables)
)";

std::atomic<bool> gCancel{false};

// The first Ctrl-C stops the run cleanly (after the current micro batch,
// keeping what was recorded); a second one ends the process.
void onInterrupt(int) {
  gCancel = true;
  std::signal(SIGINT, SIG_DFL);
}

// What `--set`, `--name` and `--tag` give the run.
struct RunChanges {
  ValuesSet set;
  std::string name;
  std::vector<std::string> tags;
};

int train(const std::string& path, const TrainingOptions& o, const runner::ExportRequest& exportRequest,
          const RunChanges& changes, base::ColorMode color, const std::shared_ptr<emu::Instances>& instances = nullptr) {
  const bool exporting = exportRequest.steps > 0;
  if (exporting && o.resume)
    return usage("run", "`--export-steps` exports the first steps of a new run; it cannot be combined with --resume");
  if (exporting) {
    const std::string problem = runner::exportDirectoryProblem(exportRequest.directory);
    if (!problem.empty()) return usage("run", problem);
  }
  session::Session s;
  s.setPurpose(session::Purpose::Run);
  showHookOutput(s);
  auto file = s.readFile(path);
  if (file && !setValues(s, changes.set)) {
    printDiagnostics(s, false, color);
    return kUserError;
  }
  const ir::ExecutionPlan* plan = file ? s.plan(*file, /*requireRuns=*/true) : nullptr;
  if (plan == nullptr || s.diagnostics().hasErrors()) {
    printDiagnostics(s, false, color);
    return kUserError;
  }
  printDiagnostics(s, false, color);  // warnings
  s.diagnostics().clear();
  // Opened once the script is known to plan: a mistake in it creates no store.
  std::string storeError;
  auto runStore = openRecordingStore(o.store, storeError);
  if (!storeError.empty()) {
    std::cerr << "ipu run: error: " << storeError << "\n  help: --no-store runs without recording in the store\n";
    return kUserError;
  }
  if (exporting) {
    const std::string problem = runner::exportPlanProblem(*plan, exportRequest.steps, o.steps);
    if (!problem.empty()) return usage("run", problem);
  }
  std::signal(SIGINT, onInterrupt);
  const std::string dir = std::filesystem::absolute(path).parent_path().string();
  if (exporting) {
    runner::TrainSettings settings = trainSettings(o, s.rootText(), dir, color);
    settings.cancel = &gCancel;
    const runner::ExportResult exported = runner::exportSteps(s, plan->runs.front(), settings, exportRequest, std::cerr);
    if (s.diagnostics().hasErrors()) printDiagnostics(s, false, color);
    s.diagnostics().clear();
    if (exported.status == runner::ExportResult::Status::Failed) return kUserError;
    if (exported.status == runner::ExportResult::Status::Cancelled) return 130;
  }
  for (const auto& run : plan->runs) {
    runner::TrainSettings settings = trainSettings(o, s.rootText(), dir, color);
    settings.cancel = &gCancel;
    settings.store = runStore.get();
    settings.name = changes.name;
    settings.tags = changes.tags;
    // What was given in place of the script's values: the recorded script
    // does not say it.
    for (const auto& [at, value] : changes.set) settings.parameters["set." + at] = value;
    settings.instances = instances;
    // Under mpirun, standard error is a pseudo-terminal even in a pipe: the
    // line is redrawn in place only when `--instances` saw a terminal (and
    // so asked for colour).
    const bool terminal = underMpirun() ? color == base::ColorMode::Always : ::isatty(2) != 0;
    runner::TrainResult r = runner::train(s, run, settings, std::cerr, terminal);
    if (s.diagnostics().hasErrors()) printDiagnostics(s, false, color);
    reportStoreRecord(r, runStore.get());
    s.diagnostics().clear();
    printTrainResult(r, run.name, color);
    if (r.status == runner::TrainResult::Status::Failed) return kUserError;
    if (r.status == runner::TrainResult::Status::Cancelled) return 130;
  }
  return kOk;
}

// One instance of an MPI job (cli/instances.h): instance 0 runs `train`,
// which alone prints, writes the run directory and records the run; the
// others run their replicas quietly (runner::trainInstance). Every instance
// ends the job; a failure anywhere fails it, naming the instance.
int trainAsInstance(const std::string& path, TrainingOptions o, const runner::ExportRequest& exportRequest,
                    const RunChanges& changes, base::ColorMode color, const std::shared_ptr<emu::Instances>& job) {
  if (o.threads == 0) o.threads = defaultInstanceThreads();
  std::signal(SIGTERM, onInterrupt);   // how mpirun passes its Ctrl-C on
  std::signal(SIGUSR2, onInterrupt);   // how `--instances` passes a Ctrl-C on (cli/instances.cpp)
  if (exportRequest.steps > 0) {
    if (job->rank() == 0) usage("run", "`--export-steps` runs in one process; run it without mpirun or --instances");
    return finishInstances(*job, kUsage, "");
  }
  if (job->rank() == 0) return finishInstances(*job, train(path, o, exportRequest, changes, color, job), "");
  std::signal(SIGINT, onInterrupt);
  session::Session s;
  s.setPurpose(session::Purpose::Run);
  auto file = s.readFile(path);
  // The same values as instance 0's, or the instances would train different plans.
  const bool set = !file || setValues(s, changes.set);
  const ir::ExecutionPlan* plan = file && set ? s.plan(*file, /*requireRuns=*/true) : nullptr;
  // Instance 0 reads the same script and reports its problems.
  if (plan == nullptr || s.diagnostics().hasErrors()) return finishInstances(*job, kUserError, "");
  const std::string dir = std::filesystem::absolute(path).parent_path().string();
  for (const auto& run : plan->runs) {
    runner::TrainSettings settings = trainSettings(o, s.rootText(), dir, color);
    settings.cancel = &gCancel;
    settings.instances = job;
    std::string error;
    const runner::TrainResult r = runner::trainInstance(s, run, settings, error);
    if (r.status == runner::TrainResult::Status::Failed) return finishInstances(*job, kUserError, error);
    if (r.status == runner::TrainResult::Status::Cancelled) return finishInstances(*job, 130, "");
  }
  return finishInstances(*job, kOk, "");
}

int run(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  TrainingOptions o;
  runner::ExportRequest exportRequest;  // --export-steps N DIR (steps 0: none)
  RunChanges changes;
  base::ColorMode color = base::ColorMode::Auto;
  int instanceCount = 1;   // --instances N
  ArgumentReader in(args);
  std::string v, error;
  while (in.next()) {
    if (readTrainingOption(in, o, error)) {
      if (!error.empty()) return usage("run", error);
    } else if (in.value("--export-steps", v)) {
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1000000)
        return usage("run", "`--export-steps` needs a whole number of steps from 1 to 1000000, then a directory (`--export-steps N DIR`)");
      // An option in DIR's place is a forgotten DIR (a directory named `-x` is `./-x`).
      const std::string* dir = in.following();
      if (dir == nullptr || dir->empty() || (*dir)[0] == '-')
        return usage("run", "`--export-steps " + v + "` needs a directory to write to (`--export-steps N DIR`)");
      exportRequest.steps = n;
      exportRequest.directory = *dir;
      in.skip();
    } else if (readSetOption(in, changes.set, error)) {
      if (!error.empty()) return usage("run", error);
    } else if (in.value("--name", v)) {
      if (std::string problem = store::runNameProblem(v); !problem.empty()) return usage("run", "`--name`: " + problem);
      changes.name = v;
    } else if (in.value("--tag", v)) {
      if (std::string problem = store::tagProblem(v); !problem.empty()) return usage("run", "`--tag`: " + problem);
      changes.tags.push_back(v);
    } else if (readInstancesOption(in, instanceCount, error)) {
      if (!error.empty()) return usage("run", error);
    } else if (in.value("--color", v)) {
      if (!parseColor(v, color)) return usage("run", "--color takes `auto`, `always` or `never`");
    } else if (in.isOption()) {
      return usage("run", "unknown option `" + in.word() + "`");
    } else {
      files.push_back(in.word());
    }
  }
  if (files.size() != 1) return usage("run", "`run` takes one script");
  if (!changes.name.empty() && o.resume)
    return usage("run", "`--name` names a new run; a resumed run keeps its name (`ipu runs` can show it)");
  if (instanceCount > 1 && !underMpirun()) return launchInstances(instanceCount, args);
  // Under mpirun standard output is a pseudo-terminal whatever the user's is:
  // colour only when asked (`--instances` asks when the user's is a terminal).
  if (underMpirun() && color == base::ColorMode::Auto) color = base::ColorMode::Never;
  std::string mpiError;
  const std::shared_ptr<emu::Instances> job = joinInstances(mpiError);
  if (!mpiError.empty()) {
    std::cerr << "ipu run: error: " << mpiError << "\n";
    return kUserError;
  }
  if (job == nullptr) return train(files[0], o, exportRequest, changes, color);
  return trainAsInstance(files[0], o, exportRequest, changes, color, job);
}

}  // namespace

const Command kRunCommand{"run", "run FILE",
                          "train the script's runs on the emulator (small models), with a\n"
                          "progress display and a run directory (docs/run.md)",
                          kHelp, run};

}  // namespace ipu::cli
