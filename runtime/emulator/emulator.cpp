#include "runtime/emulator/emulator.h"
#include "runtime/ir/phased.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <thread>

#include "runtime/emulator/data.h"
#include "runtime/emulator/model.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/emulator/trainer.h"
#include "runtime/ir/instance_traffic.h"

#ifndef IPU_EMULATOR_CORPUS
#define IPU_EMULATOR_CORPUS "runtime/emulator/corpus"
#endif

namespace ipu::emu {

namespace fs = std::filesystem;

namespace {

// Held-out figures between instances, exactly: one `key<TAB>value` line
// each, the value in hexadecimal floating point.
std::string evaluationText(const std::map<std::string, double>& figures) {
  std::string out;
  char buf[64];
  for (const auto& [key, value] : figures) {
    std::snprintf(buf, sizeof buf, "%a", value);
    out += key + "\t" + buf + "\n";
  }
  return out;
}

std::map<std::string, double> evaluationFromText(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t tab = line.find('\t');
    if (tab != std::string::npos) out[line.substr(0, tab)] = std::strtod(line.c_str() + tab + 1, nullptr);
  }
  return out;
}

}  // namespace

const std::vector<CodeTitle>& emulatorCodes() {
  static const std::vector<CodeTitle> codes = {
      {code::kPlanDoesNotFit, "the plan does not fit its IPUs"},
      {code::kUnsupportedLayer, "a layer the emulator cannot run"},
      {code::kHostMemory, "the host has too little memory for the emulation"},
      {code::kDataset, "the dataset cannot be read or used"},
      {code::kCheckpoint, "a checkpoint is missing, unreadable or incompatible"},
      {code::kUnsupportedModel, "a layer stack the emulator cannot execute"},
      {code::kIpuMemory, "a virtual IPU ran out of memory"},
      {code::kMissingPolicy, "a Lua policy the caller did not supply"},
      {code::kIo, "a file could not be written"},
      {code::kDiverged, "the training diverged: a step's loss is not a finite number"},
      {code::kImageFile, "an image dataset file is damaged or does not fit the model"},
      {code::kInstances, "the replicas do not divide over the instances"},
      {code::kInternal, "an internal error of the emulator"},
  };
  return codes;
}

std::string defaultCorpusPath() { return IPU_EMULATOR_CORPUS; }

std::string checkpointPath(const std::string& directory, const std::string& phase, long long step, bool final) {
  char name[64];
  if (final)
    std::snprintf(name, sizeof name, "final.ipt");
  else
    std::snprintf(name, sizeof name, "step-%08lld.ipt", step);
  return (fs::path(directory) / phase / name).string();
}

