#include "interpreter/cli/runs_command.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <limits>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/render.h"
#include "interpreter/base/terminal.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/runner/artifact_gc.h"
#include "interpreter/runner/dead_runs.h"
#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/measured_run.h"
#include "interpreter/runner/run_import.h"
#include "interpreter/runner/store_recorder.h"
#include "interpreter/store/filter.h"
#include "interpreter/store/run_analysis.h"
#include "interpreter/store/run_json.h"
#include "interpreter/store/sweep_store.h"

#include "interpreter/cli/command.h"

namespace ipu::cli {

namespace {


const char* kRunsUsage = R"usage(usage: ipu runs [list] [--where FILTER] [--sort [-]NAME] [--limit N] [--columns A,B,...] [--json|--csv]
       ipu runs show ID [--json]
       ipu runs compare ID ID... [--json]
       ipu runs tag ID TAG...          ipu runs untag ID TAG...
       ipu runs note ID TEXT           ipu runs delete ID...
       ipu runs gc [--grace SECONDS] [--keep-checkpoints last|best|all] [--older-than DAYS] [--dry-run]
       ipu runs import DIR...
       ipu runs export [ID...] [--where FILTER] [--keys K,...] [--jsonl] [-o FILE]

Runs and estimates recorded in the run store (docs/tracking.md). ID is a run's
number or its name. The store is --store PATH|postgresql://..., else $IPU_STORE,
else runs/ipu.db (under --runs-dir DIR).

  --where FILTER   e.g. "mapping.replicas IN (2,4) AND (mlm_accuracy > 0.18 OR tag = 'baseline')"
  --sort NAME      sort by a column (ascending); -NAME or NAME:desc for descending
  --limit N        at most N runs
  --columns LIST   columns of the table / CSV (built-ins, parameters, metrics)
  --json, --csv    machine-readable output
  --grace SECONDS  gc: a running run silent this long is marked killed (default 30)
  --keep-checkpoints last|best|all
                   gc: prune recorded checkpoints (records, bytes in the
                   store, files on this host): `last` keeps each run's last
                   and its phases' final ones, `best` also drops every
                   checkpoint of a sweep's trials but its best's; `all`
                   (the default) prunes nothing
  --older-than DAYS
                   gc: prune only runs that ended at least DAYS ago
  --dry-run        gc: say what would be pruned, and how many bytes, and change nothing
  export           every recorded point of the runs (all, or those given or
                   filtered): CSV (run_id,run_name,training,kind,key,step,
                   value,time), or JSON Lines with --jsonl; --keys keeps only
                   those metrics; -o FILE writes FILE (replaced whole)
)usage";

int usage(const std::string& message) {
  std::cerr << "ipu runs: " << message << "\n(`ipu runs --help` lists what it takes)\n";
  return kUsage;
}

struct RunsOptions {
  std::string sub = "list";
  std::vector<std::string> positional;
  std::string where, sort, columns, store, runsDir = "runs";
  long long limit = 0;
  bool json = false, csv = false, jsonl = false;
  std::string keys, output;  // export: --keys a,b; -o FILE
  double grace = runner::kHeartbeatGraceSeconds;
  runner::RetentionRule retention;  // gc: --keep-checkpoints, --older-than
  bool dryRun = false;
  base::ColorMode color = base::ColorMode::Auto;
};

std::string jsonNumberOrNull(double v, nlohmann::json& slot) {
  if (std::isfinite(v)) slot = v;
  else slot = nullptr;
  return {};
}

std::string bytesText(long long bytes) {
  char buf[48];
  if (bytes >= (1LL << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1LL << 30));
  else if (bytes >= (1LL << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1LL << 20));
  else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else std::snprintf(buf, sizeof buf, "%lld bytes", bytes);
  return buf;
}

std::string csvCell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string noSuchRun(store::RunStore& st, const std::string& idOrName) {
  std::vector<std::string> names;
  for (const auto& r : st.listRuns()) names.push_back(r.name);
  std::string hint = base::didYouMean(idOrName, names);
  return "there is no run `" + idOrName + "` in `" + st.location() + "`" + (hint.empty() ? "" : "; " + hint) +
         " (`ipu runs` lists them)";
}

std::string styleStatus(const base::Painter& p, store::RunStatus s, const std::string& text) {
  using base::Style;
  switch (s) {
    case store::RunStatus::Finished: return p.paint(Style::Good, text);
    case store::RunStatus::Running: return p.paint(Style::Accent, text);
    case store::RunStatus::Failed:
    case store::RunStatus::Killed: return p.paint(Style::Error, text);
    default: return p.paint(Style::Warning, text);
  }
}

// Stored text (names, tags, notes, parameters, paths, reasons) reaches the
// terminal only through base::printable: a tag holding an escape sequence is
// shown as `\x1b[...`, never run.
void printTable(std::ostream& os, const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& storedRows,
                const std::vector<store::RunStatus>* statuses, int statusColumn, const base::Painter& p) {
  std::vector<std::vector<std::string>> rows = storedRows;
  for (auto& row : rows)
    for (auto& cell : row) cell = base::printable(cell);
  std::vector<std::size_t> width(header.size(), 0);
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& cells, bool isHeader, std::size_t r) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      std::string cell = cells[c] + std::string(width[c] - cells[c].size(), ' ');
      if (c + 1 == cells.size()) cell = cells[c];
      if (isHeader) cell = p.paint(base::Style::Bold, cell);
      else if (statuses != nullptr && static_cast<int>(c) == statusColumn) cell = styleStatus(p, (*statuses)[r], cell);
      out += (c ? "  " : "") + cell;
    }
    os << out << "\n";
  };
  line(header, true, 0);
  for (std::size_t r = 0; r < rows.size(); ++r) line(rows[r], false, r);
}

