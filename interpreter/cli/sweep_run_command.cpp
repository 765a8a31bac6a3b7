#include "interpreter/cli/sweep_run_command.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/render.h"
#include "interpreter/base/terminal.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/instances.h"
#include "interpreter/cli/runs_command.h"
#include "interpreter/cli/training_options.h"
#include "interpreter/runner/sweep_agent.h"
#include "interpreter/runner/sweep_start.h"
#include "interpreter/session/session.h"
#include "interpreter/store/sweep_store.h"

namespace ipu::cli {

namespace {


const char* kSweepRunUsage = R"usage(usage: ipu agent SWEEP [options]
       ipu sweep FILE [NAME] [options]
       ipu sweep create FILE [NAME] [--store PATH|URI]

`ipu sweep FILE [NAME]` creates the sweep NAME declared in FILE in the run
store, or resumes it if the store has it (finished trials are kept, failed and
killed ones run again), then runs an agent on it. NAME may be left out when
FILE declares one sweep. `ipu agent SWEEP` runs one more agent on a sweep of
the store, from any process or host that reaches the store (docs/sweeps.md).
`ipu sweep create FILE [NAME]` creates (or resumes) the sweep and runs no
agent: agents join it with `ipu agent NAME`.

Each trial trains on the emulator and is recorded in the store as a run; a
sweep whose metric is a prediction of the cost model (samples_per_s,
tokens_per_s, step_time_s, pipeline_utilisation, peak_memory_bytes,
time_to_train_s) estimates each trial instead. One line per trial on stderr.
An agent waits while the sweep is paused, and while the sweep named by its
`from: best(S)` has no finished trial; it leaves when the sweep is finished
or cancelled, after --count trials, or on Ctrl-C.

