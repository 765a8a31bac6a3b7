// `ipu repl [FILE]`: the interactive session (docs/repl.md); its `:run`
// trains with the same options as `ipu run`.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/training_options.h"
#include "interpreter/repl/repl.h"

namespace ipu::cli {

namespace {

const char* kHelp = R"(usage: ipu repl [FILE] [options]

An interactive session: declarations accumulate, expressions print their
value, and :plan :estimate :mem :run :doc ask about the workspace
(docs/repl.md). FILE, if given, is loaded first.

options (for :run, as `ipu run` takes them):
  --runs-dir DIR         where run directories go (default: runs)
  --resume[=DIR]         continue the latest run of the training (or DIR)
  --steps N              at most N steps per phase
  --threads N            host threads for the virtual IPUs (default: all)
  --checkpoint-every N   steps between checkpoints (default: 100)
  --artifacts store|files
                         checkpoints' bytes in the run store too, or only in
                         the run directory (default: store on PostgreSQL)
  --store PATH|URI       the run store (default: $IPU_STORE, else DIR/ipu.db)
  --no-store             record nothing in the run store
  --color auto|always|never
                         colour (default auto: only on a terminal; NO_COLOR disables)
)";

int run(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  TrainingOptions o;
  base::ColorMode color = base::ColorMode::Auto;
  ArgumentReader in(args);
  std::string v, error;
  while (in.next()) {
    if (readTrainingOption(in, o, error)) {
      if (!error.empty()) return usage("repl", error);
    } else if (in.value("--color", v)) {
      if (!parseColor(v, color)) return usage("repl", "--color takes `auto`, `always` or `never`");
    } else if (in.isOption()) {
      return usage("repl", "unknown option `" + in.word() + "`");
    } else {
      files.push_back(in.word());
    }
  }
  if (files.size() > 1) return usage("repl", "`repl` takes at most one script");
  repl::ReplOptions ro;
  if (!files.empty()) ro.file = files[0];
  ro.color = color;
  ro.trainer = [o, color](repl::Workspace::Planned& planned, const std::atomic<bool>& cancel) {
    std::string storeError;
    auto runStore = openRecordingStore(o.store, storeError);
    if (!storeError.empty()) std::cerr << "warning: not recorded in the run store: " << storeError << "\n";
    bool ok = true;
    for (const auto& run : planned.plan->runs) {
      runner::TrainSettings t = trainSettings(o, planned.session->rootText(), std::filesystem::current_path().string(), color);
      t.cancel = &cancel;
      t.store = runStore.get();
      runner::TrainResult r = runner::train(*planned.session, run, t, std::cerr, ::isatty(2) != 0);
      reportStoreRecord(r, runStore.get());
      std::cerr << repl::Workspace::diagnostics(planned, base::Painter(base::shouldColor(color, 2)));
      planned.session->diagnostics().clear();
      printTrainResult(r, run.name, color);
      ok = ok && r.status != runner::TrainResult::Status::Failed;
      if (r.status == runner::TrainResult::Status::Cancelled) break;
    }
    return ok;
  };
  return repl::runRepl(ro);
}

}  // namespace

const Command kReplCommand{"repl", "repl [FILE]",
                           "interactive session: declarations accumulate, expressions print\n"
                           "their value, :plan :estimate :mem :run :doc (see docs/repl.md)",
                           kHelp, run};

}  // namespace ipu::cli
