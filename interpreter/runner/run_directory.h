// The record of one training run on disk, the seed of experiment tracking:
//
//   runs/<training>/<YYYYMMDD-HHMMSS>/
//     script.ipu      the script as it was run (for the REPL: its workspace)
//     plan.json       the run's plan (docs/plan.md)
//     metrics.jsonl   one JSON object per step (docs/run.md lists the keys)
//     events.jsonl    phase starts and ends (with held-out evaluation), stops
//     summary.json    how it ended: status, steps per phase, evaluation, checkpoints
//     checkpoints/    the emulator's checkpoints (--resume continues from them)
//
// RunDirectory is a train::Observer: it writes each step as it happens and
// flushes, so an interrupted run keeps every step it finished. Every file is
// written in full or replaced atomically (files::writeFileSafely), never left
// half-written, except the append-only JSONL logs, whose lines are written
// whole; a log whose last line was cut off (a crash, a full disk) is repaired
// before anything is appended: the torn line is dropped and reported.
//
// One writer at a time: the directory is locked (flock on `.lock`) for as
// long as a RunDirectory holds it, so a second `ipu run --resume` of the same
// run is refused at once instead of interleaving with the first. The lock
// goes with the process, so a killed run never leaves a stale lock.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/ir/json.h"
#include "runtime/train/events.h"

namespace ipu::runner {

class RunDirectory : public train::Observer {
 public:
  // A new directory under `root` for training `training` (created, with a
  // unique timestamped name), or an existing one to resume.
  static std::optional<RunDirectory> create(const std::string& root, const std::string& training, std::string& error);
  // `busy` (if given) is set when another process holds the directory.
  static std::optional<RunDirectory> reopen(const std::string& path, std::string& error, bool* busy = nullptr);
  // The most recent run directory of `training` under `root` ("" if none).
  static std::string latest(const std::string& root, const std::string& training);

  const std::string& path() const { return path_; }
  std::string checkpoints() const { return path_ + "/checkpoints"; }
  bool resumed() const { return resumed_; }

  bool writeFile(const std::string& name, const std::string& text, std::string& error);  // atomically

  train::PhaseDecision phaseStart(train::Source, const train::PhaseInfo&) override;
  train::StopRequest step(train::Source, const train::StepInfo&, std::map<std::string, double>& logged) override;
  train::StopRequest phaseEnd(train::Source, const train::PhaseInfo&) override;
  void event(ir::Json event);  // one line of events.jsonl
  bool ioFailed() const { return ioFailed_; }
  // What was repaired when the directory was opened ("metrics.jsonl: ..."), for the user.
  const std::vector<std::string>& repairs() const { return repairs_; }
  bool stepsRecorded() const { return steps_ > 0; }
  // A reopened directory: the global step up to which metrics.jsonl has a
  // record of every step (0: none), where a resume may continue from without
  // leaving a step unrecorded.
  long long completeSteps() const { return completeSteps_; }

 private:
  explicit RunDirectory(std::string path, bool resumed) : path_(std::move(path)), resumed_(resumed) {}
  bool lock(std::string& error, bool* busy);
  void openLogs();
  // An append-only log: opened without blocking, a regular file only.
  class AppendLog {
   public:
    AppendLog() = default;
    AppendLog(AppendLog&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    AppendLog& operator=(AppendLog&& o) noexcept;
    AppendLog(const AppendLog&) = delete;
    ~AppendLog() { close(); }
    bool open(const std::string& path);
    bool writeLine(const std::string& line);  // the line and its newline, whole
    void close();
    bool isOpen() const { return fd_ >= 0; }

   private:
    int fd_ = -1;
  };
  struct LockFile {
    int fd = -1;
    LockFile() = default;
    LockFile(LockFile&& o) noexcept : fd(o.fd) { o.fd = -1; }
    LockFile& operator=(LockFile&& o) noexcept;
    LockFile(const LockFile&) = delete;
    ~LockFile();
  };
  std::string path_;
  bool resumed_ = false;
  bool trimmed_ = false;  // on resume: steps after the checkpoint were dropped from metrics.jsonl
  bool ioFailed_ = false;
  long long steps_ = 0;
  long long completeSteps_ = 0;
  AppendLog metrics_, events_;
  LockFile lock_;
  std::vector<std::string> repairs_;
};

}  // namespace ipu::runner
