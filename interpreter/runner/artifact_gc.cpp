#include "interpreter/runner/artifact_gc.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/sweep_start.h"

namespace ipu::runner {

namespace fs = std::filesystem;

const char* name(KeepCheckpoints k) {
  switch (k) {
    case KeepCheckpoints::All: return "all";
    case KeepCheckpoints::Last: return "last";
    case KeepCheckpoints::Best: return "best";
  }
  return "all";
}

std::optional<KeepCheckpoints> parseKeepCheckpoints(const std::string& text) {
  for (KeepCheckpoints k : {KeepCheckpoints::All, KeepCheckpoints::Last, KeepCheckpoints::Best})
    if (text == name(k)) return k;
  return std::nullopt;
}

namespace {

bool isFinal(const store::Artifact& a) { return fs::path(a.path).filename() == "final.ipt"; }

}  // namespace

PrunePlan planPrune(store::RunStore& runs, store::SweepStore& sweeps, const RetentionRule& rule, double now) {
  PrunePlan plan;
  if (rule.keep == KeepCheckpoints::All) return plan;
  // Runs kept whole: what unfinished sweeps start from.
  std::map<long long, std::string> kept;
  std::map<std::string, long long> sweepIds;
  const std::vector<store::SweepRecord> all = sweeps.listSweeps();
  for (const auto& sw : all) sweepIds[sw.name] = sw.id;
  // A sweep's best run, for `best`.
  std::map<std::string, std::optional<long long>> bestOf;
  for (const auto& sw : all) {
    const store::SweepStatus st = sweeps.status(sw.id);
    bestOf[sw.name] = st.best ? st.best->runId : std::nullopt;
  }
  for (const auto& sw : all) {
    const bool unfinished = sw.state == store::SweepState::Running || sw.state == store::SweepState::Paused;
    if (!unfinished || !sw.spec.from) continue;
    const std::string why = "sweep `" + sw.name + "` starts from it";
    const sweep::StartFrom& from = *sw.spec.from;
    if (from.kind == sweep::StartFrom::Kind::SweepBest) {
      auto source = sweepIds.find(from.name);
      if (source == sweepIds.end()) continue;
      const store::SweepStatus st = sweeps.status(source->second);
      if (st.sweep.state == store::SweepState::Running || st.sweep.state == store::SweepState::Paused) {
        // Any of its trials may yet be its best.
        for (const auto& t : sweeps.trials(source->second))
          if (t.runId) kept.emplace(*t.runId, why + " (the best trial of `" + from.name + "`, which is not finished)");
        continue;
      }
    }
    const TrialStart start = resolveTrialStart(from, sweeps, runs);
    if (start.runId != 0) kept.emplace(start.runId, why);
  }
  const std::string here = hostName();
  for (const auto& listed : runs.listRuns()) {
    if (listed.kind != store::RunKind::Run) continue;
    if (listed.status == store::RunStatus::Running) continue;
    const double ended = std::isfinite(listed.endedAt) ? listed.endedAt : listed.heartbeatAt;
    if (rule.olderThanDays > 0 && !(std::isfinite(ended) && now - ended >= rule.olderThanDays * 86400)) continue;
    if (auto k = kept.find(listed.id); k != kept.end()) {
      plan.protectedRuns.push_back(listed.name + ": " + k->second);
      continue;
    }
    std::optional<store::RunRecord> r = runs.run(listed.id);
    if (!r) continue;
    std::vector<const store::Artifact*> checkpoints;
    for (const auto& a : r->artifacts)
      if (a.kind == "checkpoint") checkpoints.push_back(&a);
    if (checkpoints.empty()) continue;
    // A trial that is not its sweep's best keeps nothing under `best`.
    bool keepNone = false;
    if (rule.keep == KeepCheckpoints::Best) {
      auto sweep = r->parameters.find("sweep");
      if (sweep != r->parameters.end()) {
        auto best = bestOf.find(sweep->second);
        keepNone = best != bestOf.end() && best->second != r->id;
      }
    }
    const store::Artifact* last = nullptr;
    for (const auto* a : checkpoints)
      if (a->step >= 0 && (last == nullptr || a->step > last->step || (a->step == last->step && isFinal(*a)))) last = a;
    for (const auto* a : checkpoints) {
      if (a->step < 0) continue;  // recorded before version 4: nothing to order it by
      if (!keepNone && (a == last || isFinal(*a))) continue;
      PrunedCheckpoint p;
      p.runId = r->id;
      p.runName = r->name;
      p.artifact = *a;
      const std::string file = store::artifactFile(*a);
      std::error_code ec;
      p.fileHere = (a->host.empty() || a->host == here) && fs::is_regular_file(file, ec);
      p.bytes = a->size >= 0 ? a->size : 0;
      if (p.fileHere && a->size < 0) p.bytes = static_cast<long long>(fs::file_size(file, ec));
      if (a->stored) plan.storeBytes += p.bytes;
      if (p.fileHere) plan.fileBytes += p.bytes;
      if (!p.fileHere && !a->host.empty() && a->host != here) ++plan.elsewhere;
      plan.checkpoints.push_back(std::move(p));
    }
  }
  return plan;
}

std::vector<std::string> prune(store::RunStore& runs, const PrunePlan& plan) {
  std::vector<std::string> problems;
  std::map<long long, std::vector<std::string>> byRun;
  for (const auto& p : plan.checkpoints) byRun[p.runId].push_back(p.artifact.path);
  for (const auto& [run, paths] : byRun) runs.removeArtifacts(run, paths);
  // The records are gone first: a file without a record is what any run
  // directory has; a record without its file would promise what is not there.
  for (const auto& p : plan.checkpoints) {
    if (!p.fileHere) continue;
    std::error_code ec;
    fs::remove(store::artifactFile(p.artifact), ec);
    if (ec) problems.push_back("`" + store::artifactFile(p.artifact) + "` could not be removed: " + ec.message());
  }
  return problems;
}

}  // namespace ipu::runner