namespace {

Expected<std::string> corpusPathFor(const ir::PhasePlan& ph, const Options& o) {
  if (ph.dataset.kind == ir::DatasetKind::Synthetic || ph.dataset.path.empty()) return o.builtinCorpus;
  if (ph.dataset.kind != ir::DatasetKind::Text)
    return Error{code::kDataset, "dataset `" + ph.dataset.name + "` is of kind `" + ir::nameOf(ph.dataset.kind) + "`",
                 "the emulator reads `kind: text` datasets (a .txt file or a directory of them)", ph.source};
  fs::path p(ph.dataset.path);
  if (p.is_relative() && !o.datasetDirectory.empty()) p = fs::path(o.datasetDirectory) / p;
  return p.string();
}

int vocabOf(const ir::PhasePlan& ph) {
  for (const auto& l : ph.layers)
    if (l.op == ir::LayerOp::Embedding)
      for (const auto& a : l.attributes)
        if (a.name == "vocab") return static_cast<int>(a.number);
  return 0;
}

bool isMlp(const ir::PhasePlan& ph) { return !ph.layers.empty() && ph.layers.front().op == ir::LayerOp::Dense; }
bool isImage(const ir::PhasePlan& ph) { return !ph.layers.empty() && ph.layers.front().op == ir::LayerOp::ConvStem; }

// The image file of an image model's phase: null for synthetic images.
Expected<std::shared_ptr<const ImageSet>> imagesFor(const ir::PhasePlan& ph, const Options& o) {
  if (ph.dataset.kind == ir::DatasetKind::Synthetic || ph.dataset.path.empty()) return std::shared_ptr<const ImageSet>();
  if (ph.dataset.kind != ir::DatasetKind::Files)
    return Error{code::kDataset, "dataset `" + ph.dataset.name + "` is of kind `" + ir::nameOf(ph.dataset.kind) + "`",
                 "an image model reads `kind: files` datasets (an image file, docs/emulator.md) or synthetic images", ph.source};
  fs::path p(ph.dataset.path);
  if (p.is_relative() && !o.datasetDirectory.empty()) p = fs::path(o.datasetDirectory) / p;
  auto loaded = loadImageFile(p.string(), ph.dataset.path);
  if (!loaded) {
    Error e = loaded.error();
    e.where = ph.source;
    return e;
  }
  return loaded.value();
}

// The latest checkpoint of a run: (phase index, path, is final).
struct ResumePoint {
  int phase = -1;
  std::string path;
  bool final = false;
  long long step = 0;
};

// `atMost`: the latest global step a checkpoint may be at (-1: any);
// `later`, when given, is set to the first global step of a checkpoint
// passed over for being later (0: none).
ResumePoint latestCheckpoint(const ir::RunPlan& plan, const std::string& dir, long long stepLimit, long long atMost,
                             long long* later = nullptr) {
  ResumePoint best;
  long long base = 0;  // global steps of the phases before
  for (int i = 0; i < static_cast<int>(plan.phases.size()); ++i) {
    const ir::PhasePlan& ph = plan.phases[static_cast<std::size_t>(i)];
    const long long steps = stepLimit > 0 ? std::min(stepLimit, ph.steps) : ph.steps;
    const fs::path d = fs::path(dir) / ph.name;
    const long long phaseBase = base;
    base += steps;
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    auto passedOver = [&](long long global) {
      if (atMost < 0 || global <= atMost) return false;
      if (later != nullptr && (*later == 0 || global < *later)) *later = global;
      return true;
    };
    // Whatever is named final.ipt is the final checkpoint (a directory or a
    // FIFO there is then refused by the reader, never skipped over).
    if (fs::exists(fs::symlink_status(d / "final.ipt", ec)) && !passedOver(phaseBase + steps)) {
      best = {i, (d / "final.ipt").string(), true, 0};
      continue;
    }
    long long top = -1;
    std::string path;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string f = e.path().filename().string();
      long long s = 0;
      if (f.size() == 17 && f.rfind("step-", 0) == 0 && f.substr(13) == ".ipt" && std::sscanf(f.c_str() + 5, "%lld", &s) == 1 &&
          s > top && !passedOver(phaseBase + s)) {
        top = s;
        path = e.path().string();
      }
    }
    if (top >= 0) best = {i, path, false, top};
  }
  return best;
}

Error withWhere(Error e, const ir::SourceRef& where) {
  if (e.where.file.empty()) e.where = where;
  return e;
}

// Steps in a row with a non-finite loss after which a run has diverged.
constexpr int kDivergedSteps = 8;

bool allFinite(const std::vector<std::pair<std::string, Mat>>& tensors) {
  for (const auto& t : tensors)
    if (!t.second.allFinite()) return false;
  return true;
}

