#include "interpreter/runner/run_directory.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <sstream>

namespace ipu::runner {

namespace fs = std::filesystem;

namespace {

std::string timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

}  // namespace

std::optional<RunDirectory> RunDirectory::create(const std::string& root, const std::string& training, std::string& error) {
  std::error_code ec;
  fs::path base = fs::path(root) / training;
  fs::create_directories(base, ec);
  if (ec) {
    error = "cannot create `" + base.string() + "`: " + ec.message();
    return std::nullopt;
  }
  std::string stamp = timestamp();
  for (int n = 0; n < 1000; ++n) {
    fs::path dir = base / (n == 0 ? stamp : stamp + "-" + std::to_string(n));
    if (fs::create_directory(dir, ec)) {
      RunDirectory d(dir.string(), false);
      fs::create_directories(d.checkpoints(), ec);
      d.openLogs();
      if (d.ioFailed_) {
        error = "cannot write in `" + dir.string() + "`";
        return std::nullopt;
      }
      return d;
    }
    if (ec) {
      error = "cannot create `" + dir.string() + "`: " + ec.message();
      return std::nullopt;
    }
  }
  error = "too many runs started in the same second under `" + base.string() + "`";
  return std::nullopt;
}

std::optional<RunDirectory> RunDirectory::reopen(const std::string& path, std::string& error) {
  if (!fs::is_directory(path) || !fs::exists(fs::path(path) / "plan.json")) {
    error = "`" + path + "` is not a run directory (it has no plan.json)";
    return std::nullopt;
  }
  RunDirectory d(path, true);
  d.openLogs();
  if (d.ioFailed_) {
    error = "cannot write in `" + path + "`";
    return std::nullopt;
  }
  return d;
}

std::string RunDirectory::latest(const std::string& root, const std::string& training) {
  std::error_code ec;
  fs::path base = fs::path(root) / training;
  std::string best;
  for (const auto& e : fs::directory_iterator(base, ec))
    if (e.is_directory() && fs::exists(e.path() / "plan.json")) best = std::max(best, e.path().string());
  return best;
}

void RunDirectory::openLogs() {
  metrics_.open(path_ + "/metrics.jsonl", std::ios::app);
  events_.open(path_ + "/events.jsonl", std::ios::app);
  ioFailed_ = !metrics_ || !events_;
}

bool RunDirectory::writeFile(const std::string& name, const std::string& text, std::string& error) {
  const std::string target = path_ + "/" + name, tmp = target + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      error = "cannot write `" + tmp + "`";
      ioFailed_ = true;
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    error = "cannot replace `" + target + "`: " + ec.message();
    ioFailed_ = true;
    return false;
  }
  return true;
}

void RunDirectory::event(ir::Json e) {
  events_ << e.dump(-1) << "\n";
  events_.flush();
  if (!events_) ioFailed_ = true;
}

train::PhaseDecision RunDirectory::phaseStart(train::Source, const train::PhaseInfo& info) {
  ir::Json e = ir::Json::object();
  e["event"] = "phase_start";
  e["phase"] = info.phase;
  e["steps"] = info.steps;
  e["checkpoint"] = info.checkpoint.empty() ? ir::Json() : ir::Json(info.checkpoint);
  event(std::move(e));
  return {};
}

train::StopRequest RunDirectory::step(train::Source, const train::StepInfo& s, std::map<std::string, double>& logged) {
  if (resumed_ && !trimmed_) {
    // Steps after the checkpoint the run resumes from were logged by the
    // interrupted run and are about to be run again: drop them.
    trimmed_ = true;
    metrics_.close();
    std::ifstream in(path_ + "/metrics.jsonl");
    std::ostringstream kept;
    std::string line;
    const std::string key = "\"global_step\":";
    while (std::getline(in, line)) {
      auto at = line.find(key);
      long long g = at == std::string::npos ? 0 : std::atoll(line.c_str() + at + key.size());
      if (g < s.globalStep) kept << line << "\n";
    }
    in.close();
    std::string error;
    writeFile("metrics.jsonl", kept.str(), error);
    metrics_.open(path_ + "/metrics.jsonl", std::ios::app);
  }
  ir::Json j = ir::Json::object();
  j["phase"] = s.phase;
  j["step"] = s.step;
  j["global_step"] = s.globalStep;
  j["loss"] = ir::Json(s.loss);
  j["lr"] = s.lr;
  j["loss_scale"] = s.lossScale;
  j["skipped"] = s.skipped;
  j["samples_per_s"] = ir::Json(s.samplesPerSecond);
  j["step_time_s"] = ir::Json(s.stepTimeSeconds);
  for (const auto& [k, v] : s.metrics) j[k] = ir::Json(v);
  for (const auto& [k, v] : logged) j[k] = ir::Json(v);
  metrics_ << j.dump(-1) << "\n";
  metrics_.flush();
  ++steps_;
  if (!metrics_) ioFailed_ = true;
  return {};
}

train::StopRequest RunDirectory::phaseEnd(train::Source, const train::PhaseInfo& info) {
  ir::Json e = ir::Json::object();
  e["event"] = "phase_end";
  e["phase"] = info.phase;
  e["steps_run"] = info.stepsRun;
  e["checkpoint"] = info.checkpoint.empty() ? ir::Json() : ir::Json(info.checkpoint);
  ir::Json m = ir::Json::object();
  for (const auto& [k, v] : info.metrics) m[k] = ir::Json(v);
  e["evaluation"] = std::move(m);
  event(std::move(e));
  return {};
}

}  // namespace ipu::runner
