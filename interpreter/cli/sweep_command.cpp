#include "interpreter/cli/sweep_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/terminal.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/runs_command.h"
#include "interpreter/cli/sweep_run_command.h"
#include "interpreter/store/filter.h"
#include "interpreter/store/sweep_records.h"
#include "interpreter/store/sweep_store.h"

namespace ipu::cli {

namespace {

using nlohmann::json;
using store::SweepState;
using store::TrialState;


const char* kSweepUsage = R"usage(usage: ipu sweep FILE [NAME] [options]    run a sweep (as `ipu agent SWEEP` joins one)
       ipu sweep list [--json]
       ipu sweep status SWEEP [--json]
       ipu sweep pause SWEEP      ipu sweep resume SWEEP      ipu sweep cancel SWEEP
       ipu sweep create FILE [NAME]   (create or resume it; run no agent)

`ipu sweep FILE [NAME]` creates the sweep NAME declared in FILE in the run
store, or resumes it if the store has it (finished trials are kept, failed and
killed ones run again), then runs an agent on it; NAME may be left out when
FILE declares one sweep. Other processes or hosts join with `ipu agent SWEEP`
(`ipu help agent`). The other forms administer the sweeps of the store and
their trials (docs/sweeps.md). The store is --store PATH|postgresql://...,
else $IPU_STORE, else runs/ipu.db (under --runs-dir DIR).