// A checkpoint is trained on only if it is what it claims to be: its
// checksum matches (no flipped byte), it belongs to this run, phase and plan,
// its step is one the phase can reach (and the one its name says), and its
// tensors are finite. `expectedStep`: the step its file name says, 0 for
// `final.ipt` (any step of the phase), -1 when it only provides weights
// (`from`, ctx:start_from: any phase of the run).
// `ownRun`: the checkpoint must be one this run wrote (its training and plan);
// otherwise (Options::initialWeights) it may come from any run, and only its
// tensors' names and shapes have to fit the model (PhaseTrainer::setWeights).
Expected<bool> verifyCheckpoint(const TensorFile& f, const std::string& path, const ir::RunPlan& plan,
                                const std::string& phase, long long phaseSteps, long long expectedStep,
                                const Options& options, const ir::SourceRef& where, bool ownRun = true) {
  auto refuse = [&](const std::string& why) -> Expected<bool> {
    return Error{code::kCheckpoint, "checkpoint `" + path + "` " + why,
                 ownRun ? "delete it to continue from the checkpoint before it, or start a new run without --resume"
                        : "start from a checkpoint `ipu run` wrote for a model of the same shapes",
                 where};
  };
  if (!f.checksummed) return refuse("has no checksum (damaged, or not written by this version of ipu)");
  if (f.get("format") != "ipu-checkpoint/1") return refuse("is not a training checkpoint");
  if (ownRun && f.get("run") != plan.name)
    return refuse("belongs to training `" + f.get("run") + "`, not `" + plan.name + "`");
  if (ownRun && !options.planIdentity.empty() && f.get("plan") != options.planIdentity)
    return refuse("was written for another plan of training `" + plan.name + "`");
  if (expectedStep >= 0) {
    if (f.get("phase") != phase) return refuse("belongs to phase `" + f.get("phase") + "`, not `" + phase + "`");
    const std::string stepText = f.get("step");
    char* end = nullptr;
    const long long step = std::strtoll(stepText.c_str(), &end, 10);
    if (stepText.empty() || *end != '\0' || step < 1 || step > phaseSteps)
      return refuse("claims step `" + stepText + "`, not a step of phase `" + phase + "` (1 to " +
                    std::to_string(phaseSteps) + ")");
    if (expectedStep > 0 && step != expectedStep)
      return refuse("claims step " + stepText + " but its name says step " + std::to_string(expectedStep));
  }
  for (const auto& [name, m] : f.tensors)
    if (!m.allFinite()) return refuse("holds values that are not finite numbers in `" + name + "`");
  return true;
}

}  // namespace

