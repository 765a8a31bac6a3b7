// `ipu search FILE`: for each phase of the script's runs, the fastest mappings
// of its model onto its pod at its global batch that fit (interpreter/search),
// how the script's own mapping compares, a Pareto table of IPUs against
// throughput, and, when nothing fits, why. Options and output are documented
// in docs/search.md.
// `args` are the words after `search`. Returns the process exit code: 0 when
// every searched phase has a mapping that fits, 1 when the script has errors
// or some phase has none, 2 on a usage error.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "interpreter/base/render.h"
#include "interpreter/base/source.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/base/terminal.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/plan/planner.h"
#include "interpreter/search/script_edit.h"
#include "interpreter/search/search.h"
#include "interpreter/session/session.h"
#include "runtime/cost/cost_model.h"
#include "runtime/ir/mapping_fields.h"

#include "interpreter/cli/command.h"

namespace ipu::cli {

namespace {


const char* kHelp = R"(usage: ipu search FILE [options]

Search the mappings of each phase's model onto its pod at its global batch and
print the fastest that fit, how the script's mapping compares, and a Pareto
table of IPUs against throughput (docs/search.md).

options:
  --run NAME            search this run only (default: every run)
  --phase NAME          search this phase only (default: every phase)
  --objective OBJ       throughput (default), time_to_train, throughput_per_ipu (or cost)
  --rank HOW            conservative (default: by the likely range's lower end) or expected
                        (by the cost model's estimate)
  --max-ipus N          use at most N IPUs (default: the pod's)
  --headroom P          keep P of each IPU's memory free: 10% or 0.1 (default 0)
  --fix KEY=VALUE       fix a choice: shard, pipeline, replicas, micro_batch, recompute,
                        optimizer_state, weights, replicated_tensor_sharding, phases, split
                        (repeatable)
  --top N               show the N best (default 5)
  --threads N           worker threads (default: one per core); the answer does not depend on it
  --time-limit T        stop after T (seconds, or 90s, 5m) and show the best found so far;
                        Ctrl-C does the same (and --write/--apply are then not done)
  --json                machine-readable output (docs/search.md)
  --write FILE          write the script with the best mappings put in to FILE (a new file)
  --apply               put the best mappings into the script itself (written as `ipu fmt` writes)
  --color auto|always|never
)";

// Ctrl-C while searching: the search stops between waves (search::Options::interrupt).
std::atomic<bool> gSearchInterrupt{false};
void onSearchInterrupt(int) {
  gSearchInterrupt = true;
  std::signal(SIGINT, SIG_DFL);   // a second Ctrl-C ends the process
}
// Installs the handler for the command's lifetime and restores the one before.
struct InterruptScope {
  InterruptScope() : previous(std::signal(SIGINT, onSearchInterrupt)) {}
  ~InterruptScope() { std::signal(SIGINT, previous); }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  void (*previous)(int);
};

int usage(const std::string& message) {
  std::cerr << "ipu search: " << message << "\nusage: ipu search FILE [options]  (`ipu search --help` lists them)\n";
  return kUsage;
}

std::string commas(double x) {
  long long v = std::llround(x);
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// Throughput: whole numbers from 100 up, else three significant digits.
std::string rate(double x) { return x >= 100 ? commas(x) : x >= 10 ? fixed(x, 1) : fixed(x, 2); }

std::string duration(double s) {
  if (s < 120) return fixed(s, 1) + " s";
  if (s < 7200) return fixed(s / 60, 1) + " min";
  if (s < 3 * 86400) return fixed(s / 3600, 1) + " h";
  return fixed(s / 86400, 1) + " days";
}

std::string gib(double bytes) { return fixed(bytes / (1 << 20), 1) + " MiB"; }

std::string rts(const search::Candidate& c) {
  if (c.rtsOptimizerState && c.rtsWeights) return "w+state";
  if (c.rtsOptimizerState) return "state";
  if (c.rtsWeights) return "weights";
  return "-";
}

std::string phased(const search::Candidate& c) {
  if (c.weightsStreaming) return "per layer";
  return c.phases > 1 ? std::to_string(c.phases) : "-";
}

std::string layersPerIpu(const search::Candidate& c) {
  std::string s;
  for (std::size_t i = 0; i < c.layersPerIpu.size(); ++i) s += (i ? "," : "") + std::to_string(c.layersPerIpu[i]);
  return s.empty() ? "-" : s;
}

std::string pad(const std::string& s, std::size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

struct Row {
  std::vector<std::string> cells;
};

void printTable(std::ostream& os, const std::vector<std::string>& header, const std::vector<Row>& rows,
                const std::vector<bool>& right, const base::Painter& painter) {
  std::vector<std::size_t> w(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.cells.size() && i < w.size(); ++i) w[i] = std::max(w[i], r.cells[i].size());
  std::string line = " ";
  for (std::size_t i = 0; i < header.size(); ++i) line += " " + pad(header[i], w[i], right[i]);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  os << painter.paint(base::Style::Bold, line) << "\n";
  for (const auto& r : rows) {
    std::string l = " ";
    for (std::size_t i = 0; i < r.cells.size(); ++i) l += " " + pad(r.cells[i], w[i], right[i]);
    while (!l.empty() && l.back() == ' ') l.pop_back();
    os << l << "\n";
  }
}

std::string phased(const search::Candidate& c);

std::string candidateLine(const search::Candidate& c) {
  std::string s = "t " + std::to_string(c.shard) + ", p " + std::to_string(c.pipeline) + ", r " + std::to_string(c.replicas) +
                  ", micro batch " + std::to_string(c.microBatch) + " x GA " + std::to_string(c.gradientAccumulation);
  if (c.recompute != ir::Recompute::None) s += std::string(", recompute ") + ir::name(c.recompute);
  if (c.optimizerStateStreaming) s += ", state streaming";
  if (c.phases > 1 || c.weightsStreaming) s += ", phased " + phased(c);
  return s;
}

// The step time's causes, in the order `ipu estimate` gives them.
struct Cause {
  const char* text;   // as printed
  const char* json;   // as in `ipu estimate --json`'s breakdown_s
};
std::vector<std::pair<Cause, double>> causes(const cost::Breakdown& b) {
  return {{{"compute", "compute"}, b.compute},
          {{"recompute", "recompute"}, b.recompute},
          {{"pipeline fill and drain", "pipeline_fill_drain"}, b.pipelineFillDrain},
          {{"stage imbalance", "stage_imbalance"}, b.stageImbalance},
          {{"exchange", "exchange"}, b.exchange},
          {{"gradient all-reduce", "all_reduce"}, b.allReduce},
          {{"RTS collectives", "rts_collectives"}, b.rtsCollectives},
          {{"collectives via hosts", "across_instances"}, b.acrossInstances},
          {{"Streaming Memory", "streaming"}, b.streaming},
          {{"weight update", "optimizer"}, b.optimizer},
          {{"host I/O", "host_io"}, b.hostIo},
          {{"fixed per step", "overhead"}, b.overhead}};
}

// The short names of the regimes a candidate is outside the calibration rows in.
std::string regimesOf(const search::Candidate& c) {
  std::string s;
  for (const auto& f : c.regimes) s += (s.empty() ? "" : ",") + std::string(cost::name(f.regime));
  return s.empty() ? "-" : s;
}

std::string likely(const search::Candidate& c) {
  return c.throughputHigh > 0 ? rate(c.throughputLow) + "-" + rate(c.throughputHigh) : "-";
}

// A candidate's settings under the names of the table of mapping fields (the
// plan JSON's and the language's), then what the search adds.
ir::Json toJson(const check::PhaseSpec& phase, const search::Candidate& c) {
  ir::Json settings = ir::Json::object();
  ir::writeMappingJson(search::mappingOf(phase, c).mapping, settings);
  ir::Json& j = settings;
  j["micro_batch"] = c.microBatch;
  j["gradient_accumulation"] = c.gradientAccumulation;
  j["split"] = search::name(c.split);
  j["layers_per_ipu"] = c.layersPerIpu;
  ir::Json stages = ir::Json::array();
  for (const auto& [ipu, layers] : c.stages) stages.push(ir::Json({{"ipu", ipu}, {"layers", layers}}));
  j["stages"] = stages;
  j["ipus_used"] = c.ipusUsed;
  j["fits"] = c.fits;
  j["step_time_s"] = c.stepTime;
  j["samples_per_s"] = c.samplesPerSecond;
  j["tokens_per_s"] = c.tokensPerSecond > 0 ? ir::Json(c.tokensPerSecond) : ir::Json();
  j["time_to_train_s"] = c.timeToTrain;
  j["peak_memory_bytes"] = c.peakMemoryBytes;
  j["memory_capacity_bytes"] = c.capacityBytes;
  j["peak_ipu"] = c.peakIpu;
  j["peak_component"] = c.peakComponent;
  j["peak_component_bytes"] = c.peakComponentBytes;
  j["streaming_bytes"] = c.streamingBytes;
  j["streaming_capacity_bytes"] = c.streamingCapacityBytes;
  ir::Json interval = ir::Json::array();
  interval.push(c.throughputLow);
  interval.push(c.throughputHigh);
  j["throughput_interval"] = c.throughputHigh > 0 ? interval : ir::Json();
  j["ranked_step_time_s"] = c.rankedStep;
  ir::Json regimes = ir::Json::array(), warnings = ir::Json::array();
  for (const auto& f : c.regimes) {
    regimes.push(cost::name(f.regime));
    warnings.push(f.message);
  }
  j["regimes"] = regimes;
  j["coverage_warnings"] = warnings;
  ir::Json bd = ir::Json::object();
  for (const auto& [cause, seconds] : causes(c.breakdown)) bd[cause.json] = seconds;
  j["breakdown_s"] = bd;
  return j;
}

struct Args {
  std::string file, run, phase, write;
  double timeLimit = 0;   // seconds; 0: none
  bool json = false;
  bool apply = false;  // --apply: the script itself is the file written
  search::Options options;
  // Which of the options a mapping's `search { }` block also sets were given:
  // those override the block's (search::optionsOf).
  bool objectiveGiven = false, maxIpusGiven = false, headroomGiven = false;
  base::ColorMode color = base::ColorMode::Auto;
};

}  // namespace

namespace {

// Something is at `path` (a file, a directory, a symlink, even a dangling one):
// --write makes a new file and never writes through or over it.
bool present(const std::string& path) {
  std::error_code ec;
  return std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::not_found && !ec;
}

// The written script checked as the file it becomes, and each written phase
// planned and estimated to the figure the search reported for it: a wrong
// edit must never reach the disk. Empty when it holds, else what does not;
// `checks` says whether the text checked (when it does not, the file's place
// may be why: its imports resolve from its directory).
std::string verifyWritten(const search::ScriptEdit& edit, const std::string& target, bool& checks) {
  session::Session v;
  const check::CheckedProgram* checked = v.check(v.addSource(target, edit.text));
  checks = checked != nullptr;
  if (checked == nullptr) {
    std::string errors;
    for (const auto& d : v.diagnostics().all())
      if (d.severity == base::Severity::Error) errors += base::renderHuman(d, v.sources());
    return "the script with the answer put in does not check as `" + target + "`:\n" + errors;
  }
  for (const auto& w : edit.phases) {
    const check::PhaseSpec* ph = nullptr;
    for (const auto& run : checked->runs)
      for (const auto& p : run.phases)
        if (run.name == w.run && p.name == w.phase) ph = &p;
    if (ph == nullptr) return "phase `" + w.phase + "` of `" + w.run + "` is missing from the written script";
    if (ph->mapping->name != w.mapping || ph->batch.microBatch != w.microBatch ||
        ph->batch.gradientAccumulation != w.gradientAccumulation || ph->batch.globalBatch != w.globalBatch)
      return "phase `" + w.phase + "` of `" + w.run + "` reads back as mapping `" + ph->mapping->name + "`, micro batch " +
             std::to_string(ph->batch.microBatch) + " x accumulation " + std::to_string(ph->batch.gradientAccumulation) +
             ", not `" + w.mapping + "`, " + std::to_string(w.microBatch) + " x " + std::to_string(w.gradientAccumulation);
    const ir::PhasePlan plan = plan::planPhase(*ph, *ph->mapping, ph->mapping->mapping, v.sources(), nullptr);
    const cost::PhaseEstimate e = cost::estimatePhase(plan);
    const double want = w.candidate->samplesPerSecond;
    if (!e.ok || std::abs(e.samplesPerSecond - want) > 1e-9 * want)
      return "phase `" + w.phase + "` of `" + w.run + "` estimates to " + fixed(e.samplesPerSecond, 3) +
             " samples/s in the written script, not the " + fixed(want, 3) + " the search reported";
  }
  return "";
}

// --write FILE and --apply: the script with each searched phase's best
// mapping put in (search/script_edit.h), verified, then written as `ipu fmt`
// writes (cli/output_file.h: whole or not at all, mode and links kept).
int writeFound(session::Session& s, base::FileId file, const Args& a,
               const std::vector<search::FoundMapping>& found, const std::vector<std::string>& unfound) {
  const std::string target = a.apply ? a.file : a.write;
  if (!unfound.empty()) {
    std::string which;
    for (const auto& u : unfound) which += (which.empty() ? "" : ", ") + u;
    std::cerr << "ipu search: nothing written to `" << target << "`: no mapping fits " << which
              << (found.empty() ? "" : " (`--phase` searches the others alone)") << "\n";
    return kUserError;
  }
  // The phases as the script writes them: a phase whose mapping is declared
  // with `search { }` was given the block's answer, batch included, by the check.
  session::Session asWritten;
  asWritten.setSearches(session::Session::Searches::AsWritten);
  const base::FileId root = asWritten.addSource(s.sources().file(file).path(), s.sources().file(file).text());
  const check::CheckedProgram* written = asWritten.check(root);
  std::vector<search::FoundMapping> edits;
  for (const auto& f : found)
    for (std::size_t r = 0; written != nullptr && r < written->runs.size(); ++r)
      for (const auto& ph : written->runs[r].phases)
        if (written->runs[r].name == f.run && ph.name == f.phase->name) edits.push_back({f.run, f.phase, f.candidate, &ph});
  if (written == nullptr || edits.size() != found.size()) {
    std::cerr << "ipu search: internal error: nothing written to `" << target
              << "`: the script's phases do not check again as written (please report this, with the script)\n";
    return kUserError;
  }
  search::ScriptEdit edit = search::putFoundMappings(asWritten.sources(), root, *written, edits);
  if (!edit.ok) {
    std::cerr << "ipu search: nothing written to `" << target << "`: " << edit.problem << "\n";
    return kUserError;
  }
  bool checks = false;
  if (const std::string problem = verifyWritten(edit, target, checks); !problem.empty()) {
    if (checks)
      std::cerr << "ipu search: internal error: nothing written to `" << target << "`: " << problem
                << "\n(please report this, with the script)\n";
    else
      std::cerr << "ipu search: nothing written: " << problem
                << "(its imports and files are found from its own directory: write it beside the script, or "
                   "report this with the script if it is there)\n";
    return kUserError;
  }
  const std::string& original = s.sources().file(file).text();
  if (a.apply) {
    // Another program (an editor) may have changed the script while it was searched.
    base::FileText now = base::readSourceFile(a.file);
    if (now.status != base::FileText::Status::Ok || now.text != original) {
      std::cerr << "ipu search: `" << a.file << "` changed while it was searched; it was left as it is now (search again)\n";
      return kUserError;
    }
  } else if (present(target)) {
    std::cerr << "ipu search: `" << target << "` appeared while searching; --write makes a new file, so it was left alone\n";
    return kUserError;
  }
  std::string error;
  if (!replaceFile(target, edit.text, error)) {
    std::cerr << "ipu search: " << error << "\n";  // the writer's sentence names the file
    return kUserError;
  }
  // With --json, stdout holds the JSON document alone.
  std::ostream& said = a.json ? std::cerr : std::cout;
  said << (a.apply ? "updated " : "wrote ") << target << (edit.text == original ? " (unchanged)" : "") << ":\n";
  for (const auto& c : edit.changes) said << "  - " << c << "\n";
  return kOk;
}

int searchCommand(const std::vector<std::string>& args) {
  Args a;
  ArgumentReader in(args);
  const char* const withValue[] = {"--run",  "--phase", "--write", "--objective", "--rank",       "--max-ipus",
                                   "--headroom", "--fix", "--top", "--color", "--threads", "--time-limit"};
  while (in.next()) {
    if (in.flag("--json")) {
      a.json = true;
      continue;
    }
    if (in.flag("--apply")) {
      a.apply = true;
      continue;
    }
    std::string v;
    const char* arg = nullptr;
    for (const char* name : withValue)
      if (in.value(name, v)) {
        arg = name;
        break;
      }
    if (arg == nullptr) {
      if (in.isOption()) return usage("unknown option `" + in.word() + "`");
      if (!a.file.empty()) return usage("`search` takes one script");
      a.file = in.word();
      continue;
    }
    const std::string name = arg;
    if (v.empty()) return usage("`" + name + "` needs a value");
    if (name == "--run") a.run = v;
    else if (name == "--phase") a.phase = v;
    else if (name == "--write") a.write = v;
    else if (name == "--objective") {
      auto o = search::objectiveNamed(v);
      if (!o) return usage("--objective takes throughput, time_to_train or throughput_per_ipu (cost), not `" + v + "`");
      a.options.objective = *o;
      a.objectiveGiven = true;
    } else if (name == "--rank") {
      auto r = search::rankNamed(v);
      if (!r) return usage("--rank takes conservative or expected, not `" + v + "`");
      a.options.rank = *r;
    } else if (name == "--max-ipus" || name == "--top" || name == "--threads") {
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      const long most = name == "--threads" ? 1024 : (1 << 20);
      if (*end != '\0' || n < 1 || n > most)
        return usage(name + " takes a whole number from 1 to " + std::to_string(most) + ", not `" + v + "`");
      (name == "--top" ? a.options.top : name == "--threads" ? a.options.threads : a.options.maxIpus) = static_cast<int>(n);
      a.maxIpusGiven = a.maxIpusGiven || name == "--max-ipus";
    } else if (name == "--time-limit") {
      std::string t = v;
      double unit = 1;
      if (!t.empty() && (t.back() == 's' || t.back() == 'm')) {
        unit = t.back() == 'm' ? 60 : 1;
        t.pop_back();
      }
      char* end = nullptr;
      const double x = std::strtod(t.c_str(), &end);
      if (t.empty() || *end != '\0' || !std::isfinite(x) || x <= 0 || x * unit > 1e7)
        return usage("--time-limit takes a time such as 30, 90s or 5m, not `" + v + "`");
      a.timeLimit = x * unit;
    } else if (name == "--headroom") {
      std::string t = v;
      bool percent = !t.empty() && t.back() == '%';
      if (percent) t.pop_back();
      char* end = nullptr;
      double x = std::strtod(t.c_str(), &end);
      if (t.empty() || *end != '\0' || !std::isfinite(x)) return usage("--headroom takes a share such as 10% or 0.1, not `" + v + "`");
      if (percent) x /= 100;
      if (x < 0 || x >= 1) return usage("--headroom must be at least 0 and below 100%, not `" + v + "`");
      a.options.headroom = x;
      a.headroomGiven = true;
    } else if (name == "--fix") {
      if (auto problem = search::applyFix(a.options.fixed, v)) return usage(*problem);
    } else if (name == "--color") {
      if (!parseColor(v, a.color)) return usage("--color takes `auto`, `always` or `never`");
    }
  }
  if (a.file.empty()) return usage("`search` needs a script");
  if (a.apply && !a.write.empty()) return usage("`--write` and `--apply` exclude each other: write a new file, or the script itself");
  if (!a.write.empty() && present(a.write)) {
    std::cerr << "ipu search: `" << a.write << "` exists; --write makes a new file (remove it or choose another name)\n";
    return kUserError;
  }

  session::Session s;
  auto file = s.readFile(a.file);
  const check::CheckedProgram* program = file ? s.check(*file) : nullptr;
  base::Painter errPainter(base::shouldColor(a.color, 2));
  auto printDiagnostics = [&]() {
    for (const auto& d : s.diagnostics().all()) {
      base::renderHuman(std::cerr, d, s.sources(), errPainter);
      std::cerr << "\n";
    }
  };
  if (program == nullptr) {
    printDiagnostics();
    return kUserError;
  }
  if (program->runs.empty()) {
    std::cerr << "ipu search: `" << a.file << "` declares no training to search; declare `training NAME { mapping: ..., phase ... }`\n";
    return kUserError;
  }
  bool runFound = a.run.empty(), phaseFound = a.phase.empty();
  for (const auto& run : program->runs) {
    if (!a.run.empty() && run.name != a.run) continue;
    runFound = true;
    for (const auto& ph : run.phases)
      if (ph.name == a.phase) phaseFound = true;
  }
  if (!runFound) {
    std::string names;
    for (const auto& run : program->runs) names += (names.empty() ? "" : ", ") + run.name;
    return usage("no run `" + a.run + "` in `" + a.file + "` (runs: " + names + ")");
  }
  if (!phaseFound) return usage("no phase `" + a.phase + "` in the searched runs");

  const bool progressBar = ::isatty(2) != 0 && !a.json;
  // The first Ctrl-C stops the search between waves with the best found so
  // far; a second ends the process.
  gSearchInterrupt = false;
  InterruptScope interruptScope;
  const auto deadline = a.timeLimit > 0 ? std::optional<std::chrono::steady_clock::time_point>(
                                              std::chrono::steady_clock::now() +
                                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(a.timeLimit)))
                                        : std::nullopt;
  base::Painter painter(base::shouldColor(a.color, 1));
  ir::Json out = ir::Json::object();
  out["format"] = "ipu-search/1";
  out["script"] = a.file;
  out["objective"] = search::name(a.options.objective);
  out["phases"] = ir::Json::array();
  bool allFit = true;
  std::vector<search::FoundMapping> found;  // for --write and --apply: the best of each searched phase
  std::vector<std::string> unfound;         // ... and the phases that have none
  for (const auto& run : program->runs) {
    if (!a.run.empty() && run.name != a.run) continue;
    for (const auto& ph : run.phases) {
      if (!a.phase.empty() && ph.name != a.phase) continue;
      search::Options o = a.options;
      if (ph.mapping != nullptr && ph.mapping->search) {
        // The mapping's `search { }` block: its objective, limits and fixed
        // settings, as `ipu check` searched it, unless given here.
        const search::Options block = search::optionsOf(*ph.mapping);
        if (!a.objectiveGiven) o.objective = block.objective;
        if (!a.maxIpusGiven) o.maxIpus = block.maxIpus;
        if (!a.headroomGiven) o.headroom = block.headroom;
        o.fixed = block.fixed;
        o.fixed.merge(a.options.fixed);
      }
      o.deadline = deadline;
      o.interrupt = &gSearchInterrupt;
      bool drew = false;
      if (progressBar)
        o.progress = [&](const search::Progress& p) {
          if (p.seconds < 0.5) return;
          // The bar fills with the candidates planned against those the
          // bounds would still have planned: the rest are the time left.
          const int width = 30;
          const double done = p.evaluated + p.evaluationsLeft > 0
                                  ? static_cast<double>(p.evaluated) / static_cast<double>(p.evaluated + p.evaluationsLeft)
                                  : 0;
          const int filled = std::clamp(static_cast<int>(width * done), 0, width);
          std::cerr << "\r  [" << std::string(static_cast<std::size_t>(filled), '#')
                    << std::string(static_cast<std::size_t>(width - filled), '.') << "] " << commas(static_cast<double>(p.evaluated))
                    << " evaluated, " << commas(static_cast<double>(p.pruned)) << " pruned"
                    << (p.etaSeconds >= 0 ? ", about " + fixed(std::max(1.0, p.etaSeconds), 0) + " s left" : std::string())
                    << "   " << std::flush;
          drew = true;
        };
      search::PhaseResult r = search::searchPhase(ph, s.checker()->evaluator(), s.sources(), o);
      if (drew) std::cerr << "\r" << std::string(100, ' ') << "\r" << std::flush;
      if (r.stopped == search::StopReason::Interrupted) a.write.clear(), a.apply = false;
      const double perSecond = r.seconds > 0 ? static_cast<double>(r.counts.space) / r.seconds : 0;
      if (!r.error.empty()) {
        allFit = false;
        unfound.push_back("phase `" + ph.name + "` of `" + run.name + "`");
        if (a.json) out["phases"].push_back({{"run", run.name}, {"phase", ph.name}, {"error", r.error}});
        else std::cerr << "ipu search: run `" << run.name << "`, phase `" << ph.name << "`: " << r.error << "\n";
        continue;
      }
      if (r.top.empty()) {
        allFit = false;
        unfound.push_back("phase `" + ph.name + "` of `" + run.name + "`");
      } else {
        found.push_back({run.name, &ph, r.top.front()});
      }

      if (a.json) {
        ir::Json j = ir::Json::object();
        j["run"] = run.name;
        j["phase"] = ph.name;
        j["model"] = ph.model->name;
        j["pod"] = ph.mapping->pod.name;
        j["pod_ipus"] = r.podIpus;
        j["max_ipus"] = r.maxIpus;
        j["global_batch"] = r.globalBatch;
        j["objective"] = search::name(o.objective);
        j["headroom"] = o.headroom;
        j["counts"] = {{"space", r.counts.space},
                       {"evaluated", r.counts.evaluated},
                       {"pruned_by_bound", r.counts.pruned},
                       {"pruned_by_memory", r.counts.prunedMemory},
                       {"rejected_for_memory", r.counts.rejectedMemory},
                       {"not_searched", r.counts.notSearched}};
        j["stopped"] = r.stopped == search::StopReason::None ? ir::Json() : ir::Json(search::name(r.stopped));
        j["seconds"] = r.seconds;
        j["candidates_per_s"] = perSecond;
        j["top"] = ir::Json::array();
        for (const auto& c : r.top) j["top"].push_back(toJson(ph, c));
        j["pareto"] = ir::Json::array();
        for (std::size_t k = 0; k < r.pareto.size(); ++k) {
          ir::Json row = toJson(ph, r.pareto[k]);
          row["at_most_ipus"] = r.paretoLimits[k];
          j["pareto"].push_back(row);
        }
        j["rank"] = search::name(r.rank);
        if (r.declared) {
          j["declared"] = toJson(ph, *r.declared);
          j["declared"]["name"] = ph.mapping->name;
          if (!r.top.empty() && r.declared->fits && r.top.front().stepTime > 0) {
            j["speedup_over_declared"] = r.declared->stepTime / r.top.front().stepTime;
            j["ranked_speedup_over_declared"] = r.declared->rankedStep / r.top.front().rankedStep;
          }
        }
        j["assumptions"] = ir::Json::array();
        for (const auto& check : r.assumptions) {
          ir::Json aj = ir::Json::object();
          aj["assumption"] = cost::name(check.range.assumption);
          aj["nominal"] = check.range.nominal;
          aj["low"] = check.range.low;
          aj["high"] = check.range.high;
          aj["winner_holds_at_low"] = check.holdsAtLow;
          aj["winner_holds_at_high"] = check.holdsAtHigh;
          aj["best_at_low"] = check.bestAtLow ? toJson(ph, *check.bestAtLow) : ir::Json();
          aj["best_at_high"] = check.bestAtHigh ? toJson(ph, *check.bestAtHigh) : ir::Json();
          j["assumptions"].push_back(aj);
        }
        if (r.top.empty()) {
          if (r.leastMemory) j["least_memory"] = toJson(ph, *r.leastMemory);
          j["relax"] = r.relax;
        }
        out["phases"].push_back(j);
        continue;
      }

      std::cout << painter.paint(base::Style::Bold, "run `" + run.name + "`, phase `" + ph.name + "`") << ": "
                << ph.model->name << " on " << ph.mapping->pod.name << " (" << r.podIpus << " IPUs"
                << (r.maxIpus < r.podIpus ? ", at most " + std::to_string(r.maxIpus) + " used" : "") << "), global batch "
                << commas(static_cast<double>(r.globalBatch)) << ", objective " << search::name(r.objective)
                << (o.headroom > 0 ? ", headroom " + fixed(o.headroom * 100, 0) + "%" : "")
                << (ph.mapping->search ? ", as the `search` block of `" + ph.mapping->name + "` asks" : std::string())
                << (r.rank == search::Rank::Conservative ? ", ranked by the likely range's lower end"
                                                         : ", ranked by the estimate")
                << "\n";
      std::cout << "  " << commas(static_cast<double>(r.counts.space)) << " candidates in " << fixed(r.seconds, 2) << " s ("
                << commas(perSecond) << "/s): " << commas(static_cast<double>(r.counts.evaluated)) << " evaluated, "
                << commas(static_cast<double>(r.counts.pruned)) << " pruned by bound, "
                << commas(static_cast<double>(r.counts.prunedMemory)) << " pruned by memory, "
                << commas(static_cast<double>(r.counts.rejectedMemory)) << " rejected for memory\n";
      if (r.stopped != search::StopReason::None)
        std::cout << "  " << painter.paint(base::Style::Accent, "stopped early")
                  << (r.stopped == search::StopReason::TimeLimit ? " (the time limit)" : " (interrupted)") << ": "
                  << commas(static_cast<double>(r.counts.notSearched))
                  << " candidates not searched; what follows is the best of those evaluated, and a better mapping may exist\n";
      std::cout << "\n";
      if (r.top.empty()) {
        std::cout << "  nothing fits";
        if (r.leastMemory) {
          const auto& m = *r.leastMemory;
          // Name the memory that binds: Streaming Memory when In-Processor Memory is within its capacity.
          if (m.streamingOver() && !m.inProcessorOver)
            std::cout << ": Streaming Memory binds; the closest mapping found keeps " << gib(m.streamingBytes)
                      << " in Streaming Memory on IPU " << m.streamingIpu << ", more than its share "
                      << gib(m.streamingCapacityBytes) << " (In-Processor Memory peak " << gib(m.peakMemoryBytes)
                      << " of " << gib(m.capacityBytes) << "), with " << candidateLine(m);
          else
            std::cout << ": the closest mapping found needs " << gib(m.peakMemoryBytes) << " of " << gib(m.capacityBytes)
                      << " on IPU " << m.peakIpu << " (" << m.peakComponent << ": " << gib(m.peakComponentBytes) << ")"
                      << (m.streamingOver() ? ", and Streaming Memory " + gib(m.streamingBytes) + " of its share " +
                                                  gib(m.streamingCapacityBytes)
                                            : std::string())
                      << ", with " << candidateLine(m);
        }
        std::cout << "\n  to relax:\n";
        for (const auto& x : r.relax) std::cout << "    - " << x << "\n";
        std::cout << "\n";
        continue;
      }
      std::vector<Row> rows;
      int rank = 0;
      for (const auto& c : r.top) {
        rows.push_back(Row{{std::to_string(++rank), std::to_string(c.shard), std::to_string(c.pipeline),
                            std::to_string(c.replicas), std::to_string(c.microBatch), std::to_string(c.gradientAccumulation),
                            search::name(c.split), layersPerIpu(c), ir::name(c.recompute),
                            c.optimizerStateStreaming ? "streaming" : "on_chip", rts(c), phased(c),
                            rate(c.samplesPerSecond), likely(c), duration(c.timeToTrain),
                            gib(c.peakMemoryBytes) + " (IPU " + std::to_string(c.peakIpu) + ")", regimesOf(c)}});
      }
      printTable(std::cout,
                 {"#", "t", "p", "r", "micro", "GA", "split", "layers/IPU", "recompute", "opt.state", "RTS", "phased",
                  "samples/s", "likely", "to train", "peak memory", "outside the calibration"},
                 rows, {true, true, true, true, true, true, false, false, false, false, false, false, true, true, true, true, false},
                 painter);
      std::cout << "\n";
      // Why the first is outside the calibration, and whether its lead rests on an assumption.
      const auto& first = r.top.front();
      for (const auto& f : first.regimes) std::cout << "  #1 " << painter.paint(base::Style::Accent, "outside the calibration") << ": " << f.message << "\n";
      for (const auto& check : r.assumptions) {
        const bool moves = !first.sensitivities.empty() || (check.bestAtLow && !check.bestAtLow->sensitivities.empty()) ||
                           (check.bestAtHigh && !check.bestAtHigh->sensitivities.empty());
        if (!moves) continue;
        const double unit = check.range.assumption == cost::Assumption::StreamingBandwidth ? 1e9 : 1;
        auto at = [&](double v) { return fixed(v / unit, v / unit < 10 ? 1 : 0) + " GB/s"; };
        std::cout << "  " << cost::name(check.range.assumption) << " " << at(check.range.nominal) << " is assumed ("
                  << at(check.range.low) << " to " << at(check.range.high) << " plausible): ";
        if (check.holdsAtLow && check.holdsAtHigh) {
          std::cout << "#1 stays the best across the range (" << rate(first.samplesPerSecondAt(check.range.assumption, false))
                    << " to " << rate(first.samplesPerSecondAt(check.range.assumption, true)) << " samples/s)\n";
          continue;
        }
        std::cout << "#1's lead rests on it\n";
        for (int high = 0; high < 2; ++high) {
          const auto& best = high ? check.bestAtHigh : check.bestAtLow;
          if (!best || (high ? check.holdsAtHigh : check.holdsAtLow)) continue;
          const double v = high ? check.range.high : check.range.low;
          std::cout << "    at " << at(v) << " the best is " << candidateLine(*best) << ": "
                    << rate(best->samplesPerSecondAt(check.range.assumption, high == 1)) << " samples/s, #1 "
                    << rate(first.samplesPerSecondAt(check.range.assumption, high == 1)) << "\n";
        }
      }
      if (!first.regimes.empty() || !r.assumptions.empty()) std::cout << "\n";
      if (r.declared) {
        const auto& d = *r.declared;
        const auto& best = r.top.front();
        std::cout << "  yours (`" << ph.mapping->name << "`): " << rate(d.samplesPerSecond) << " samples/s, "
                  << d.ipusUsed << " IPUs, peak " << gib(d.peakMemoryBytes) << (d.fits ? "" : " (does not fit)") << "; ";
        // Compared by the objective (its score, lower is better), within the limits searched.
        if (!d.fits) std::cout << "the best fits and runs at " << rate(best.samplesPerSecond) << " samples/s\n";
        else if (d.ipusUsed > r.maxIpus)
          std::cout << "it uses more than the " << r.maxIpus << " IPUs searched; the best within them runs at "
                    << rate(best.samplesPerSecond) << " samples/s\n";
        else if (best.split == search::Split::Declared || best.score >= d.score) std::cout << "yours is the best\n";
        else if (r.objective == search::Objective::ThroughputPerIpu)
          // The ranked figure's throughput: the estimate's, or the likely range's lower end.
          std::cout << "the best has " << fixed(d.score / best.score, 2) << "x the throughput per IPU ("
                    << rate(best.samplesPerSecond * best.stepTime / best.rankedStep / std::max(1, best.ipusUsed))
                    << " samples/s per IPU"
                    << (r.rank == search::Rank::Conservative ? ", at the likely range's lower end" : "") << ")\n";
        else if (r.rank == search::Rank::Conservative)
          std::cout << "the best is " << fixed(d.rankedStep / best.rankedStep, 2) << "x faster at the likely ranges' lower ends ("
                    << fixed(d.stepTime / best.stepTime, 2) << "x by the estimates)\n";
        else std::cout << "the best is " << fixed(d.stepTime / best.stepTime, 2) << "x faster\n";
        // Why: the step time by cause, the best beside yours.
        if (d.fits && !(best.split == search::Split::Declared || best.score >= d.score)) {
          std::vector<Row> why;
          auto ms = [](double seconds) { return seconds == 0 ? std::string("-") : fixed(seconds * 1e3, seconds < 0.1 ? 2 : 1); };
          const auto bestCauses = causes(best.breakdown), yourCauses = causes(d.breakdown);
          for (std::size_t k = 0; k < bestCauses.size(); ++k) {
            if (bestCauses[k].second == 0 && yourCauses[k].second == 0) continue;
            why.push_back(Row{{bestCauses[k].first.text, ms(bestCauses[k].second), ms(yourCauses[k].second)}});
          }
          why.push_back(Row{{"step", ms(best.stepTime), ms(d.stepTime)}});
          std::cout << "\n  why, by the step time's causes (ms per step):\n";
          printTable(std::cout, {"cause", "#1", "yours"}, why, {false, true, true}, painter);
        }
      }
      if (!r.declared && ph.mapping->pipelineKind == check::MappingSpec::PipelineKind::Lua)
        std::cout << "  yours (`" << ph.mapping->name << "`) is placed by the Lua function `" << ph.mapping->luaFunction
                  << "`, which the search does not run: not compared\n";
      if (r.pareto.size() > 1) {
        std::cout << "\n  IPUs against throughput (the fastest mapping within each pod size):\n";
        std::vector<Row> prow;
        for (std::size_t k = 0; k < r.pareto.size(); ++k) {
          const auto& c = r.pareto[k];
          prow.push_back(Row{{std::to_string(r.paretoLimits[k]), std::to_string(c.ipusUsed), rate(c.samplesPerSecond),
                              rate(c.samplesPerSecond / std::max(1, c.ipusUsed)), candidateLine(c)}});
        }
        printTable(std::cout, {"at most", "IPUs", "samples/s", "per IPU", "mapping"}, prow, {true, true, true, true, false}, painter);
      }
      std::cout << "\n";
    }
  }
  if (a.json) std::cout << out.dump() << "\n";  // the plan's JSON conventions (runtime/ir/json.h)
  if (gSearchInterrupt) {
    std::cerr << "ipu search: interrupted: the results are the best found before Ctrl-C; nothing was written\n";
    return kInterrupted;
  }
  if (!a.write.empty() || a.apply) {
    const int status = writeFound(s, *file, a, found, unfound);
    if (status != kOk) return status;
  }
  return allFit ? kOk : kUserError;
}

}  // namespace

const Command kSearchCommand{"search", "search FILE",
    "find the fastest mappings of each phase that fit (docs/search.md)",
    kHelp, searchCommand};

}  // namespace ipu::cli
