#include "interpreter/runner/run_directory.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/files/regular_file.h"
#include "runtime/files/safe_write.h"

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

// A log whose last line has no newline was cut off while being written: the
// torn line is dropped (it cannot be parsed, and the next record would be
// glued to it). Returns what was done, "" if nothing.
std::string repairLog(const std::string& path, const std::string& name) {
  files::ReadResult r = files::readRegularFile(path, std::uint64_t{1} << 36);
  if (!r.ok() || r.text.empty() || r.text.back() == '\n') return "";
  const std::size_t keep = r.text.rfind('\n') == std::string::npos ? 0 : r.text.rfind('\n') + 1;
  if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0) return "";
  return name + ": its last line was cut off (" + std::to_string(r.text.size() - keep) +
         " bytes, from a run that was interrupted while writing it); it was dropped";
}

}  // namespace

RunDirectory::AppendLog& RunDirectory::AppendLog::operator=(AppendLog&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

bool RunDirectory::AppendLog::open(const std::string& path) {
  close();
  // O_NONBLOCK: a FIFO put in place of the log must not hang the run.
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
  if (fd_ < 0) return false;
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    close();
    return false;
  }
  ::fcntl(fd_, F_SETFL, O_APPEND);
  return true;
}

bool RunDirectory::AppendLog::writeLine(const std::string& line) {
  if (fd_ < 0) return false;
  const std::string whole = line + "\n";  // one write: a line is never interleaved
  std::size_t done = 0;
  while (done < whole.size()) {
    const ssize_t n = ::write(fd_, whole.data() + done, whole.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

void RunDirectory::AppendLog::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

RunDirectory::LockFile::~LockFile() {
  if (fd >= 0) ::close(fd);  // releases the flock
}

RunDirectory::LockFile& RunDirectory::LockFile::operator=(LockFile&& o) noexcept {
  if (this != &o) {
    if (fd >= 0) ::close(fd);
    fd = o.fd;
    o.fd = -1;
  }
  return *this;
}

bool RunDirectory::lock(std::string& error, bool* busy) {
  const std::string path = path_ + "/.lock";
  lock_.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0644);
  struct stat st {};
  if (lock_.fd < 0 || ::fstat(lock_.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "cannot lock `" + path_ + "` (its `.lock` is not a file I can write)";
    return false;
  }
  if (::flock(lock_.fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      char pid[32] = {0};
      const ssize_t n = ::pread(lock_.fd, pid, sizeof pid - 1, 0);
      std::string who = n > 0 ? std::string(pid, static_cast<std::size_t>(n)) : std::string();
      while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
      error = "`" + path_ + "` is in use by another `ipu run`" +
              (who.empty() || who.find_first_not_of("0123456789") != std::string::npos ? std::string()
                                                                                        : " (process " + who + ")") +
              "; wait for it to finish, or stop it first";
      if (busy != nullptr) *busy = true;
    } else {
      error = "cannot lock `" + path_ + "`: " + std::strerror(err);
    }
    return false;
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_.fd, 0) == 0) (void)!::pwrite(lock_.fd, pid.data(), pid.size(), 0);
  return true;
}

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
      if (!d.lock(error, nullptr)) return std::nullopt;
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

std::optional<RunDirectory> RunDirectory::reopen(const std::string& path, std::string& error, bool* busy) {
  std::error_code ec;
  if (!fs::is_directory(path, ec) || !fs::exists(fs::path(path) / "plan.json", ec)) {
    error = "`" + path + "` is not a run directory (it has no plan.json)";
    return std::nullopt;
  }
  RunDirectory d(path, true);
  if (!d.lock(error, busy)) return std::nullopt;
  // Under the lock: nobody else is appending while the logs are repaired.
  for (const char* log : {"metrics.jsonl", "events.jsonl"}) {
    std::string done = repairLog(path + "/" + log, log);
    if (!done.empty()) d.repairs_.push_back(std::move(done));
  }
  {
    // The steps metrics.jsonl records whole: 1, 2, ... up to the first missing.
    files::ReadResult log = files::readRegularFile(path + "/metrics.jsonl", std::uint64_t{1} << 36);
    std::set<long long> steps;
    std::istringstream in(log.text);
    std::string line;
    while (std::getline(in, line)) {
      const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      const auto step = record.is_object() ? record.find("global_step") : record.end();
      if (record.is_object() && step != record.end() && step->is_number_integer()) steps.insert(step->get<long long>());
    }
    while (steps.count(d.completeSteps_ + 1) != 0) ++d.completeSteps_;
  }
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
  const bool metrics = metrics_.open(path_ + "/metrics.jsonl");
  const bool events = events_.open(path_ + "/events.jsonl");
  ioFailed_ = !metrics || !events;
}

bool RunDirectory::writeFile(const std::string& name, const std::string& text, std::string& error) {
  if (!files::writeFileSafely(path_ + "/" + name, text, error)) {
    ioFailed_ = true;
    return false;
  }
  return true;
}

void RunDirectory::event(ir::Json e) {
  if (!events_.writeLine(e.dump(-1))) ioFailed_ = true;
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
    files::ReadResult before = files::readRegularFile(path_ + "/metrics.jsonl", std::uint64_t{1} << 36);
    std::istringstream in(before.text);
    std::ostringstream kept;
    std::string line;
    while (std::getline(in, line)) {
      // A line that is not a record (torn by the interruption) goes too.
      const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!record.is_object()) continue;
      const auto step = record.find("global_step");
      const long long g = step != record.end() && step->is_number() ? step->get<long long>() : 0;
      if (g < s.globalStep) kept << line << "\n";
    }
    std::string error;
    if (before.ok()) writeFile("metrics.jsonl", kept.str(), error);
    if (!metrics_.open(path_ + "/metrics.jsonl")) ioFailed_ = true;
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
  if (!metrics_.writeLine(j.dump(-1))) ioFailed_ = true;
  ++steps_;
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