Expected<RunOutcome> run(const ir::RunPlan& plan, const Options& options) {
  try {
    RunOutcome outcome;
    const long long seed = options.seed ? *options.seed : plan.seed;
    const int threads = options.hostThreads > 0 ? options.hostThreads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (const auto& ph : plan.phases)
      if (!ph.fits)
        return Error{code::kPlanDoesNotFit,
                     "phase `" + ph.name + "` of mapping `" + ph.mapping.name + "` does not fit its IPUs (IPU2001 in `ipu plan`)",
                     "`ipu plan` lists the changes that make it fit", ph.mapping.source};

    Instances* instances = options.instances != nullptr && options.instances->count() > 1 ? options.instances.get() : nullptr;
    const bool writer = instances == nullptr || instances->rank() == 0;
    // Instance 0's decision on every instance (its observer is the one that hears the run).
    auto agreed = [&](train::StopRequest s) {
      if (instances == nullptr) return s;
      const std::string m = instances->broadcast(s.stop ? "1" + s.reason : "0");
      s.stop = m[0] == '1';
      s.reason = m.substr(1);
      return s;
    };
    auto cancelled = [&] {
      const bool mine = options.cancel != nullptr && options.cancel->load();
      return instances != nullptr ? instances->any(mine) : mine;
    };

    ResumePoint resume;
    if (options.resume && !options.checkpointDirectory.empty()) {
      long long atMost = options.resumeAtMost;
      if (instances != nullptr) atMost = std::stoll(instances->broadcast(std::to_string(atMost)));
      long long later = 0;
      resume = latestCheckpoint(plan, options.checkpointDirectory, options.stepLimit, atMost, &later);
      // Restarting from step 1 would silently redo (and overwrite) the run.
      if (resume.phase < 0 && later > 0)
        return Error{code::kCheckpoint,
                     "the checkpoints in `" + options.checkpointDirectory + "` are at step " + std::to_string(later) +
                         " or later, but the run's metrics.jsonl has every record only up to step " + std::to_string(atMost) +
                         ": resuming from them would leave the steps between unrecorded",
                     "restore the run's metrics.jsonl, or start a new run without --resume", plan.source};
      if (resume.phase < 0)
        return Error{code::kCheckpoint, "there is no checkpoint to resume from in `" + options.checkpointDirectory + "`",
                     "start a new run without --resume", plan.source};
      // Verified even when it only marks its phase as done (a final
      // checkpoint): a resume never rests on a file it has not checked.
      const ir::PhasePlan& at = plan.phases[static_cast<std::size_t>(resume.phase)];
      auto file = readTensorFile(resume.path);
      if (!file) return withWhere(file.error(), at.source);
      auto verified = verifyCheckpoint(*file, resume.path, plan, at.name, at.steps, resume.final ? 0 : resume.step,
                                       options, at.source);
      if (!verified) return verified.error();
    }

    std::vector<double> plannedInstanceBytes(instances != nullptr ? static_cast<std::size_t>(instances->count()) : 0, 0.0);
    // The counters run for the process; this run's bytes are what they gain.
    const double sentBefore = instances != nullptr ? instances->bytesSent() : 0;
    const double receivedBefore = instances != nullptr ? instances->bytesReceived() : 0;
    std::map<std::pair<std::string, int>, std::shared_ptr<const TextCorpus>> corpora;
    std::map<std::string, NamedTensors> finals;   // each finished phase's weights, for `from`
    long long globalStep = 0;
    for (int i = 0; i < static_cast<int>(plan.phases.size()); ++i) {
      const ir::PhasePlan& ph = plan.phases[static_cast<std::size_t>(i)];
      const long long steps = options.stepLimit > 0 ? std::min(options.stepLimit, ph.steps) : ph.steps;
      PhaseOutcome po;
      po.name = ph.name;
      if (resume.phase > i || (resume.phase == i && resume.final)) {
        // Finished in an earlier invocation.
        po.steps = steps;
        po.checkpoint = checkpointPath(options.checkpointDirectory, ph.name, 0, true);
        globalStep += steps;
        outcome.phases.push_back(po);
        continue;
      }
      std::shared_ptr<const TextCorpus> corpus;
      std::shared_ptr<const ImageSet> images;
      if (isImage(ph)) {
        auto loaded = imagesFor(ph, options);
        if (!loaded) return loaded.error();
        images = loaded.value();
      } else if (!isMlp(ph)) {
        auto path = corpusPathFor(ph, options);
        if (!path) return path.error();
        const auto key = std::make_pair(*path, vocabOf(ph));
        auto it = corpora.find(key);
        if (it == corpora.end()) {
          auto c = loadCorpus(*path, key.second);
          if (!c) return withWhere(c.error(), ph.source);
          it = corpora.emplace(key, c.value()).first;
        }
        corpus = it->second;
      }
      TrainerSettings ts;
      ts.seed = seed;
      ts.hostThreads = threads;
      ts.cancel = options.cancel;
      ts.policies = &options.policies;
      ts.runName = plan.name;
      ts.images = images;
      ts.instances = instances != nullptr ? options.instances : nullptr;
      auto created = PhaseTrainer::create(ph, ts, corpus);
      if (!created) return created.error();
      PhaseTrainer& trainer = **created;

      train::PhaseInfo info;
      info.run = plan.name;
      info.phase = ph.name;
      info.index = i;
      info.steps = steps;
      info.from = ph.from;
      const bool resuming = resume.phase == i;
      // A phase that would start from the model's initialisation starts from
      // the weights given instead (a sweep's `from:`).
      const bool fromInitialWeights = !resuming && ph.from.empty() && !options.initialWeights.empty();
      if (resuming) {
        info.checkpoint = resume.path;
      } else if (fromInitialWeights) {
        info.checkpoint = options.initialWeights;
      } else if (!ph.from.empty() && !options.checkpointDirectory.empty()) {
        // Where it starts by default (the `from` phase's final weights), and
        // every checkpoint of that phase an observer may choose instead.
        info.checkpoint = checkpointPath(options.checkpointDirectory, ph.from, 0, true);
        std::error_code ec;
        const fs::path d = fs::path(options.checkpointDirectory) / ph.from;
        if (fs::is_directory(d, ec))
          for (const auto& e : fs::directory_iterator(d, ec))
            if (e.path().extension() == ".ipt") info.checkpoints.push_back(e.path().string());
        std::sort(info.checkpoints.begin(), info.checkpoints.end());
      }
      train::PhaseDecision decision;
      if (options.observer != nullptr) decision = options.observer->phaseStart(train::Source::Emulator, info);
      decision.stop = agreed(decision.stop);
      if (instances != nullptr) decision.startFrom = instances->broadcast(decision.startFrom);
      if (decision.stop.stop) {
        outcome.status = Status::Stopped;
        outcome.stopReason = decision.stop.reason;
        return outcome;
      }
      // The weights of a checkpoint (its optimizer state is not taken: the
      // phase starts its own schedule and moments).
      auto loadWeights = [&](const std::string& path, bool ownRun = true) -> Expected<bool> {
        auto file = readTensorFile(path);
        if (!file) return withWhere(file.error(), ph.source);
        auto verified = verifyCheckpoint(*file, path, plan, ph.from, 0, -1, options, ph.source, ownRun);
        if (!verified) return verified.error();
        NamedTensors w;
        for (const auto& t : file->tensors)
          if (t.first.find('/') == std::string::npos) w.push_back(t);
        auto ok = trainer.setWeights(w);
        if (!ok) return ok;
        return trainer.setRunningStatistics(file->tensors);   // batch norm's, when the file has them
      };
      if (!decision.startFrom.empty()) {
        auto ok = loadWeights(decision.startFrom);
        if (!ok) return ok.error();
        info.checkpoint = decision.startFrom;
      } else if (resuming) {
        auto file = readTensorFile(resume.path);
        if (!file) return withWhere(file.error(), ph.source);
        auto verified = verifyCheckpoint(*file, resume.path, plan, ph.name, ph.steps, resume.final ? 0 : resume.step,
                                         options, ph.source);
        if (!verified) return verified.error();
        auto ok = trainer.restore(*file);
        if (!ok) return ok.error();
      } else if (!ph.from.empty()) {
        auto f = finals.find(ph.from);
        if (f != finals.end()) {
          auto ok = trainer.setWeights(f->second);
          if (!ok) return ok.error();
          ok = trainer.setRunningStatistics(f->second);
          if (!ok) return ok.error();
        } else {
          if (options.checkpointDirectory.empty())
            return Error{code::kCheckpoint, "phase `" + ph.name + "` starts from phase `" + ph.from + "`, which did not run",
                         "run the whole training, or give a checkpoint directory holding its final checkpoint", ph.source};
          auto ok = loadWeights(info.checkpoint);
          if (!ok) return ok.error();
        }
      } else if (fromInitialWeights) {
        auto ok = loadWeights(options.initialWeights, /*ownRun=*/false);
        if (!ok) return ok.error();
      }
      globalStep += trainer.stepsDone();
      const long long firstStep = trainer.stepsDone();   // this invocation's steps of the phase start here

      auto save = [&](bool final) -> Expected<bool> {
        if (options.checkpointDirectory.empty()) return true;
        TensorFile f = trainer.checkpoint();
        // Never a checkpoint of weights that are not numbers: a resume from it
        // would train on NaN.
        if (!allFinite(f.tensors))
          return Error{code::kDiverged,
                       "the weights of phase `" + ph.name + "` are not finite numbers at step " +
                           std::to_string(trainer.stepsDone()) + ": the training diverged",
                       "lower the learning rate, add warmup, or use loss scaling", ph.source};
        f.set("run", plan.name);
        if (!options.planIdentity.empty()) f.set("plan", options.planIdentity);
        const std::string path = checkpointPath(options.checkpointDirectory, ph.name, trainer.stepsDone(), final);
        // One run, one record: instance 0 writes (every instance holds the same state).
        if (writer) {
          auto ok = writeTensorFile(path, f);
          if (!ok) return withWhere(ok.error(), ph.source);
          if (options.observer != nullptr) {
            train::CheckpointInfo written;
            written.run = plan.name;
            written.phase = ph.name;
            written.path = path;
            written.step = trainer.stepsDone();
            written.globalStep = globalStep;
            written.final = final;
            options.observer->checkpointWritten(train::Source::Emulator, written);
          }
        }
        po.checkpoint = path;
        return true;
      };
      long long lastSaved = trainer.stepsDone();
      int nonFiniteInARow = 0;
      while (trainer.stepsDone() < steps) {
        auto finishEarly = [&](Status status, const std::string& reason) -> Expected<RunOutcome> {
          if (trainer.stepsDone() > lastSaved) {
            auto ok = save(false);
            if (!ok) return ok.error();
          }
          po.steps = trainer.stepsDone();
          outcome.phases.push_back(po);
          outcome.status = status;
          outcome.stopReason = reason;
          info.stepsRun = po.steps;
          info.checkpoint = po.checkpoint;
          if (options.observer != nullptr) options.observer->phaseEnd(train::Source::Emulator, info);
          return outcome;
        };
        if (cancelled()) return finishEarly(Status::Cancelled, "cancelled");
        auto r = trainer.step();
        if (!r) return r.error();
        if (!r->completed) return r->stopReason.empty() ? finishEarly(Status::Cancelled, "cancelled") : finishEarly(Status::Stopped, r->stopReason);
        // A non-finite loss on a step that was not skipped (fp16 overflow
        // skips are expected), weights that are no longer numbers, or a
        // loss that stays non-finite for kDivergedSteps steps in a row (loss
        // scaling cannot help: the loss is computed before it applies):
        // every further step would only record NaN and skip, so the run ends
        // as failed rather than "completed".
        nonFiniteInARow = std::isfinite(r->loss) ? 0 : nonFiniteInARow + 1;
        if (!std::isfinite(r->loss) &&
            (!r->skipped || nonFiniteInARow >= kDivergedSteps || !allFinite(trainer.weights()))) {
          return Error{code::kDiverged,
                       "the loss of step " + std::to_string(trainer.stepsDone()) + " of phase `" + ph.name +
                           "` is not a finite number: the training diverged",
                       "lower the learning rate, add warmup, or use loss scaling; --resume restarts from the last "
                       "checkpoint",
                       ph.source};
        }
        ++globalStep;
        po.lastLoss = r->loss;
        train::StepInfo si;
        si.run = plan.name;
        si.phase = ph.name;
        si.step = trainer.stepsDone();
        si.globalStep = globalStep;
        si.loss = r->loss;
        si.lr = r->lr;
        si.lossScale = r->lossScale;
        si.skipped = r->skipped;
        si.stepTimeSeconds = r->seconds;
        if (r->seconds > 0) {
          si.samplesPerSecond = static_cast<double>(ph.batch.globalBatch) / r->seconds;
          if (ph.seqLen > 0) si.tokensPerSecond = si.samplesPerSecond * static_cast<double>(ph.seqLen);
        }
        si.ipuMemoryBytes = r->ipuMemoryBytes;
        si.metrics = r->metrics;
        train::StopRequest stop;
        if (options.observer != nullptr) {
          std::map<std::string, double> logged;
          stop = options.observer->step(train::Source::Emulator, si, logged);
        }
        stop = agreed(stop);
        if (options.checkpointEvery > 0 && trainer.stepsDone() % options.checkpointEvery == 0 && trainer.stepsDone() < steps) {
          auto ok = save(false);
          if (!ok) return ok.error();
          lastSaved = trainer.stepsDone();
        }
        if (stop.stop) return finishEarly(Status::Stopped, stop.reason);
      }
      auto ok = save(true);
      if (!ok) return ok.error();
      po.steps = trainer.stepsDone();
      // As instances, instance 0 evaluates (every instance holds the same
      // weights) and sends the figures to the others, which act on them as
      // it does (a diverged loss stops them all at the same point).
      if (writer) po.evaluation = trainer.evaluate(options.evaluationSamples);
      if (instances != nullptr) po.evaluation = evaluationFromText(instances->broadcast(writer ? evaluationText(po.evaluation) : std::string()));
      if (auto loss = po.evaluation.find("loss"); loss != po.evaluation.end() && !std::isfinite(loss->second))
        return Error{code::kDiverged,
                     "the held-out loss of phase `" + ph.name + "` is not a finite number: the training diverged",
                     "lower the learning rate, add warmup, or use loss scaling", ph.source};
      info.checkpoint = po.checkpoint;
      info.metrics = po.evaluation;
      info.stepsRun = po.steps;
      if (!ph.traffic.streaming.empty() && po.steps > 0) {
        // What the last step moved through Streaming Memory, against the plan.
        const auto& streamed = trainer.lastStepTraffic().streamed;
        double moved = 0, planned = 0;
        for (const auto& replica : streamed)
          for (const auto& st : replica) moved += st.optimizerState + st.phased();
        for (const auto& st : ph.traffic.streaming) planned += st.optimizerState + st.phased();
        info.streamedBytesPerStep = streamed.empty() ? 0.0 : moved / static_cast<double>(streamed.size());
        info.plannedStreamedBytesPerStep = planned;
        info.stashRecomputed = ir::isPhased(ph.mapping) && ph.mapping.recompute == ir::Recompute::None;
      }
      if (instances != nullptr) {
        const auto perStep = ir::instanceTraffic(ph, instances->count());
        for (std::size_t k = 0; k < perStep.size() && k < plannedInstanceBytes.size(); ++k)
          plannedInstanceBytes[k] += perStep[k].total() * static_cast<double>(trainer.stepsDone() - firstStep);
      }
      finals[ph.name] = trainer.weights();
      for (auto& t : trainer.runningStatistics()) finals[ph.name].push_back(std::move(t));
      outcome.phases.push_back(po);
      train::StopRequest stop;
      if (options.observer != nullptr) stop = options.observer->phaseEnd(train::Source::Emulator, info);
      stop = agreed(stop);   // every instance, with an observer or not
      if (stop.stop) {
        outcome.status = Status::Stopped;
        outcome.stopReason = stop.reason;
        return outcome;
      }
    }
    if (instances != nullptr) {
      // Every instance's count, for instance 0's record.
      const std::string mine =
          std::to_string(instances->bytesSent() - sentBefore) + " " + std::to_string(instances->bytesReceived() - receivedBefore);
      for (const std::string& s : instances->allGatherBytes(mine)) {
        const auto space = s.find(' ');
        outcome.instanceBytesSent.push_back(std::stod(s.substr(0, space)));
        outcome.instanceBytesReceived.push_back(std::stod(s.substr(space + 1)));
      }
      outcome.instanceBytesPlanned = plannedInstanceBytes;
    }
    return outcome;
  } catch (const std::bad_alloc&) {
    return Error{code::kHostMemory, "the host ran out of memory while emulating run `" + plan.name + "`",
                 "`ipu estimate` predicts time and memory on the pod without running the model", plan.source};
  } catch (const std::exception& e) {
    return Error{code::kInternal, std::string("internal error: ") + e.what(), "please report this with the script", plan.source};
  }
}