  list     every sweep: method, state, trials by state, best metric
  status   one sweep: counts, the best trial, every trial
  pause    agents claim no new trial; running trials go on
  resume   agents claim trials again (of a paused or cancelled sweep); its
           killed trials (an agent stopped with Ctrl-C) are queued again
  create   put the sweep FILE declares in the store without running an agent
  cancel   agents claim no new trial and stop their running trials
  --json   machine-readable output (docs/sweeps.md)

running a sweep (FILE [NAME]):
  --store PATH|URI   the run store (else $IPU_STORE, else <runs-dir>/ipu.db)
  --count N          run at most N trials, then leave
  --runs-dir DIR     where trials' run directories go (default: runs)
  --steps N          at most N steps per phase of each trial
  --threads N        host threads for training (default: all)
  --stale-after S    seconds without a heartbeat before a trial is presumed dead (default 60)
  --max-attempts N   claims of a trial whose agents keep dying before it is failed (default 3)
)usage";

const std::vector<std::string> kSubcommands{"list", "ls", "status", "pause", "resume", "cancel"};
constexpr TrialState kTrialStates[] = {TrialState::Queued, TrialState::Running, TrialState::Finished,
                                       TrialState::Failed, TrialState::Killed,  TrialState::Stopped};

// A script to run rather than a subcommand: a path to a file, or a name ending in `.ipu`.
bool isScriptPath(const std::string& word) {
  std::error_code ec;
  if (word.size() > 4 && word.compare(word.size() - 4, 4, ".ipu") == 0) return true;
  return word.find('/') != std::string::npos || std::filesystem::is_regular_file(word, ec);
}

int usage(const std::string& message) {
  std::cerr << "ipu sweep: " << message << "\n(`ipu sweep --help` lists what it takes)\n";
  return kUsage;
}

struct SweepOptions {
  std::string sub;
  std::vector<std::string> positional;
  std::string store, runsDir = "runs";
  bool json = false;
  base::ColorMode color = base::ColorMode::Auto;
};

json numberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string formatMetric(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

json trialJson(const store::TrialRecord& t) {
  return {{"index", t.index},
          {"state", store::name(t.state)},
          {"assignment", store::toJson(t.assignment)},
          {"key", t.key},
          {"agent", t.agent},
          {"attempts", t.attempts},
          {"created_at", numberOrNull(t.createdAt)},
          {"started_at", numberOrNull(t.startedAt)},
          {"heartbeat_at", numberOrNull(t.heartbeatAt)},
          {"ended_at", numberOrNull(t.endedAt)},
          {"run_id", t.runId ? json(*t.runId) : json(nullptr)},
          {"metric", numberOrNull(t.metric)},
          {"reason", t.reason}};
}

json statusJson(const store::SweepStatus& s) {
  const auto& sw = s.sweep;
  json counts = json::object();
  long long total = 0;
  for (const auto& [state, n] : s.counts) {
    counts[store::name(state)] = n;
    total += n;
  }
  return {{"id", sw.id},
          {"name", sw.name},
          {"training", sw.spec.training},
          {"method", sweep::methodName(sw.spec.method)},
          {"state", store::name(sw.state)},
          {"created_at", numberOrNull(sw.createdAt)},
          {"metric",
           {{"name", sw.spec.metric.name},
            {"goal", sweep::goalName(sw.spec.metric.goal)},
            {"target", sw.spec.metric.target ? numberOrNull(*sw.spec.metric.target) : json(nullptr)}}},
          {"total", total},
          {"counts", counts},
          {"best", s.best ? trialJson(*s.best) : json(nullptr)}};
}

// A sweep by name, or a message with the names it might have been.
std::optional<store::SweepRecord> findSweep(store::SweepStore& st, const std::string& name) {
  if (auto s = st.sweep(name)) return s;
  std::vector<std::string> names;
  for (const auto& s : st.listSweeps()) names.push_back(s.name);
  std::string hint = base::didYouMean(name, names);
  std::cerr << "ipu sweep: error: there is no sweep `" << name << "` in `" << st.location() << "`"
            << (hint.empty() ? "" : "; " + hint) << " (`ipu sweep list` lists them)\n";
  return std::nullopt;
}

std::string styleState(const base::Painter& p, SweepState s) {
  using base::Style;
  const std::string text = store::name(s);
  switch (s) {
    case SweepState::Running: return p.paint(Style::Accent, text);
    case SweepState::Finished: return p.paint(Style::Good, text);
    case SweepState::Paused: return p.paint(Style::Warning, text);
    case SweepState::Cancelled: return p.paint(Style::Error, text);
  }
  return text;
}

// Left-aligned columns, two spaces apart; the header bold.
void printTable(const base::Painter& p, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells, bool bold) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      std::string cell = c + 1 == cells.size() ? cells[c] : cells[c] + std::string(width[c] - cells[c].size(), ' ');
      out += (c ? "  " : "") + (bold ? p.paint(base::Style::Bold, cell) : cell);
    }
    std::cout << out << "\n";
  };
  line(header, true);
  for (const auto& r : rows) line(r, false);
}

int listSweeps(store::SweepStore& st, const SweepOptions& o) {
  std::vector<store::SweepStatus> all;
  for (const auto& s : st.listSweeps()) all.push_back(st.status(s.id));
  if (o.json) {
    json out = json::array();
    for (const auto& s : all) out.push_back(statusJson(s));
    std::cout << out.dump(2) << "\n";
    return kOk;
  }
  if (all.empty()) {
    std::cout << "no sweeps in `" << st.location() << "`\n";
    return kOk;
  }
  base::Painter p(base::shouldColor(o.color, 1));
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : all) {
    long long total = 0;
    for (const auto& [state, n] : s.counts) total += n;
    const auto& m = s.sweep.spec.metric;
    rows.push_back({s.sweep.name, sweep::methodName(s.sweep.spec.method), store::name(s.sweep.state),
                    std::to_string(total), std::to_string(s.counts.at(TrialState::Finished)),
                    std::to_string(s.counts.at(TrialState::Running)), std::to_string(s.counts.at(TrialState::Queued)),
                    std::to_string(s.counts.at(TrialState::Failed)),
                    m.name + (m.goal == sweep::Goal::Minimize ? " (min)" : " (max)"),
                    s.best ? formatMetric(s.best->metric) : "-", store::formatTime(s.sweep.createdAt)});
  }
  printTable(p, {"name", "method", "state", "trials", "finished", "running", "queued", "failed", "metric", "best", "created"},
             rows);
  return kOk;
}

