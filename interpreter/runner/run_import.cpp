#include "interpreter/runner/run_import.h"

#include "interpreter/runner/checkpoint_fetch.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <limits>
#include <map>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/run_parameters.h"
#include "interpreter/runner/store_recorder.h"
#include "interpreter/session/session.h"
#include "runtime/files/regular_file.h"
#include "runtime/ir/plan_hash.h"

namespace ipu::runner {

namespace fs = std::filesystem;

namespace {

// The files of a run directory are read only when they are regular files
// (files/regular_file.h): a pipe or a device in their place would block or
// never end. Missing reads as empty; anything else is a problem.
constexpr std::uint64_t kMostRunFileBytes = 4ULL << 30;

files::ReadResult readRunFile(const fs::path& p) { return files::readRegularFile(p.string(), kMostRunFileBytes); }

std::string readText(const fs::path& p) {
  files::ReadResult r = readRunFile(p);
  return r.ok() ? std::move(r.text) : std::string();
}

// Why a run directory's files cannot be read ("" when they can): each that is
// there must be a regular file.
std::string unreadableFiles(const fs::path& dir) {
  for (const char* name : {"plan.json", "script.ipu", "metrics.jsonl", "events.jsonl", "summary.json"}) {
    const files::ReadResult r = files::readRegularFile((dir / name).string(), 0);
    if (r.status == files::ReadResult::Status::NotAFile || r.status == files::ReadResult::Status::Unreadable)
      return r.describe(name);
  }
  return "";
}

// Each line of a text, the last one also when it has no newline.
template <typename Each>
void forEachLine(const std::string& text, Each each) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    each(std::string_view(text).substr(start, end - start));
    start = end + 1;
  }
}

double modified(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return store::kNoTime;
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
}

// runs/<training>/<YYYYMMDD-HHMMSS>[-n]: the start time, in local time.
double startFromName(const fs::path& dir) {
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (std::sscanf(dir.filename().c_str(), "%4d%2d%2d-%2d%2d%2d", &y, &mo, &d, &h, &mi, &s) != 6) return store::kNoTime;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  tm.tm_isdst = -1;
  return static_cast<double>(std::mktime(&tm));
}

void findRunDirectories(const fs::path& p, std::vector<fs::path>& out, int depth) {
  std::error_code ec;
  if (fs::exists(p / "plan.json", ec) && fs::exists(p / "metrics.jsonl", ec)) {
    out.push_back(p);
    return;
  }
  if (depth > 4 || !fs::is_directory(p, ec)) return;
  std::vector<fs::path> children;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.is_directory(ec)) children.push_back(e.path());
  std::sort(children.begin(), children.end());
  for (const auto& c : children) findRunDirectories(c, out, depth + 1);
}

}  // namespace

std::vector<store::MetricPoint> pointsOfRunDirectory(const std::string& directory, long long beforeStep, long long* skipped) {
  const fs::path dir(directory);
  std::vector<store::MetricPoint> points;
  const double when = modified(dir / "metrics.jsonl");
  long long lastStep = 0;
  forEachLine(readText(dir / "metrics.jsonl"), [&](std::string_view line) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    // A line cut by a crash, bytes that are not JSON, a step that is not a
    // step: not a record of the run.
    const auto step = j.is_object() ? j.find("global_step") : j.end();
    if (j.is_discarded() || !j.is_object() || step == j.end() || !step->is_number_integer() || step->get<long long>() < 0) {
      if (skipped != nullptr && !line.empty()) ++*skipped;
      return;
    }
    long long g = step->get<long long>();
    if (g >= beforeStep) return;
    lastStep = std::max(lastStep, g);
    for (const auto& [k, v] : j.items()) {
      if (k == "phase" || k == "step" || k == "global_step") continue;
      if (v.is_boolean()) points.push_back({k, g, v.get<bool>() ? 1.0 : 0.0, when});
      else if (v.is_number()) points.push_back({k, g, v.get<double>(), when});
      else if (v.is_null()) points.push_back({k, g, std::nan(""), when});
    }
  });
  // The held-out evaluations, at the last step of their phase. A phase that
  // was resumed has several phase_start events and one phase_end.
  long long ended = 0;
  forEachLine(readText(dir / "events.jsonl"), [&](std::string_view line) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.is_object() || e.value("event", "") != "phase_end") return;
    ended += e.value("steps_run", 0LL);
    const long long at = std::min(ended, lastStep);
    if (at >= beforeStep || !e.contains("evaluation") || !e["evaluation"].is_object()) return;
    for (const auto& [k, v] : e["evaluation"].items())
      if (v.is_number()) points.push_back({"eval." + k, at, v.get<double>(), when});
  });
  return points;
}