using runner::processAlive;

int listRuns(store::RunStore& st, const RunsOptions& o) {
  runner::markDeadLocalRuns(st);
  std::vector<store::RunRecord> runs;
  std::vector<store::RunRecord> all;
  if (int code = selectRuns(st, {}, o.where, runs, "runs", &all)) return code;
  store::FieldResolver names(all);
  if (!o.sort.empty()) {
    bool descending = false;
    const std::string key = store::sortKey(o.sort, descending);
    auto field = names.resolve(key);
    if (!field) {
      std::cerr << "ipu runs: --sort: no run has `" << key << "`\n  help: " << names.unknownNameHelp(key) << "\n";
      return kUsage;
    }
    store::sortRuns(runs, *field, descending);
  }
  if (o.limit > 0 && runs.size() > static_cast<std::size_t>(o.limit)) runs.resize(static_cast<std::size_t>(o.limit));

  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : runs) j.push_back(store::runJson(r, false));
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kOk;
  }

  std::vector<store::Field> columns;
  if (!o.columns.empty()) {
    std::stringstream ss(o.columns);
    std::string name;
    while (std::getline(ss, name, ',')) {
      name.erase(0, name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      if (name.empty()) continue;
      auto field = names.resolve(name);
      if (!field) {
        std::cerr << "ipu runs: --columns: no run has `" << name << "`\n  help: " << names.unknownNameHelp(name)
                  << "\n";
        return kUsage;
      }
      columns.push_back(*field);
    }
  } else {
    for (const char* b : {"id", "name", "kind", "status", "started", "duration", "tags"}) columns.push_back(*names.resolve(b));
    for (auto& f : store::tellingColumns(runs, names)) columns.push_back(std::move(f));
  }
  std::vector<std::string> header;
  int statusColumn = -1;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    header.push_back(columns[c].label);
    if (columns[c].kind == store::FieldKind::Status) statusColumn = static_cast<int>(c);
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<store::RunStatus> statuses;
  for (const auto& r : runs) {
    std::vector<std::string> row;
    for (const auto& f : columns) row.push_back(store::FieldResolver::format(r, f));
    rows.push_back(std::move(row));
    statuses.push_back(r.status);
  }
  if (o.csv) {
    for (std::size_t c = 0; c < header.size(); ++c) std::cout << (c ? "," : "") << csvCell(header[c]);
    std::cout << "\n";
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < row.size(); ++c) std::cout << (c ? "," : "") << csvCell(row[c]);
      std::cout << "\n";
    }
    return kOk;
  }
  if (runs.empty()) {
    std::cout << (all.empty() ? "no runs recorded in `" + st.location() + "` yet (`ipu run` and `ipu estimate` record them)"
                              : "no run matches")
              << "\n";
    return kOk;
  }
  base::Painter p(base::shouldColor(o.color, 1));
  printTable(std::cout, header, rows, &statuses, statusColumn, p);
  return kOk;
}