int showStatus(store::SweepStore& st, const SweepOptions& o) {
  if (o.positional.size() != 1) return usage("`status` takes one sweep name");
  auto sw = findSweep(st, o.positional[0]);
  if (!sw) return kUserError;
  store::SweepStatus s = st.status(sw->id);
  std::vector<store::TrialRecord> trials = st.trials(sw->id);
  if (o.json) {
    json out = statusJson(s);
    out["spec"] = store::toJson(s.sweep.spec);
    json list = json::array();
    for (const auto& t : trials) list.push_back(trialJson(t));
    out["trials"] = list;
    std::cout << out.dump(2) << "\n";
    return kOk;
  }
  base::Painter p(base::shouldColor(o.color, 1));
  const auto& spec = s.sweep.spec;
  std::cout << p.paint(base::Style::Bold, "sweep " + s.sweep.name) << " (" << sweep::methodName(spec.method) << " over `"
            << spec.training << "`): " << styleState(p, s.sweep.state) << "\n";
  std::cout << "  metric     " << spec.metric.name << ", " << sweep::goalName(spec.metric.goal);
  if (spec.metric.target) std::cout << ", target " << formatMetric(*spec.metric.target);
  std::cout << "\n  created    " << store::formatTime(s.sweep.createdAt) << "\n  trials     " << trials.size();
  std::string sep = ": ";
  for (TrialState state : kTrialStates) {
    std::cout << sep << s.counts.at(state) << " " << store::name(state);
    sep = ", ";
  }
  std::cout << "\n";
  if (s.best) {
    std::cout << "  best       trial " << s.best->index << ": " << spec.metric.name << " " << formatMetric(s.best->metric);
    if (s.best->runId) std::cout << " (run " << *s.best->runId << ")";
    std::cout << "\n             " << sweep::assignmentShown(s.best->assignment) << "\n";
  }
  if (trials.empty()) return kOk;
  std::cout << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : trials)
    rows.push_back({std::to_string(t.index), store::name(t.state), std::to_string(t.attempts), t.agent.empty() ? "-" : t.agent,
                    formatMetric(t.metric), t.runId ? std::to_string(*t.runId) : "-", sweep::assignmentShown(t.assignment)});
  printTable(p, {"trial", "state", "attempts", "agent", spec.metric.name, "run", "assignment"}, rows);
  return kOk;
}

int changeState(store::SweepStore& st, const SweepOptions& o) {
  if (o.positional.size() != 1) return usage("`" + o.sub + "` takes one sweep name");
  auto sw = findSweep(st, o.positional[0]);
  if (!sw) return kUserError;
  const SweepState to = o.sub == "pause" ? SweepState::Paused : o.sub == "resume" ? SweepState::Running : SweepState::Cancelled;
  // Resuming queues killed trials again (said below; counted before, for the message).
  const long long killed = to == SweepState::Running ? st.status(sw->id).counts[TrialState::Killed] : 0;
  const SweepState before = st.setSweepState(sw->id, to);
  const std::string requeued =
      killed > 0 ? "; " + std::to_string(killed) + " killed trial" + (killed == 1 ? "" : "s") + " queued again" : "";
  if (o.json) {
    std::cout << json{{"name", sw->name}, {"state", store::name(to)}, {"previous_state", store::name(before)},
                      {"requeued", killed}}.dump(2)
              << "\n";
    return kOk;
  }
  if (before == to) {
    std::cout << "sweep " << sw->name << " is " << store::name(to) << " already" << requeued << "\n";
    return kOk;
  }
  const char* what = to == SweepState::Paused      ? "agents claim no new trial; running trials go on"
                     : to == SweepState::Running   ? "agents claim its trials again"
                                                   : "agents claim no new trial and stop their running trials";
  std::cout << "sweep " << sw->name << ": " << store::name(before) << " -> " << store::name(to) << " (" << what << requeued
            << ")\n";
  return kOk;
}

}  // namespace