  --store PATH|URI   the run store (else $IPU_STORE, else <runs-dir>/ipu.db)
  --count N          run at most N trials, then leave
  --runs-dir DIR     where trials' run directories go (default: runs)
  --steps N          at most N steps per phase of each trial
  --threads N        host threads for training (default: all)
  --script-dir DIR   (agent) the directory the sweep's script is checked in,
                     for its imports (default: the current directory)
  --artifacts store|files
                     keep trained trials' checkpoints in the run store too
                     (default for a PostgreSQL store) or only in their run
                     directories (default for SQLite); docs/tracking.md
  --instances N      run each trained trial as an MPI job of N instances on
                     this host (mpirun; `mpirun -n N ipu agent` spans hosts);
                     the trial is recorded once (docs/sweeps.md)
  --stale-after S    seconds without a heartbeat before a trial is presumed dead (default 60)
  --color auto|always|never
                     colour of the progress line (default auto: only on a terminal)
  --max-attempts N   claims of a trial whose agents keep dying before it is failed (default 3)
)usage";

std::atomic<bool> gInterrupt{false};
void onSweepInterrupt(int) { gInterrupt = true; }

struct RunOptions {
  std::vector<std::string> positional;
  std::vector<std::size_t> positionalAt;   // their indices in the arguments
  std::string store, runsDir = "runs", scriptDir;
  runner::AgentSettings agent;
  std::optional<store::ArtifactStorage> artifacts;  // --artifacts; none: the store's default
  int instances = 1;                                // --instances N (agent, sweep FILE)
  bool help = false;
};

bool parseCount(const std::string& text, long long& out) {
  try {
    std::size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used != text.size() || v < 1) return false;
    out = v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Parses the options both commands take; returns an exit code for a usage error, or -1.
int parse(const std::string& command, const std::vector<std::string>& args, RunOptions& o) {
  ArgumentReader in(args);
  while (in.next()) {
    const std::string a = in.word();
    std::string v;
    if (in.flag("-h") || in.flag("--help")) {
      o.help = true;
    } else if (in.value("--store", v)) {
      if (v.empty()) return usage(command, "`--store` needs a path or a postgresql:// URI");
      o.store = v;
    } else if (in.value("--runs-dir", v)) {
      if (v.empty()) return usage(command, "`--runs-dir` needs a directory");
      o.runsDir = v;
    } else if (in.value("--count", v)) {
      if (!parseCount(v, o.agent.count)) return usage(command, "`--count` takes a whole number of trials, at least 1");
    } else if (in.value("--steps", v)) {
      if (!parseCount(v, o.agent.stepLimit)) return usage(command, "`--steps` takes a whole number of steps, at least 1");
    } else if (in.value("--threads", v)) {
      long long n = 0;
      if (!parseCount(v, n) || n > 1024) return usage(command, "`--threads` takes a whole number from 1 to 1024");
      o.agent.threads = static_cast<int>(n);
    } else if (in.value("--stale-after", v)) {
      long long n = 0;
      if (!parseCount(v, n)) return usage(command, "`--stale-after` takes a whole number of seconds, at least 1");
      o.agent.staleAfter = static_cast<double>(n);
      o.agent.heartbeatEvery = std::min(5.0, o.agent.staleAfter / 4);
    } else if (in.value("--max-attempts", v)) {
      long long n = 0;
      if (!parseCount(v, n) || n > 1000) return usage(command, "`--max-attempts` takes a whole number from 1 to 1000");
      o.agent.maxAttempts = static_cast<int>(n);
    } else if (in.value("--artifacts", v)) {
      o.artifacts = store::parseArtifactStorage(v);
      if (!o.artifacts) return usage(command, "`--artifacts` takes `store` or `files`");
    } else if (std::string error; (command == "agent" || command == "sweep") && readInstancesOption(in, o.instances, error)) {
      if (!error.empty()) return usage(command, error);
    } else if (in.value("--color", v)) {
      if (!parseColor(v, o.agent.color)) return usage(command, "--color takes `auto`, `always` or `never`");
    } else if (command == "agent" && in.value("--script-dir", v)) {
      if (v.empty()) return usage(command, "`--script-dir` needs a directory");
      o.scriptDir = v;
    } else if (in.isOption()) {
      return usage(command, "unknown option `" + a + "`");
    } else {
      o.positional.push_back(a);
      o.positionalAt.push_back(in.at());
    }
  }
  return -1;
}

// Runs the agent and reports how it ended.
int agent(store::SweepStore& sweepStore, const std::string& location, const store::SweepRecord& sw,
          runner::AgentSettings settings, const std::string& command) {
  std::unique_ptr<store::RunStore> runStore = store::openStore(location, store::OpenMode::Existing);
  gInterrupt = false;
  settings.interrupt = &gInterrupt;
  // Under mpirun standard error is a pseudo-terminal whatever the user's is:
  // one line redrawn in place only when `--instances` saw a terminal.
  settings.progressIsTerminal = settings.instances != nullptr ? settings.color == base::ColorMode::Always : ::isatty(2) != 0;
  auto previous = std::signal(SIGINT, onSweepInterrupt);
  runner::AgentResult r;
  try {
    r = runner::runAgent(sweepStore, *runStore, sw.id, settings, std::cerr);
  } catch (...) {
    std::signal(SIGINT, previous);
    throw;
  }
  std::signal(SIGINT, previous);
  store::SweepStatus st = sweepStore.status(sw.id);
  std::cout << "sweep " << sw.name << ": this agent ran " << r.trials << " trial" << (r.trials == 1 ? "" : "s") << " ("
            << r.finished << " finished, " << r.failed << " failed); the sweep is " << store::name(st.sweep.state);
  if (st.best) {
    char metric[32];
    std::snprintf(metric, sizeof metric, "%.6g", st.best->metric);
    std::cout << "; best trial " << st.best->index << " " << sw.spec.metric.name << "=" << metric << " [";
    bool first = true;
    for (const auto& [path, value] : st.best->assignment) {
      std::cout << (first ? "" : " ") << path << "=" << value.shown();
      first = false;
    }
    std::cout << "]";
    if (st.best->runId) std::cout << " run " << *st.best->runId;
  }
  std::cout << "\n";
  switch (r.ending) {
    case runner::AgentResult::Ending::Interrupted: return kInterrupted;
    case runner::AgentResult::Ending::Cancelled:
      std::cerr << "ipu " << command << ": the sweep is cancelled\n";
      return kOk;
    default: return kOk;
  }
}

void printDiagnostics(session::Session& s) {
  base::Painter painter(base::shouldColor(base::ColorMode::Auto, 2));
  for (const auto& d : s.diagnostics().all()) {
    base::renderHuman(std::cerr, d, s.sources(), painter);
    std::cerr << "\n";
  }
  std::string summary = base::summaryLine(s.diagnostics(), painter);
  if (!summary.empty()) std::cerr << summary << "\n";
}

int agentOnce(RunOptions& o);

}  // namespace

int sweepRunCommand(const std::vector<std::string>& args, SweepAgent agentToRun) {
  RunOptions o;
  if (int code = parse("sweep", args, o); code >= 0) return code;
  if (o.help) {
    std::cout << kSweepRunUsage;
    return kOk;
  }
  if (o.positional.empty() || o.positional.size() > 2)
    return usage("sweep", std::string("`ipu sweep ") + (agentToRun == SweepAgent::None ? "create " : "") +
                              "FILE [NAME]` takes a script and, optionally, the sweep's name");
  if (agentToRun == SweepAgent::None && o.instances > 1)
    return usage("sweep", "`ipu sweep create` runs no agent: `--instances` is for `ipu sweep FILE` or `ipu agent SWEEP`");
  // Before the sweep is created: an ipu without MPI would leave it behind, unrun.
  if (o.instances > 1 && !underMpirun() && !instancesAvailable("sweep")) return kUserError;
  const std::string& path = o.positional[0];
  session::Session s;
  auto file = s.readFile(path);
  const check::CheckedProgram* program = file ? s.check(*file) : nullptr;
  if (program == nullptr || s.diagnostics().hasErrors()) {
    printDiagnostics(s);
    return kUserError;
  }
  if (!s.diagnostics().empty()) printDiagnostics(s);  // warnings
  const std::vector<sweep::SweepSpec>& sweeps = program->sweeps;
  std::vector<std::string> names;
  for (const auto& sp : sweeps) names.push_back(sp.name);
  const sweep::SweepSpec* spec = nullptr;
  if (o.positional.size() == 2) {
    for (const auto& sp : sweeps)
      if (sp.name == o.positional[1]) spec = &sp;
    if (spec == nullptr) {
      std::string hint = base::didYouMean(o.positional[1], names);
      std::cerr << "ipu sweep: error: `" << path << "` declares no sweep `" << o.positional[1] << "`"
                << (hint.empty() ? "" : "; " + hint) << "\n";
      return kUserError;
    }
  } else if (sweeps.size() == 1) {
    spec = &sweeps.front();
  } else if (sweeps.empty()) {
    std::cerr << "ipu sweep: error: `" << path << "` declares no sweep\n  help: declare one with `sweep NAME for TRAINING { ... }` (docs/sweeps.md)\n";
    return kUserError;
  } else {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return usage("sweep", "`" + path + "` declares several sweeps (" + list + "): name one, `ipu sweep " + path + " " + names.front() + "`");
  }
  o.agent.scriptPath = path;
  o.agent.runsRoot = o.runsDir;
  const std::string location = storeLocation(o.store, o.runsDir);
  try {
    auto st = store::openSweepStore(location, store::OpenMode::Create);
    // A new sweep whose `from:` has nothing to start from could run no trial:
    // say so without recording a sweep that would stay running, empty.
    if (spec->from && !st->sweep(spec->name)) {
      std::unique_ptr<store::RunStore> runs = store::openStore(location, store::OpenMode::Create);
      const runner::TrialStart start = runner::resolveTrialStart(*spec->from, *st, *runs);
      if (start.status == runner::TrialStart::Status::Unavailable) {
        std::cerr << "ipu sweep: error: " << runner::unavailableStart(spec->name, *spec->from, start) << "\n";
        return kUserError;
      }
    }
    store::CreatedSweep c = st->createOrResumeSweep(*spec, s.rootText(), store::nowSeconds());
    if (c.created)
      std::cerr << "sweep " << c.sweep.name << ": created in " << st->location() << "\n";
    else
      std::cerr << "sweep " << c.sweep.name << ": resumed in " << st->location()
                << (c.requeued > 0 ? " (" + std::to_string(c.requeued) + " failed or killed trials queued again)" : std::string())
                << "\n";
    if (agentToRun == SweepAgent::None) {
      std::cout << "sweep " << c.sweep.name << " is in " << st->location() << "; agents join with `ipu agent "
                << c.sweep.name << "`\n";
      return kOk;
    }
    if (o.instances > 1 && !underMpirun()) {
      // The agent as an MPI job (`ipu agent SWEEP --instances N`): the same
      // options, the sweep by name, its store, and the script's directory,
      // where the stored script's imports resolve.
      std::vector<std::string> agentArgs{c.sweep.name, "--store", location, "--script-dir",
                                         std::filesystem::path(path).parent_path().empty()
                                             ? std::string(".")
                                             : std::filesystem::path(path).parent_path().string()};
      for (std::size_t i = 0; i < args.size(); ++i)
        if (std::find(o.positionalAt.begin(), o.positionalAt.end(), i) == o.positionalAt.end() && args[i] != "--store" &&
            args[i].rfind("--store=", 0) != 0 && (i == 0 || args[i - 1] != "--store"))
          agentArgs.push_back(args[i]);
      return launchInstances(o.instances, agentArgs, "agent");
    }
    o.agent.artifacts = o.artifacts.value_or(store::defaultArtifactStorage(location));
    return agent(*st, location, c.sweep, o.agent, "sweep");
  } catch (const store::StoreError& e) {
    std::cerr << "ipu sweep: error: " << e.what() << "\n";
    return kUserError;
  } catch (const std::runtime_error& e) {
    std::cerr << "ipu sweep: error: " << e.what() << "\n";
    return kUserError;
  }
}

int agentCommand(const std::vector<std::string>& args) {
  RunOptions o;
  if (int code = parse("agent", args, o); code >= 0) return code;
  if (o.help) {
    std::cout << kSweepRunUsage;
    return kOk;
  }
  if (o.positional.size() != 1) return usage("agent", "`ipu agent SWEEP` takes the name of one sweep of the store");
  if (o.instances > 1 && !underMpirun()) return launchInstances(o.instances, args, "agent");
  std::string mpiError;
  const std::shared_ptr<emu::Instances> job = joinInstances(mpiError);
  if (!mpiError.empty()) {
    std::cerr << "ipu agent: error: " << mpiError << "\n";
    return kUserError;
  }
  if (job == nullptr) return agentOnce(o);
  // One MPI job: instance 0 is the agent, the others train its trials with it.
  if (o.agent.threads == 0) o.agent.threads = defaultInstanceThreads();
  if (o.agent.color == base::ColorMode::Auto) o.agent.color = base::ColorMode::Never;
  std::signal(SIGTERM, onSweepInterrupt);  // how mpirun passes its Ctrl-C on
  std::signal(SIGUSR2, onSweepInterrupt);  // how `--instances` passes a Ctrl-C on (cli/instances.cpp)
  if (job->rank() != 0) {
    std::signal(SIGINT, onSweepInterrupt);
    o.agent.interrupt = &gInterrupt;
    runner::followTrials(*job, o.agent);
    return finishInstances(*job, kOk, "");
  }
  o.agent.instances = job;
  int code = kUserError;
  {
    // The others leave with this instance, however it leaves.
    struct EndTrials {
      emu::Instances& job;
      ~EndTrials() { runner::endTrials(job); }
    } end{*job};
    code = agentOnce(o);
  }
  return finishInstances(*job, code, "");
}

namespace {

int agentOnce(RunOptions& o) {
  const std::string location = storeLocation(o.store, o.runsDir);
  try {
    auto st = store::openSweepStore(location, store::OpenMode::Existing);
    std::optional<store::SweepRecord> sw = st->sweep(o.positional[0]);
    if (!sw) {
      std::vector<std::string> names;
      for (const auto& x : st->listSweeps()) names.push_back(x.name);
      std::string hint = base::didYouMean(o.positional[0], names);
      std::cerr << "ipu agent: error: the store `" << st->location() << "` has no sweep `" << o.positional[0] << "`"
                << (hint.empty() ? "" : "; " + hint) << "\n  help: `ipu sweep FILE NAME` creates it; `ipu sweep list` lists the store's\n";
      return kUserError;
    }
    // The stored script, as if it were in --script-dir: its imports resolve there.
    const std::string dir = o.scriptDir.empty() ? std::string(".") : o.scriptDir;
    o.agent.scriptPath = (std::filesystem::path(dir) / (sw->name + ".ipu")).string();
    o.agent.runsRoot = o.runsDir;
    o.agent.artifacts = o.artifacts.value_or(store::defaultArtifactStorage(location));
    return agent(*st, location, *sw, o.agent, "agent");
  } catch (const store::StoreError& e) {
    std::cerr << "ipu agent: error: " << e.what() << "\n";
    return kUserError;
  } catch (const std::runtime_error& e) {
    std::cerr << "ipu agent: error: " << e.what() << "\n";
    return kUserError;
  }
}

}  // namespace

const Command kAgentCommand{"agent", "agent SWEEP", "run one more agent on a sweep of the run store (docs/sweeps.md)",
                            kSweepRunUsage, agentCommand};

}  // namespace ipu::cli
