#include "interpreter/runner/sweep_start.h"

#include <filesystem>
#include <system_error>

#include "interpreter/runner/checkpoint_fetch.h"

namespace ipu::runner {

namespace fs = std::filesystem;

namespace {

// The last checkpoint of run `r`, or why there is none.
TrialStart lastCheckpoint(const store::RunRecord& r) {
  TrialStart out;
  if (r.kind == store::RunKind::Estimate) {
    out.problem = "run " + r.name + " is an estimate (`ipu estimate`), which has no weights";
    return out;
  }
  std::string newest, missing, notAFile;
  fs::file_time_type newestTime{};
  const store::Artifact* chosen = nullptr;
  bool chosenHere = false;
  // Records with a step (schema version 4) are ordered by it; older ones by
  // their files' times.
  for (const auto& a : r.artifacts) {
    if (a.kind != "checkpoint") continue;
    const std::string file = store::artifactFile(a);
    const bool final = fs::path(a.path).filename() == "final.ipt";
    std::error_code ec;
    const fs::file_status st = fs::status(file, ec);
    const bool here = !ec && fs::is_regular_file(st);
    if (!ec && fs::exists(st) && !here && !a.stored) {
      // There, but a FIFO, a directory or a device: not a checkpoint to read
      // (and not one on another host).
      notAFile = file;
      continue;
    }
    if (a.step >= 0) {
      if (!here && !a.stored) {
        missing = file;
        continue;
      }
      if (chosen == nullptr || a.step > chosen->step || (a.step == chosen->step && final)) {
        chosen = &a;
        chosenHere = here;
      }
      continue;
    }
    const fs::file_time_type t = fs::last_write_time(file, ec);
    if (ec || !here) {
      missing = file;
      continue;
    }
    // On equal times, a phase's final checkpoint is later than its steps'.
    const bool later = newest.empty() || t > newestTime || (t == newestTime && final);
    if (later) {
      newest = file;
      newestTime = t;
    }
  }
  if (chosen != nullptr) {
    out.status = TrialStart::Status::Ready;
    out.artifact = *chosen;
    // A file here is checked against its checksum before it is used; one
    // that is not here comes from the store.
    out.fetch = !chosenHere || !chosen->sha256.empty();
    out.checkpoint = chosenHere ? store::artifactFile(*chosen) : std::string();
    out.runId = r.id;
    out.runName = r.name;
    return out;
  }
  if (newest.empty()) {
    if (!notAFile.empty()) {
      out.problem = "the checkpoint `" + notAFile + "` of run " + r.name +
                    " is not a regular file (a FIFO, a directory or a device stands at its path): put the checkpoint "
                    "back, or start from another run";
      return out;
    }
    out.problem = missing.empty() ? "run " + r.name + " recorded no checkpoint"
                                  : "the checkpoints of run " + r.name + " are not on this host (such as `" + missing +
                                        "`), and their bytes are not in the store: an agent needs them on a file system it shares with the run's "
                                        "host, or the run recorded with --artifacts store";
    return out;
  }
  out.status = TrialStart::Status::Ready;
  out.checkpoint = newest;
  out.runId = r.id;
  out.runName = r.name;
  return out;
}

}  // namespace

TrialStart resolveTrialStart(const sweep::StartFrom& from, store::SweepStore& sweeps, store::RunStore& runs) {
  TrialStart out;
  if (from.kind == sweep::StartFrom::Kind::Run) {
    std::optional<store::RunRecord> r = store::findRun(runs, from.name);
    if (!r) {
      out.problem = "there is no run `" + from.name + "` in the store `" + runs.location() + "` (`ipu runs` lists them)";
      return out;
    }
    return lastCheckpoint(*r);
  }
  std::optional<store::SweepRecord> source = sweeps.sweep(from.name);
  if (!source) {
    out.problem = "sweep `" + from.name + "` is not in the store `" + sweeps.location() +
                  "`: run it first (`ipu sweep FILE " + from.name + "`)";
    return out;
  }
  store::SweepStatus st = sweeps.status(source->id);
  if (!st.best) {
    const bool mayFinishOne = st.sweep.state == store::SweepState::Running || st.sweep.state == store::SweepState::Paused;
    out.status = mayFinishOne ? TrialStart::Status::Wait : TrialStart::Status::Unavailable;
    out.problem = "sweep `" + from.name + "` has no finished trial" +
                  (mayFinishOne ? std::string(" yet (it is ") + store::name(st.sweep.state) + ")"
                                : std::string(", and it is ") + store::name(st.sweep.state));
    return out;
  }
  if (!st.best->runId) {
    out.problem = "the best trial (" + std::to_string(st.best->index) + ") of sweep `" + from.name + "` has no run";
    return out;
  }
  std::optional<store::RunRecord> r = runs.run(*st.best->runId);
  if (!r) {
    out.problem = "the run " + std::to_string(*st.best->runId) + " of the best trial (" +
                  std::to_string(st.best->index) + ") of sweep `" + from.name + "` is no longer in the store";
    return out;
  }
  out = lastCheckpoint(*r);
  out.trial = st.best->index;
  if (out.status != TrialStart::Status::Ready)
    out.problem = "the best trial (" + std::to_string(st.best->index) + ") of sweep `" + from.name + "`: " + out.problem;
  return out;
}

void fetchTrialStart(TrialStart& start, store::RunStore& runs, const std::string& runsRoot) {
  if (start.status != TrialStart::Status::Ready || !start.fetch) return;
  store::RunRecord owner;
  owner.id = start.runId;
  owner.name = start.runName;
  const CheckpointFile f = localCheckpoint(runs, owner, start.artifact, runsRoot);
  if (!f.ok) {
    start.status = TrialStart::Status::Unavailable;
    start.problem = f.problem;
    start.checkpoint.clear();
    return;
  }
  start.checkpoint = f.path;
  start.fetch = false;
}

std::string describeStart(const sweep::StartFrom& from, const TrialStart& start) {
  if (from.kind == sweep::StartFrom::Kind::SweepBest)
    return "the best trial (" + std::to_string(start.trial) + ") of sweep `" + from.name + "`, run " + start.runName;
  return "run " + start.runName;
}

std::string unavailableStart(const std::string& sweep, const sweep::StartFrom& from, const TrialStart& start) {
  return "sweep `" + sweep + "` starts from " +
         (from.kind == sweep::StartFrom::Kind::SweepBest ? "the best trial of sweep `" + from.name + "`" : "run `" + from.name + "`") +
         ", which has no checkpoint to start from: " + start.problem;
}

}  // namespace ipu::runner