int sweepCommand(const std::vector<std::string>& args) {
  // `ipu sweep FILE [NAME]` runs a sweep (sweep_run_command.h): its first
  // word that is not an option is a script, not a subcommand.
  ArgumentReader scan(args);
  while (scan.next()) {
    const std::string& a = scan.word();
    if (scan.flag("--store") || scan.flag("--runs-dir") || scan.flag("--color") || scan.flag("--count") || scan.flag("--steps") ||
        scan.flag("--threads") || scan.flag("--stale-after") || scan.flag("--max-attempts")) {
      scan.skip();   // the option's value, not a script
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    if (a == "create") {
      // `ipu sweep create FILE [NAME]`: the running form without its agent.
      std::vector<std::string> rest;
      bool dropped = false;
      for (const auto& w : args) {
        if (!dropped && w == "create") {
          dropped = true;
          continue;
        }
        rest.push_back(w);
      }
      return sweepRunCommand(rest, SweepAgent::None);
    }
    if (std::find(kSubcommands.begin(), kSubcommands.end(), a) != kSubcommands.end()) break;
    if (isScriptPath(a)) return sweepRunCommand(args);
    break;
  }
  SweepOptions o;
  ArgumentReader in(args);
  while (in.next()) {
    const std::string a = in.word();
    std::string v;
    if (in.flag("-h") || in.flag("--help")) {
      std::cout << kSweepUsage;
      return kOk;
    }
    if (in.flag("--json")) o.json = true;
    else if (in.value("--store", v)) {
      if (v.empty()) return usage("`--store` needs a path or a postgresql:// URI");
      o.store = v;
    } else if (in.value("--runs-dir", v)) {
      if (v.empty()) return usage("`--runs-dir` needs a directory");
      o.runsDir = v;
    } else if (in.value("--color", v)) {
      if (!parseColor(v, o.color)) return usage("--color takes `auto`, `always` or `never`");
    } else if (in.isOption()) {
      return usage("unknown option `" + a + "`");
    } else if (o.sub.empty()) {
      o.sub = a;
    } else {
      o.positional.push_back(a);
    }
  }
  if (o.sub.empty()) return usage("which? `list`, `status SWEEP`, `pause SWEEP`, `resume SWEEP` or `cancel SWEEP`");
  if (std::find(kSubcommands.begin(), kSubcommands.end(), o.sub) == kSubcommands.end()) {
    std::string hint = base::didYouMean(o.sub, kSubcommands);
    return usage("unknown subcommand `" + o.sub + "`" + (hint.empty() ? "" : "; " + hint));
  }
  if ((o.sub == "list" || o.sub == "ls") && !o.positional.empty())
    return usage("`list` takes no sweep; to see one, `ipu sweep status " + o.positional[0] + "`");
  if (o.sub != "list" && o.sub != "ls" && o.positional.size() != 1)
    return usage("`" + o.sub + "` takes one sweep name");
  try {
    auto st = store::openSweepStore(storeLocation(o.store, o.runsDir), store::OpenMode::Existing);
    if (o.sub == "list" || o.sub == "ls") return listSweeps(*st, o);
    if (o.sub == "status") return showStatus(*st, o);
    return changeState(*st, o);
  } catch (const store::StoreError& e) {
    std::cerr << "ipu sweep: error: " << e.what() << "\n";
    return kUserError;
  }
}

const Command kSweepCommand{"sweep", "sweep FILE [NAME]",
                            "create or resume a sweep declared in FILE and run an agent on it;\n"
                            "`ipu sweep list|status|pause|resume|cancel` administer sweeps (docs/sweeps.md)",
                            kSweepUsage, sweepCommand};

}  // namespace ipu::cli