namespace {

// How a run directory says its run ended: summary.json's status (none: the
// process died, so `killed`), reason and end time.
struct Ending {
  store::RunStatus status = store::RunStatus::Killed;
  std::string reason = "no summary.json: the process ended without saying how";
  double endedAt = store::kNoTime;
  bool said = false;  // summary.json said it
};

Ending endingOf(const fs::path& dir, double startedAt) {
  Ending e;
  e.endedAt = modified(dir / "metrics.jsonl");
  if (!fs::exists(dir / "summary.json")) return e;
  nlohmann::json s = nlohmann::json::parse(readText(dir / "summary.json"), nullptr, false);
  if (s.is_discarded() || !s.is_object()) return e;
  e.said = true;
  const std::string how = s.value("status", "");
  e.status = how == "completed"   ? store::RunStatus::Finished
             : how == "stopped"   ? store::RunStatus::Stopped
             : how == "cancelled" ? store::RunStatus::Cancelled
                                  : store::RunStatus::Failed;
  e.reason = s.contains("stop_reason") && s["stop_reason"].is_string() ? s["stop_reason"].get<std::string>()
             : s.contains("error") && s["error"].is_string()           ? s["error"].get<std::string>()
                                                                        : "";
  if (s.contains("seconds") && s["seconds"].is_number() && std::isfinite(startedAt))
    e.endedAt = startedAt + s["seconds"].get<double>();
  else
    e.endedAt = modified(dir / "summary.json");
  return e;
}

std::string leftOutWarning(long long skipped) {
  return std::to_string(skipped) + " line" + (skipped == 1 ? " of metrics.jsonl is" : "s of metrics.jsonl are") +
         " not a metric record (a JSON object with a whole global_step from 0) and " + (skipped == 1 ? "was" : "were") +
         " left out";
}

// Everything `dir` holds for its record; `warning` says what was left out.
store::RunContents contentsOf(const fs::path& dir, double startedAt, bool& said, std::string& warning) {
  store::RunContents c;
  long long skipped = 0;
  c.points = pointsOfRunDirectory(dir.string(), std::numeric_limits<long long>::max(), &skipped);
  if (skipped > 0) warning = leftOutWarning(skipped);
  std::error_code ec;
  // Recorded as the run's recorder records them (store_recorder.h): relative
  // to the run directory, with their checksum; the global step of each is
  // not known here.
  const std::string directory = artifactPath(dir.string());
  for (const auto& e : fs::recursive_directory_iterator(dir / "checkpoints", ec)) {
    if (e.path().extension() != ".ipt") continue;
    const std::string file = artifactPath(e.path().string());
    store::Artifact a("checkpoint", file.rfind(directory + "/", 0) == 0 ? file.substr(directory.size() + 1) : file);
    a.runDirectory = directory;
    a.phase = e.path().parent_path().filename().string();
    a.host = hostName();
    std::string error;
    if (!fileDigest(file, a.sha256, a.size, error)) a.sha256.clear();
    c.artifacts.push_back(std::move(a));
  }
  const Ending ending = endingOf(dir, startedAt);
  c.status = ending.status;
  c.reason = ending.reason;
  c.endedAt = ending.endedAt;
  said = ending.said;
  return c;
}

enum class Completion { Whole, Completed, Live, Problem };

// Run `id`, already recorded with directory `dir`, made whole from the
// directory when the store holds it only in part (`what` says how).
Completion completeOne(store::RunStore& st, const fs::path& dir, long long id, std::string& what, std::string& warning) {
  const std::optional<store::RunRecord> r = st.run(id);
  if (!r) return Completion::Whole;  // deleted meanwhile: nothing to complete
  if (r->status == store::RunStatus::Running) {
    // Its process may still be recording: on this host if it is there, on
    // another if its heartbeat is fresh.
    const bool here = r->host == hostName();
    const double silent = store::nowSeconds() - r->heartbeatAt;
    if (here ? processAlive(r->host, r->pid) : !(silent > kHeartbeatGraceSeconds)) {
      what = "still being recorded by process " + std::to_string(r->pid) + " on " + r->host +
             " (import it once that run has ended)";
      return Completion::Live;
    }
  }
  what = unreadableFiles(dir);
  if (!what.empty()) return Completion::Problem;
  bool said = false;
  std::string left;
  const store::RunContents c = contentsOf(dir, r->startedAt, said, left);
  long long stored = 0;
  for (const auto& [key, summary] : r->metrics) stored += summary.count;
  const long long held = static_cast<long long>(c.points.size());
  const bool unended = r->status == store::RunStatus::Running || (r->status == store::RunStatus::Killed && said);
  // Never fewer points than the store has (a directory whose log was cut).
  if (held < stored || (held == stored && !unended)) return Completion::Whole;
  warning = left;
  st.completeRun(id, c);
  what = "run " + std::to_string(id) + " had " + std::to_string(stored) + " of its " + std::to_string(held) +
         " points and was " + store::name(r->status) + "; it has every point now, and is " + store::name(c.status);
  return Completion::Completed;
}

// The new run's id; 0 with `problem` when it cannot be imported, or with
// `problem` empty when another import recorded the directory first.
long long importOne(store::RunStore& st, const fs::path& dir, std::string& problem, std::string& warning) {
  problem = unreadableFiles(dir);
  if (!problem.empty()) return 0;
  const std::string planJson = readText(dir / "plan.json");
  nlohmann::ordered_json plan = nlohmann::ordered_json::parse(planJson, nullptr, false);
  if (plan.is_discarded() || !plan.contains("runs") || !plan["runs"].is_array() || plan["runs"].empty()) {
    problem = "plan.json is not a plan";
    return 0;
  }
  store::NewRun nr;
  nr.kind = store::RunKind::Run;
  nr.training = plan["runs"][0].value("name", dir.parent_path().filename().string());
  nr.script = readText(dir / "script.ipu");
  nr.planHash = ir::contentHash(plan);  // the plan's hash, as a run of it records (runtime/ir/plan_hash.h)
  nr.host = hostName();
  nr.pid = 0;
  nr.startedAt = startFromName(dir);
  if (std::isnan(nr.startedAt)) nr.startedAt = modified(dir / "plan.json");
  {
    // Parameters as a run records them: plan the script again.
    session::Session s;
    base::FileId f = s.addSource((dir / "script.ipu").string(), nr.script);
    const ir::ExecutionPlan* p = s.plan(f, true);
    if (p != nullptr)
      for (const auto& r : p->runs)
        if (r.name == nr.training) nr.parameters = runParameters(r);
    if (nr.parameters.empty()) nr.parameters["training"] = nr.training;
  }
  bool said = false;
  const store::RunContents contents = contentsOf(dir, nr.startedAt, said, warning);
  const std::optional<long long> created = st.createRunForDirectory(nr, artifactPath(dir.string()), contents);
  if (!created) {
    warning.clear();
    return 0;
  }
  return *created;
}
}  // namespace