Expected<RunOutcome> run(const ir::PhasePlan& phase, const Options& options) {
  ir::RunPlan plan;
  plan.name = phase.name;
  plan.source = phase.source;
  plan.phases.push_back(phase);
  return run(plan, options);
}

HostMemory hostMemoryNeeded(const ir::RunPlan& plan, const Options& options) {
  HostMemory best;
  for (const auto& ph : plan.phases) {
    HostMemory h;
    const double replicas = std::max(1, ph.mapping.replicas);
    double params = 0, copies = 0;
    for (const auto& l : ph.layers) {
      params += l.params;
      copies += l.params + l.tiedParams;   // a tied head holds a copy when apart, and its own accumulator
    }
    const bool master = ph.precision.weights == ir::DType::FP16 && ph.precision.masterWeights;
    const double rts = (ph.mapping.rtsOptimizerState || ph.mapping.rtsWeights) ? replicas : 1;
    // value + summed gradient + per-use accumulators + LAMB scratch, in fp32 on the host.
    h.parameters = replicas * (params * 4 * 3 + copies * 4);
    h.optimizerState = replicas * params * (ph.optimizer.moments * 4.0 + (master ? 4.0 : 0.0)) / rts;
    double act = 0;
    for (const auto& st : ph.stages) {
      double stage = 0;
      for (int li : st.layers) {
        const auto& l = ph.layers[static_cast<std::size_t>(li)];
        stage += l.activationElements + l.inputElements + l.workspaceElements;
      }
      act += stage * std::max(1, st.stashDepth);
    }
    h.activations = replicas * act * 4;
    std::error_code ec;
    const bool imageFile = isImage(ph) && ph.dataset.kind == ir::DatasetKind::Files && !ph.dataset.path.empty();
    const std::string corpus = imageFile ? (fs::path(options.datasetDirectory) / ph.dataset.path).string()
                             : isMlp(ph) || isImage(ph) ? "" : (ph.dataset.kind == ir::DatasetKind::Text && !ph.dataset.path.empty()
                                                      ? (fs::path(options.datasetDirectory) / ph.dataset.path).string()
                                                      : options.builtinCorpus);
    double bytes = 0;
    if (!corpus.empty()) {
      if (fs::is_directory(corpus, ec)) {
        for (const auto& e : fs::directory_iterator(corpus, ec))
          if (e.is_regular_file(ec)) bytes += static_cast<double>(e.file_size(ec));
      } else if (fs::is_regular_file(corpus, ec)) {
        bytes = static_cast<double>(fs::file_size(corpus, ec));
      }
    }
    h.data = bytes * (imageFile ? 2 : 12);   // images: the file and its parsed copy; text: words and token ids while the vocabulary is built
    // The previous phase's final weights stay in memory for `from`.
    h.total = h.parameters + h.optimizerState + h.activations + h.data + params * 4;
    if (h.total > best.total) best = h;
  }
  return best;
}

double hostMemoryAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

Expected<bool> checkHostMemory(const ir::RunPlan& plan, double available, const Options& options) {
  const HostMemory need = hostMemoryNeeded(plan, options);
  if (available <= 0 || need.total <= available) return true;
  auto bytes = [](double b) {
    char buf[32];
    if (b >= 1e12) std::snprintf(buf, sizeof buf, "%.1f TB", b / 1e12);
    else if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.1f GB", b / 1e9);
    else std::snprintf(buf, sizeof buf, "%.0f MB", b / 1e6);
    return std::string(buf);
  };
  std::ostringstream m;
  m << "emulating run `" << plan.name << "` needs about " << bytes(need.total) << " of host memory (weights and state "
    << bytes(need.parameters + need.optimizerState) << ", activations " << bytes(need.activations) << "); this host has "
    << bytes(available) << " available";
  return Error{code::kHostMemory, m.str(),
               "the emulator runs models small enough for one host; `ipu estimate` predicts this run's time and memory on the pod",
               plan.source};
}

}  // namespace ipu::emu