std::string number(double v) {
  if (std::isnan(v)) return "-";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

int showRun(store::RunStore& st, const RunsOptions& o) {
  if (o.positional.size() != 1) return usage("`runs show` takes one run (its number or name)");
  runner::markDeadLocalRuns(st);
  auto r = store::findRun(st, o.positional[0]);
  if (!r) {
    std::cerr << "ipu runs: " << noSuchRun(st, o.positional[0]) << "\n";
    return kUserError;
  }
  if (o.json) {
    std::cout << store::runJson(*r, true).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kOk;
  }
  base::Painter p(base::shouldColor(o.color, 1));
  const auto text = [](const std::string& stored) { return base::printable(stored); };
  std::cout << p.paint(base::Style::Bold, "run " + std::to_string(r->id) + "  " + text(r->name)) << "  ("
            << store::name(r->kind) << ")\n";
  std::cout << "  status     " << styleStatus(p, r->status, store::name(r->status))
            << (r->stopReason.empty() ? "" : " (" + text(r->stopReason) + ")") << "\n";
  std::cout << "  started    " << store::formatTime(r->startedAt) << " on " << text(r->host) << "\n";
  if (!std::isnan(r->endedAt))
    std::cout << "  ended      " << store::formatTime(r->endedAt) << " after " << store::formatDuration(r->endedAt - r->startedAt)
              << "\n";
  else
    std::cout << "  heartbeat  " << store::formatTime(r->heartbeatAt) << "\n";
  std::cout << "  plan hash  " << text(r->planHash) << "\n";
  if (!r->tags.empty()) {
    std::cout << "  tags      ";
    for (const auto& t : r->tags) std::cout << " " << text(t);
    std::cout << "\n";
  }
  if (!r->note.empty()) std::cout << "  note       " << text(r->note) << "\n";
  for (const auto& a : r->artifacts)
    if (a.kind == "run_directory") std::cout << "  directory  " << text(a.path) << "\n";
  std::size_t checkpoints = 0, stored = 0;
  long long bytes = 0;
  const store::Artifact* last = nullptr;
  for (const auto& a : r->artifacts) {
    if (a.kind != "checkpoint") continue;
    ++checkpoints;
    if (a.stored) ++stored;
    if (a.size > 0) bytes += a.size;
    if (a.step >= 0 && (last == nullptr || a.step >= last->step)) last = &a;
  }
  if (checkpoints > 0) {
    std::cout << "  checkpoints " << checkpoints << " (" << bytesText(bytes) << ", " << stored << " kept in the store)";
    if (last != nullptr) std::cout << "; last " << text(last->path) << " at step " << last->step;
    std::cout << " (--json lists them)\n";
  }
  // What the process used of its host (the recorder's `system.*` metrics).
  const auto system = [&](const char* key) {
    auto it = r->metrics.find(key);
    return it == r->metrics.end() ? std::numeric_limits<double>::quiet_NaN() : it->second.max;
  };
  if (std::isfinite(system("system.cpu_s")))
    std::cout << "  system     CPU " << number(system("system.cpu_s")) << " s, peak RSS " << number(system("system.peak_rss_mb"))
              << " MiB, threads up to " << number(system("system.threads")) << "\n";
  if (!r->metrics.empty()) {
    std::cout << p.paint(base::Style::Bold, "metrics") << "\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& [k, s] : r->metrics)
      rows.push_back({"  " + k, number(s.last), number(s.min), number(s.max), std::to_string(s.lastStep), std::to_string(s.count)});
    printTable(std::cout, {"  key", "last", "min", "max", "last step", "points"}, rows, nullptr, -1, p);
  }
  std::cout << p.paint(base::Style::Bold, "parameters") << "\n";
  for (const auto& [k, v] : r->parameters)
    if (k.rfind("phases.", 0) != 0) std::cout << "  " << text(k) << " = " << text(v) << "\n";
  std::size_t perPhase = std::count_if(r->parameters.begin(), r->parameters.end(),
                                       [](const auto& kv) { return kv.first.rfind("phases.", 0) == 0; });
  if (perPhase > 0) std::cout << "  (and " << perPhase << " per-phase values `phases.<phase>.<name>`: --json shows them)\n";
  return kOk;
}

int compareRuns(store::RunStore& st, const RunsOptions& o) {
  if (o.positional.size() < 2) return usage("`runs compare` takes two runs or more");
  std::vector<store::RunRecord> all = st.listRuns();
  std::vector<store::RunRecord> runs;
  for (const auto& id : o.positional) {
    auto r = store::findRun(st, id, &all);
    if (!r) {
      std::cerr << "ipu runs: " << noSuchRun(st, id) << "\n";
      return kUserError;
    }
    runs.push_back(*r);
  }
  // Predicted against measured: for each run of kind `run`, the newest
  // estimate of the same plan (compared or not).
  const std::vector<store::EstimatePairing> pairs = store::pairWithEstimates(st, runs, all);
  auto differing = store::differingParameters(runs);
  std::set<std::string> metricKeys;
  for (const auto& r : runs)
    for (const auto& [k, s] : r.metrics) metricKeys.insert(k);

  if (o.json) {
    nlohmann::json j;
    j["runs"] = nlohmann::json::array();
    for (const auto& r : runs) j["runs"].push_back(store::runJson(r, false));
    j["differing_parameters"] = differing;
    j["predicted_vs_measured"] = nlohmann::json::array();
    for (const auto& pr : pairs) {
      nlohmann::json x;
      x["run"] = pr.run->id;
      x["estimate"] = pr.estimate.id;
      x["plan_hash"] = pr.run->planHash;
      nlohmann::json keys = nlohmann::json::object();
      for (const auto& m : pr.metrics) {
        nlohmann::json y;
        jsonNumberOrNull(m.predicted, y["predicted"]);
        jsonNumberOrNull(m.measuredMean, y["measured_mean"]);
        keys[m.key] = y;
      }
      x["metrics"] = keys;
      j["predicted_vs_measured"].push_back(x);
    }
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kOk;
  }

  base::Painter p(base::shouldColor(o.color, 1));
  std::vector<std::string> header{""};
  for (const auto& r : runs) header.push_back(std::to_string(r.id) + " " + r.name);
  std::vector<std::vector<std::string>> rows;
  auto row = [&](const std::string& label, auto get) {
    std::vector<std::string> cells{label};
    for (const auto& r : runs) cells.push_back(get(r));
    rows.push_back(std::move(cells));
  };
  row("kind", [](const store::RunRecord& r) { return std::string(store::name(r.kind)); });
  row("status", [](const store::RunRecord& r) { return std::string(store::name(r.status)); });
  row("started", [](const store::RunRecord& r) { return store::formatTime(r.startedAt); });
  row("duration", [](const store::RunRecord& r) {
    return std::isnan(r.endedAt) ? std::string("-") : store::formatDuration(r.endedAt - r.startedAt);
  });
  row("plan hash", [](const store::RunRecord& r) { return r.planHash; });
  printTable(std::cout, header, rows, nullptr, -1, p);

  std::cout << "\n" << p.paint(base::Style::Bold, "parameters that differ") << "\n";
  rows.clear();
  for (const auto& k : differing)
    row(k, [&](const store::RunRecord& r) {
      auto it = r.parameters.find(k);
      return it == r.parameters.end() ? std::string("-") : it->second;
    });
  if (rows.empty()) std::cout << "  none: every parameter is the same\n";
  else printTable(std::cout, header, rows, nullptr, -1, p);

  std::cout << "\n" << p.paint(base::Style::Bold, "metrics (last, min..max)") << "\n";
  rows.clear();
  for (const auto& k : metricKeys)
    row(k, [&](const store::RunRecord& r) {
      auto it = r.metrics.find(k);
      if (it == r.metrics.end()) return std::string("-");
      return number(it->second.last) + " (" + number(it->second.min) + ".." + number(it->second.max) + ")";
    });
  if (rows.empty()) std::cout << "  none recorded\n";
  else printTable(std::cout, header, rows, nullptr, -1, p);

  for (const auto& pr : pairs) {
    std::cout << "\n"
              << p.paint(base::Style::Bold, "predicted (estimate " + std::to_string(pr.estimate.id) + ") against measured (run " +
                                                std::to_string(pr.run->id) + "), same plan " + pr.run->planHash)
              << "\n";
    std::vector<std::vector<std::string>> lines;
    for (const auto& m : pr.metrics)
      lines.push_back({"  " + m.key, number(m.predicted), number(m.measuredMean),
                       std::isfinite(m.measuredMean) && m.measuredMean != 0 ? number(m.predicted / m.measuredMean) : "-"});
    if (lines.empty()) std::cout << "  no metric in common\n";
    else printTable(std::cout, {"  metric", "predicted", "measured (mean)", "ratio"}, lines, nullptr, -1, p);
    // A measured run (logged from a real training, docs/python.md) ran where
    // it says; an emulator run ran on this host's cores.
    auto source = pr.run->parameters.find(runner::kSourceParameter);
    const bool measured = source != pr.run->parameters.end() && source->second == runner::kMeasuredSource;
    std::cout << p.paint(base::Style::Dim, measured ? "  (measured by the training that logged it, on its own hardware)"
                                                    : "  (the emulator's speed is this host's, not an IPU's: compare shapes, "
                                                      "not absolute speed)")
              << "\n";
  }
  return kOk;
}

int tagRun(store::RunStore& st, const RunsOptions& o, bool remove) {
  if (o.positional.size() < 2) return usage(std::string("`runs ") + (remove ? "untag" : "tag") + "` takes a run and one tag or more");
  auto r = store::findRun(st, o.positional[0]);
  if (!r) {
    std::cerr << "ipu runs: " << noSuchRun(st, o.positional[0]) << "\n";
    return kUserError;
  }
  std::vector<std::string> tags(o.positional.begin() + 1, o.positional.end());
  for (const auto& t : tags)
    if (std::string problem = store::tagProblem(t); !problem.empty()) return usage(problem);
  if (remove) st.removeTags(r->id, tags);
  else st.addTags(r->id, tags);
  return kOk;
}

int noteRun(store::RunStore& st, const RunsOptions& o) {
  if (o.positional.size() < 2) return usage("`runs note` takes a run and the note's text (\"\" clears it)");
  auto r = store::findRun(st, o.positional[0]);
  if (!r) {
    std::cerr << "ipu runs: " << noSuchRun(st, o.positional[0]) << "\n";
    return kUserError;
  }
  std::string note;
  for (std::size_t i = 1; i < o.positional.size(); ++i) note += (i > 1 ? " " : "") + o.positional[i];
  st.setNote(r->id, note);
  return kOk;
}

int deleteRuns(store::RunStore& st, const RunsOptions& o) {
  if (o.positional.empty()) return usage("`runs delete` takes one run or more");
  std::vector<long long> ids;
  for (const auto& id : o.positional) {
    auto r = store::findRun(st, id);
    if (!r) {
      std::cerr << "ipu runs: " << noSuchRun(st, id) << "; nothing was deleted\n";
      return kUserError;
    }
    // A run whose process still records (its heartbeat is recent) would go
    // on writing points for a record that is gone.
    const double silent = store::nowSeconds() - r->heartbeatAt;
    if (r->status == store::RunStatus::Running && (!(silent > o.grace) || processAlive(r->host, r->pid))) {
      std::cerr << "ipu runs: run " << r->id << " (`" << r->name << "`) is running (its last heartbeat " << number(std::max(0.0, silent))
                << " s ago); nothing was deleted\n  help: stop it first (Ctrl-C in its terminal), or, if its process is gone, "
                   "`ipu runs gc` marks it killed once it has been silent for "
                << number(o.grace) << " s (--grace)\n";
      return kUserError;
    }
    ids.push_back(r->id);
  }
  for (long long id : ids) st.deleteRun(id);
  std::cout << "deleted " << ids.size() << " run" << (ids.size() == 1 ? "" : "s")
            << " from the store (run directories on disk are left as they are)\n";
  return kOk;
}

int gcRuns(store::RunStore& st, const RunsOptions& o, const std::string& location) {
  if (!o.dryRun) {
    auto ids = st.markStale(store::nowSeconds(), o.grace, processAlive);
    if (ids.empty()) {
      std::cout << "no running run has a lapsed heartbeat\n";
    } else {
      std::cout << "marked killed (no heartbeat for " << number(o.grace) << " s):";
      for (long long id : ids) std::cout << " " << id;
      std::cout << "\n";
    }
  }
  if (o.retention.keep == runner::KeepCheckpoints::All) return kOk;
  std::unique_ptr<store::SweepStore> sweeps = store::openSweepStore(location, store::OpenMode::Existing);
  const runner::PrunePlan plan = runner::planPrune(st, *sweeps, o.retention, store::nowSeconds());
  const auto text = [](const std::string& stored) { return base::printable(stored); };
  for (const auto& why : plan.protectedRuns) std::cout << "kept whole: " << text(why) << "\n";
  for (const auto& p : plan.checkpoints) {
    std::string where = p.artifact.stored ? "store" : "";
    if (p.fileHere) where += where.empty() ? "file" : " + file";
    if (where.empty()) where = "record only" + (p.artifact.host.empty() ? std::string() : " (file on " + p.artifact.host + ")");
    std::cout << (o.dryRun ? "would remove " : "removed ") << text(p.runName) << " " << text(p.artifact.path) << " ("
              << bytesText(p.bytes) << ", " << where << ")\n";
  }
  std::vector<std::string> problems;
  if (!o.dryRun) problems = runner::prune(st, plan);
  std::cout << (o.dryRun ? "would remove " : "removed ") << plan.checkpoints.size() << " checkpoint"
            << (plan.checkpoints.size() == 1 ? "" : "s") << " (--keep-checkpoints " << runner::name(o.retention.keep) << "): "
            << bytesText(plan.storeBytes) << " in the store, " << bytesText(plan.fileBytes) << " of files on this host";
  if (plan.elsewhere > 0) std::cout << "; " << plan.elsewhere << " files on other hosts are left there";
  std::cout << "\n";
  for (const auto& problem : problems) std::cerr << "ipu runs: warning: " << problem << "\n";
  return kOk;
}

// A number as text that reads back as the same double (for files other
// programs read: every digit kept, none invented).
std::string exactNumber(double v) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Full metric histories of the selected runs (every point the store has, not
// the summaries `runs --csv` gives): CSV or JSON Lines, one point a line,
// runs in id order, each run's points by key then step.
int exportRuns(store::RunStore& st, const RunsOptions& o) {
  if (o.json) return usage("`runs export` writes CSV (the default) or JSON Lines (`--jsonl`), not one JSON document");
  std::vector<store::RunRecord> runs;
  if (int code = selectRuns(st, o.positional, o.where, runs, "runs export")) return code;
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::set<std::string> keys;
  if (!o.keys.empty()) {
    std::stringstream ss(o.keys);
    for (std::string k; std::getline(ss, k, ',');)
      if (!k.empty()) keys.insert(k);
  }
  std::ostringstream out;
  if (!o.jsonl) out << "run_id,run_name,training,kind,key,step,value,time\n";
  std::size_t points = 0;
  for (const auto& r : runs) {
    for (const auto& p : st.metricHistory(r.id)) {
      if (!keys.empty() && !keys.count(p.key)) continue;
      ++points;
      if (o.jsonl) {
        nlohmann::json j{{"run_id", r.id}, {"run_name", r.name}, {"training", r.training}, {"kind", store::name(r.kind)},
                         {"key", p.key}, {"step", p.step}};
        jsonNumberOrNull(p.value, j["value"]);
        jsonNumberOrNull(p.time, j["time"]);
        out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      } else {
        out << r.id << "," << csvCell(r.name) << "," << csvCell(r.training) << "," << store::name(r.kind) << ","
            << csvCell(p.key) << "," << p.step << "," << (std::isfinite(p.value) ? exactNumber(p.value) : "") << ","
            << exactNumber(p.time) << "\n";
      }
    }
  }
  if (o.output.empty() || o.output == "-") {
    std::cout << out.str();
  } else {
    std::string error;
    if (!replaceFile(o.output, out.str(), error)) {
      std::cerr << "ipu runs export: " << error << "\n";
      return kUserError;
    }
    std::cerr << "wrote " << points << " point" << (points == 1 ? "" : "s") << " of " << runs.size() << " run"
              << (runs.size() == 1 ? "" : "s") << " to " << o.output << "\n";
  }
  return kOk;
}

int importRuns(store::RunStore& st, const RunsOptions& o) {
  if (o.positional.empty()) return usage("`runs import` takes run directories, or folders of them (e.g. runs)");
  runner::ImportResult r = runner::importRunDirectories(st, o.positional);
  for (const auto& [dir, id] : r.imported) std::cout << "imported " << dir << " as run " << id << "\n";
  for (const auto& dir : r.skipped) std::cout << "already in the store: " << dir << "\n";
  for (const auto& what : r.completed) std::cout << "completed " << base::printable(what) << "\n";
  for (const auto& what : r.live) std::cout << "left as it is: " << base::printable(what) << "\n";
  for (const auto& why : r.problems) std::cerr << "ipu runs import: " << why << "\n";
  for (const auto& what : r.warnings) std::cerr << "ipu runs import: warning: " << base::printable(what) << "\n";
  return r.problems.empty() ? kOk : kUserError;
}

}  // namespace

std::string storeLocation(const std::string& storeFlag, const std::string& runsDir) {
  if (!storeFlag.empty()) return storeFlag;
  const char* env = std::getenv("IPU_STORE");
  if (env != nullptr && *env != '\0') return env;
  return (runsDir.empty() ? std::string("runs") : runsDir) + "/ipu.db";
}

int selectRuns(store::RunStore& st, const std::vector<std::string>& ids, const std::string& where,
               std::vector<store::RunRecord>& out, const std::string& command, std::vector<store::RunRecord>* allOut) {
  std::vector<store::RunRecord> all = st.listRuns();
  if (!ids.empty()) {
    for (const auto& id : ids) {
      auto r = store::findRun(st, id, &all);
      if (!r) {
        std::cerr << "ipu " << command << ": " << noSuchRun(st, id) << "\n";
        return kUserError;
      }
      out.push_back(*r);
    }
  } else {
    out = all;
  }
  if (allOut != nullptr) *allOut = all;
  if (where.empty()) return kOk;
  store::FieldResolver names(all);
  auto parsed = store::Filter::parse(where, names);
  if (auto* e = std::get_if<store::FilterError>(&parsed)) {
    std::cerr << "ipu " << command << ": error: --where: " << e->message << "\n"
              << store::renderFilterError(where, *e, "  ");
    if (!e->help.empty()) std::cerr << "  help: " << e->help << "\n";
    return kUsage;
  }
  const store::Filter& filter = std::get<store::Filter>(parsed);
  std::vector<store::RunRecord> kept;
  for (auto& r : out)
    if (filter.matches(r)) kept.push_back(std::move(r));
  out = std::move(kept);
  return kOk;
}

namespace {

int runsCommand(const std::vector<std::string>& args) {
  RunsOptions o;
  bool subSeen = false;
  ArgumentReader in(args);
  while (in.next()) {
    const std::string a = in.word();
    std::string v;
    if (in.flag("--json")) o.json = true;
    else if (in.flag("--csv")) o.csv = true;
    else if (in.flag("--jsonl")) o.jsonl = true;
    else if (in.value("--keys", v)) {
      if (v.empty()) return usage("`--keys` needs a list of metric names");
      o.keys = v;
    } else if (in.value("-o", v) || in.value("--output", v)) {
      if (v.empty()) return usage("`-o` needs a file name (or `-` for standard output)");
      o.output = v;
    }
    else if (in.value("--where", v)) {
      // `--where ""` and `--where=` are an empty filter; only `--where` as the
      // last word lacks one (the reader then stays on the option).
      if (v.empty() && in.flag("--where")) return usage("`--where` needs a filter");
      o.where = v;
    } else if (in.value("--sort", v)) {
      if (v.empty()) return usage("`--sort` needs a column name");
      o.sort = v;
    } else if (in.value("--columns", v)) {
      if (v.empty()) return usage("`--columns` needs a list of names");
      o.columns = v;
    } else if (in.value("--store", v)) {
      if (v.empty()) return usage("`--store` needs a path or a postgresql:// URI");
      o.store = v;
    } else if (in.value("--runs-dir", v)) {
      if (v.empty()) return usage("`--runs-dir` needs a directory");
      o.runsDir = v;
    } else if (in.value("--limit", v)) {
      char* end = nullptr;
      o.limit = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || o.limit < 1) return usage("`--limit` needs a whole number of at least 1");
    } else if (in.value("--grace", v)) {
      char* end = nullptr;
      o.grace = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.grace >= 0)) return usage("`--grace` needs a number of seconds");
    } else if (in.value("--keep-checkpoints", v)) {
      const auto keep = runner::parseKeepCheckpoints(v);
      if (!keep) return usage("`--keep-checkpoints` takes `last`, `best` or `all`");
      o.retention.keep = *keep;
    } else if (in.value("--older-than", v)) {
      char* end = nullptr;
      o.retention.olderThanDays = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.retention.olderThanDays >= 0)) return usage("`--older-than` needs a number of days");
    } else if (in.flag("--dry-run")) {
      o.dryRun = true;
    } else if (in.value("--color", v)) {
      if (!parseColor(v, o.color)) return usage("--color takes `auto`, `always` or `never`");
    } else if (in.isOption() && !(subSeen && (o.sub == "note" || o.sub == "tag" || o.sub == "untag"))) {
      return usage("unknown option `" + a + "`");
    } else if (!subSeen && o.positional.empty()) {
      subSeen = true;
      o.sub = a;
    } else {
      o.positional.push_back(a);
    }
  }
  static const std::vector<std::string> subs{"list", "ls", "show", "compare", "tag", "untag", "note", "delete", "gc", "import", "export"};
  if (std::find(subs.begin(), subs.end(), o.sub) == subs.end()) {
    std::string hint = base::didYouMean(o.sub, subs);
    return usage("unknown subcommand `" + o.sub + "`" + (hint.empty() ? "" : "; " + hint));
  }
  if (o.json && o.csv) return usage("choose one of --json and --csv");
  if ((o.jsonl || !o.keys.empty() || !o.output.empty()) && o.sub != "export")
    return usage("`--jsonl`, `--keys` and `-o` are options of `runs export`");
  if (o.jsonl && o.csv) return usage("choose one of --csv and --jsonl");
  if ((o.dryRun || o.retention.keep != runner::KeepCheckpoints::All || o.retention.olderThanDays > 0) && o.sub != "gc")
    return usage("`--keep-checkpoints`, `--older-than` and `--dry-run` are options of `runs gc`");
  if ((o.dryRun || o.retention.olderThanDays > 0) && o.retention.keep == runner::KeepCheckpoints::All)
    return usage("`--older-than` and `--dry-run` go with `--keep-checkpoints last|best` (what to prune)");
  if ((o.sub == "list" || o.sub == "ls") && !o.positional.empty())
    return usage("`runs` lists runs; to see one, `ipu runs show " + o.positional[0] + "`");

  const std::string location = storeLocation(o.store, o.runsDir);
  // Only import may create the store; reading one that is not there is a mistake to say.
  const bool creates = o.sub == "import";
  try {
    std::unique_ptr<store::RunStore> st = store::openStore(location, creates ? store::OpenMode::Create : store::OpenMode::Existing);
    if (o.sub == "list" || o.sub == "ls") return listRuns(*st, o);
    if (o.sub == "show") return showRun(*st, o);
    if (o.sub == "compare") return compareRuns(*st, o);
    if (o.sub == "tag") return tagRun(*st, o, false);
    if (o.sub == "untag") return tagRun(*st, o, true);
    if (o.sub == "note") return noteRun(*st, o);
    if (o.sub == "delete") return deleteRuns(*st, o);
    if (o.sub == "gc") return gcRuns(*st, o, location);
    if (o.sub == "export") return exportRuns(*st, o);
    return importRuns(*st, o);
  } catch (const store::StoreError& e) {
    std::cerr << "ipu runs: error: " << e.what() << "\n";
    return kUserError;
  }
}

}  // namespace

const Command kRunsCommand{"runs", "runs",
    "list, filter, show and compare recorded runs and estimates\n"
    "(docs/tracking.md)",
    kRunsUsage, runsCommand};

}  // namespace ipu::cli