ImportResult importRunDirectories(store::RunStore& st, const std::vector<std::string>& paths) {
  ImportResult result;
  for (const auto& path : paths) {
    std::vector<fs::path> dirs;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      result.problems.push_back(path + ": no such file or directory");
      continue;
    }
    findRunDirectories(path, dirs, 0);
    if (dirs.empty()) result.problems.push_back(path + ": no run directory (with plan.json and metrics.jsonl) in it");
    for (const auto& d : dirs) {
      const std::string absolute = artifactPath(d.string());
      if (const std::optional<long long> known = st.findByRunDirectory(absolute)) {
        std::string what, warning;
        switch (completeOne(st, d, *known, what, warning)) {
          case Completion::Whole: result.skipped.push_back(d.string()); break;
          case Completion::Completed: result.completed.push_back(d.string() + ": " + what); break;
          case Completion::Live: result.live.push_back(d.string() + ": " + what); break;
          case Completion::Problem: result.problems.push_back(d.string() + ": " + what); break;
        }
        if (!warning.empty()) result.warnings.push_back(d.string() + ": " + warning);
        continue;
      }
      std::string problem, warning;
      long long id = importOne(st, d, problem, warning);
      if (!warning.empty()) result.warnings.push_back(d.string() + ": " + warning);
      if (id != 0) result.imported.push_back({d.string(), id});
      else if (problem.empty()) result.skipped.push_back(d.string());
      else result.problems.push_back(d.string() + ": " + problem);
    }
  }
  return result;
}

}  // namespace ipu::runner
