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
// written in full or replaced atomically, never left half-written, except the
// append-only JSONL logs, whose lines are written whole.
#pragma once

#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "runtime/ir/json.h"
#include "runtime/train/events.h"

namespace ipu::runner {

class RunDirectory : public train::Observer {
 public:
  // A new directory under `root` for training `training` (created, with a
  // unique timestamped name), or an existing one to resume.
  static std::optional<RunDirectory> create(const std::string& root, const std::string& training, std::string& error);
  static std::optional<RunDirectory> reopen(const std::string& path, std::string& error);
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
  bool stepsRecorded() const { return steps_ > 0; }

 private:
  explicit RunDirectory(std::string path, bool resumed) : path_(std::move(path)), resumed_(resumed) {}
  void openLogs();
  std::string path_;
  bool resumed_ = false;
  bool trimmed_ = false;  // on resume: steps after the checkpoint were dropped from metrics.jsonl
  bool ioFailed_ = false;
  long long steps_ = 0;
  std::ofstream metrics_, events_;
};

}  // namespace ipu::runner
