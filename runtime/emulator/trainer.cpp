// PhaseTrainer (trainer.h): a step from start to end (the learning rate and
// loss scale, the pipeline or the phased run, the reduction, the update,
// the loss, metrics and memory), held-out evaluation, and the facade over
// PhaseTrainer::Impl, whose parts live in trainer/ (trainer/impl.h lists them).
#include "runtime/emulator/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/trainer/impl.h"
#include "runtime/train/lr_schedule.h"

namespace ipu::emu {

using namespace trainer;

double PhaseTrainer::Impl::learningRate(Error* error) const {
  if (!plan.lr.luaFunction.empty()) {
    if (settings.policies == nullptr || !settings.policies->learningRate) {
      *error = Error{code::kMissingPolicy, "phase `" + plan.name + "` takes its learning rate from the Lua function `" + plan.lr.luaFunction + "`",
                     "the caller must supply Policies::learningRate (the CLI wires the script's hooks)", plan.source};
      return 0;
    }
    return settings.policies->learningRate(step, plan.name);
  }
  return train::learningRate(plan.lr, step, plan.steps);
}

void PhaseTrainer::Impl::abandonStep() {
  // Nothing a cancelled step did is kept: what waits between passes, and the
  // accumulators it started.
  for (auto& g : groups) {
    g.stash.clear();
    g.streamedInputs.clear();
    g.streamedGradients.clear();
    g.activationsIn.clear();
    g.gradientsIn.clear();
    g.outbox.clear();
    for (auto& s : g.slots)
      for (auto& u : s.uses) u.written = false;
  }
}

Expected<StepResult> PhaseTrainer::Impl::runStep() {
  const auto t0 = std::chrono::steady_clock::now();
  StepResult out;
  Error err;
  out.lr = learningRate(&err);
  if (!err.code.empty()) return err;
  if (std::isnan(out.lr)) {
    out.completed = false;
    out.stopReason = "the learning-rate function failed";
    return out;
  }
  if (settings.policies != nullptr && settings.policies->lossScale) {
    // A custom policy decides the scale of the coming step from how the previous one went.
    train::LossScaleState st;
    st.scale = step > 0 ? lastScale : 0;
    st.overflow = lastOverflow;
    st.goodSteps = goodSteps;
    st.phase = plan.name;
    st.step = step + 1;
    const double next = settings.policies->lossScale(st);
    if (std::isnan(next) || !(next > 0)) {
      out.completed = false;
      out.stopReason = "the loss-scaling function failed";
      return out;
    }
    lossScale = next;
  }
  stepKey = subKey(phaseKey, static_cast<std::uint64_t>(step));
  // The host builds the step's global batch; micro batch m of replica r holds
  // samples (r * GA + m) * MB ... + MB - 1 of the step.
  batches = batchesOf(step);
  results.assign(batches.size(), std::vector<HeadResult>(model->layers().size()));
  hasResult.assign(batches.size(), std::vector<char>(model->layers().size(), 0));
  for (auto& g : groups) g.dynamicPeak = 0;
  bnRecorded.clear();
  traffic = StepTraffic{};
  const std::size_t boundaries = static_cast<std::size_t>(std::max(0, S - 1));
  traffic.activations.assign(static_cast<std::size_t>(R), std::vector<double>(boundaries, 0.0));
  traffic.gradients = traffic.activations;
  traffic.reduced.assign(static_cast<std::size_t>(R), std::vector<double>(static_cast<std::size_t>(P * T), 0.0));
  traffic.gathered = traffic.reduced;
  traffic.gatheredStreamed = traffic.reduced;
  traffic.streamed.assign(static_cast<std::size_t>(R), std::vector<ir::StreamingTraffic>(static_cast<std::size_t>(P * T)));
  for (auto& row : traffic.streamed)
    for (std::size_t i = 0; i < row.size(); ++i) row[i].ipu = static_cast<int>(i);
  traffic.batchNorm = traffic.reduced;
  traffic.shardActivations.assign(static_cast<std::size_t>(R), std::vector<StepTraffic::ShardReductions>(static_cast<std::size_t>(P * T)));
  traffic.shardGradients = traffic.shardActivations;

  if (phased) {
    // Cancelling abandons the step between two segment runs at the latest.
    runPhased();
    if (settings.cancel != nullptr && settings.cancel->load()) {
      abandonStep();
      out.completed = false;
      return out;
    }
  }
  for (long long c = 0; !phased && c < plan.schedule.cycles(); ++c) {
    if (settings.cancel != nullptr && settings.cancel->load()) {
      abandonStep();
      out.completed = false;
      return out;
    }
    runCycle(plan.schedule.cycle(c));
  }
  gatherResults();
  gatherBatchNormStatistics();
  updateRunningStatistics();
  reduceGradients();
  out.lossScale = lossScale;
  lastScale = lossScale;
  const bool overflow = overflowed();
  out.skipped = overflow;
  if (!overflow) {
    ++updates;
    float scale = static_cast<float>(1.0 / lossScale);
    if (plan.optimizer.clipNorm > 0) {
      const double norm = gradientNorm();
      const double clip = plan.optimizer.clipNorm / (norm + 1e-6);
      if (clip < 1) {
        scale = static_cast<float>(scale * clip);
        out.clipFactor = clip;
      }
    }
    update(out.lr, scale);
  }
  // Loss scaling: back off on overflow, grow after `interval` clean steps.
  const auto& ls = plan.precision.lossScale;
  lastOverflow = overflow;
  if (settings.policies != nullptr && settings.policies->lossScale) {
    goodSteps = overflow ? 0 : goodSteps + 1;   // the policy sets the next scale before the next step
  } else if (ls.kind == ir::LossScaleKind::Dynamic) {
    if (overflow) {
      lossScale = std::max(1.0, lossScale / ls.factor);
      goodSteps = 0;
    } else if (++goodSteps >= static_cast<long long>(ls.interval)) {
      lossScale *= ls.factor;
      goodSteps = 0;
    }
  } else {
    goodSteps = overflow ? 0 : goodSteps + 1;
  }

  // Loss and metrics, summed in a fixed order.
  double loss = 0;
  std::map<std::string, double> sums;
  for (std::size_t i = 0; i < results.size(); ++i)
    for (std::size_t l = 0; l < results[i].size(); ++l) {
      if (!hasResult[i][l]) continue;
      loss += results[i][l].loss;
      for (const auto& [k, v] : results[i][l].sums) sums[k] += v;
    }
  out.loss = loss;
  for (const char* m : {"mlm", "nsp", "lm"})
    if (sums.count(std::string(m) + "_count") && sums[std::string(m) + "_count"] > 0)
      out.metrics[std::string(m) + "_accuracy"] = sums[std::string(m) + "_correct"] / sums[std::string(m) + "_count"];
  if (sums.count("class_count") && sums["class_count"] > 0) out.metrics["accuracy"] = sums["class_correct"] / sums["class_count"];

  // Memory: the peak of each virtual IPU this step.
  const double cb = fp16Compute ? 2 : 4;
  out.ipuMemoryBytes.assign(staticBytes.size(), 0);
  for (int g = 0; g < P; ++g) {
    double dyn = 0;
    for (int r = 0; r < R; ++r) dyn = std::max(dyn, group(r, g).dynamicPeak);
    for (int t = 0; t < T; ++t) {
      const std::size_t i = static_cast<std::size_t>(g * T + t);
      out.ipuMemoryBytes[i] = staticBytes[i] + dyn * cb / T;
      if (phased) out.ipuMemoryBytes[i] = *std::max_element(phasePeak[i].begin(), phasePeak[i].end());
      peakBytes[i] = std::max(peakBytes[i], out.ipuMemoryBytes[i]);
      const double cap = i < plan.ipus.size() ? plan.ipus[i].capacityBytes : 0;
      std::string during;
      if (phased) {
        const auto worst = std::max_element(phasePeak[i].begin(), phasePeak[i].end());
        during = " while its execution phase " + std::to_string(worst - phasePeak[i].begin()) + " ran";
      }
      if (cap > 0 && out.ipuMemoryBytes[i] > cap)
        return Error{code::kIpuMemory,
                     "virtual IPU " + std::to_string(i) + " needed " + fmtBytes(out.ipuMemoryBytes[i]) + during + " in step " + std::to_string(step + 1) +
                         " of phase `" + plan.name + "`, more than the chip's " + fmtBytes(cap),
                     phased ? "more phases (`phases: k`) put fewer weights on chip at a time; `ipu plan --json` gives each phase's bytes (`phase_bytes`)"
                            : "the activations in flight exceed what the plan assumed; try `recompute: every_layer` or a smaller micro batch",
                     plan.mapping.source};
    }
  }
  ++step;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}


namespace {

// The byte strings the instances exchange a step's losses and statistics in
// (same binary layout on every instance: the hosts of one job share an ABI).
template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T take(const std::string& in, std::size_t& at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}
template <class T>
void putVector(std::string& out, const std::vector<T>& v) {
  put(out, static_cast<std::uint64_t>(v.size()));
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
template <class T>
std::vector<T> takeVector(const std::string& in, std::size_t& at) {
  std::vector<T> v(static_cast<std::size_t>(take<std::uint64_t>(in, at)));
  std::memcpy(v.data(), in.data() + at, v.size() * sizeof(T));
  at += v.size() * sizeof(T);
  return v;
}

}  // namespace

void PhaseTrainer::Impl::gatherResults() {
  if (instances == nullptr) return;
  // The heads' losses and sums of every replica's micro batches, so that
  // every instance adds them in the single-process order (runStep).
  std::string mine;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!local(static_cast<int>(i) / GA)) continue;
    for (std::size_t l = 0; l < results[i].size(); ++l) {
      if (!hasResult[i][l]) continue;
      put(mine, static_cast<std::uint64_t>(i));
      put(mine, static_cast<std::uint64_t>(l));
      put(mine, results[i][l].loss);
      put(mine, static_cast<std::uint64_t>(results[i][l].sums.size()));
      for (const auto& [k, v] : results[i][l].sums) {
        putVector(mine, std::vector<char>(k.begin(), k.end()));
        put(mine, v);
      }
    }
  }
  const auto all = instances->allGatherBytes(mine);
  for (int k = 0; k < instances->count(); ++k) {
    if (k == instances->rank()) continue;
    const std::string& in = all[static_cast<std::size_t>(k)];
    std::size_t at = 0;
    while (at < in.size()) {
      const auto i = static_cast<std::size_t>(take<std::uint64_t>(in, at));
      const auto l = static_cast<std::size_t>(take<std::uint64_t>(in, at));
      HeadResult& hr = results.at(i).at(l);
      hr.loss = take<double>(in, at);
      const auto n = take<std::uint64_t>(in, at);
      for (std::uint64_t j = 0; j < n; ++j) {
        const auto key = takeVector<char>(in, at);
        hr.sums[std::string(key.begin(), key.end())] = take<double>(in, at);
      }
      hasResult[i][l] = 1;
    }
  }
}

void PhaseTrainer::Impl::gatherBatchNormStatistics() {
  if (instances == nullptr) return;
  bool any = false;
  for (const auto& units : running) any = any || !units.empty();
  if (!any) return;
  // The running statistics read the first replica of each batch-norm group
  // (updateRunningStatistics): those this instance recorded go to every instance.
  std::string mine;
  for (const auto& [key, st] : bnRecorded) {
    const int replica = std::get<0>(key);
    if (!local(replica) || replica % bnSpan != 0) continue;
    put(mine, replica);
    put(mine, std::get<1>(key));
    put(mine, std::get<2>(key));
    put(mine, std::get<3>(key));
    put(mine, st.count);
    putVector(mine, st.mean);
    putVector(mine, st.rstd);
    putVector(mine, st.squares);
  }
  const auto all = instances->allGatherBytes(mine);
  for (int k = 0; k < instances->count(); ++k) {
    if (k == instances->rank()) continue;
    const std::string& in = all[static_cast<std::size_t>(k)];
    std::size_t at = 0;
    while (at < in.size()) {
      const int replica = take<int>(in, at), micro = take<int>(in, at), layer = take<int>(in, at), unit = take<int>(in, at);
      BatchNormStatistics st;
      st.count = take<double>(in, at);
      st.mean = takeVector<float>(in, at);
      st.rstd = takeVector<float>(in, at);
      st.squares = takeVector<double>(in, at);
      bnRecorded[{replica, micro, layer, unit}] = std::move(st);
    }
  }
}

// ------------------------------------------------------------- the facade

PhaseTrainer::PhaseTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PhaseTrainer::~PhaseTrainer() = default;

Expected<std::unique_ptr<PhaseTrainer>> PhaseTrainer::create(const ir::PhasePlan& phase, const TrainerSettings& settings,
                                                             std::shared_ptr<const TextCorpus> corpus) {
  try {
    return createUnchecked(phase, settings, std::move(corpus));
  } catch (const std::bad_alloc&) {
    return Error{code::kHostMemory, "the host ran out of memory setting up phase `" + phase.name + "`",
                 "`ipu estimate` predicts time and memory on the pod without running the model", phase.source};
  }
}

Expected<std::unique_ptr<PhaseTrainer>> PhaseTrainer::createUnchecked(const ir::PhasePlan& phase, const TrainerSettings& settings,
                                                                      std::shared_ptr<const TextCorpus> corpus) {
  auto impl = std::make_unique<Impl>();
  impl->plan = phase;
  impl->settings = settings;
  auto model = Model::build(impl->plan);
  if (!model) return model.error();
  impl->model = model.value();
  const Family family = impl->model->family();
  const bool textless = family == Family::Mlp || family == Family::Image;
  if (family == Family::Image && settings.images != nullptr) {
    const ImageSet& im = *settings.images;
    const Model& md = *impl->model;
    std::string wrong;
    if (im.channels != md.imageChannels()) wrong = std::to_string(im.channels) + " channels, the model's stem takes " + std::to_string(md.imageChannels());
    else if (im.height != md.imageSize() || im.width != md.imageSize())
      wrong = std::to_string(im.height) + "x" + std::to_string(im.width) + " images, the phase's image_size is " + std::to_string(md.imageSize());
    else if (im.classes != md.classes()) wrong = std::to_string(im.classes) + " classes, the model's classifier has " + std::to_string(md.classes());
    else if (im.count() < 10) wrong = std::to_string(im.count()) + " records, fewer than the 10 needed to hold one out";
    if (!wrong.empty())
      return Error{code::kImageFile, "dataset `" + phase.dataset.name + "` holds " + wrong,
                   "make the file's images and classes match the model, or the model match the file", phase.source};
  }
  if (!textless && corpus == nullptr)
    return Error{code::kDataset, "phase `" + phase.name + "` trains a language model but has no text", "", phase.source};
  SampleSettings ss;
  ss.key = subKey(subKey(static_cast<std::uint64_t>(settings.seed), hashName(settings.runName)), hashName("data:" + phase.name));
  ss.taskKey = subKey(static_cast<std::uint64_t>(settings.seed), 0x7A5CULL);
  ss.seqLen = static_cast<int>(phase.seqLen);
  ss.maskedTokens = static_cast<int>(phase.maskedTokens > 0 ? phase.maskedTokens : std::max(1LL, phase.seqLen * 15 / 100));
  ss.maskProbability = phase.dataset.maskProbability;
  ss.packing = phase.dataset.packing;
  ss.sequencesPerPack = phase.dataset.sequencesPerPack;
  ss.labelSmoothing = phase.labelSmoothing;
  if (!textless && ss.seqLen < 8)
    return Error{code::kUnsupportedModel, "phase `" + phase.name + "` has seq_len " + std::to_string(ss.seqLen), "the emulator needs sequences of at least 8 tokens", phase.source};
  if (impl->model->family() == Family::Gpt && corpus->trainStream.size() < static_cast<std::size_t>(ss.seqLen) * 4)
    return Error{code::kDataset, "the corpus is too short for sequences of " + std::to_string(ss.seqLen) + " tokens", "use more text or a shorter seq_len", phase.source};
  if (phase.precision.lossScale.kind == ir::LossScaleKind::Lua && (settings.policies == nullptr || !settings.policies->lossScale))
    return Error{code::kMissingPolicy, "phase `" + phase.name + "` takes its loss scale from the Lua function `" + phase.precision.lossScale.luaFunction + "`",
                 "the caller must supply Policies::lossScale (the CLI wires the script's hooks)", phase.source};
  impl->data = std::make_unique<SampleSource>(impl->model, std::move(corpus), ss, family == Family::Image ? settings.images : nullptr);
  auto ok = impl->setup();
  if (!ok) return ok.error();
  return std::unique_ptr<PhaseTrainer>(new PhaseTrainer(std::move(impl)));
}

const ir::PhasePlan& PhaseTrainer::phase() const { return impl_->plan; }
const Model& PhaseTrainer::model() const { return *impl_->model; }
long long PhaseTrainer::stepsDone() const { return impl_->step; }
Expected<StepResult> PhaseTrainer::step() {
  try {
    return impl_->runStep();
  } catch (const std::bad_alloc&) {
    return Error{code::kHostMemory, "the host ran out of memory in step " + std::to_string(impl_->step + 1) + " of phase `" + impl_->plan.name + "`",
                 "`ipu estimate` predicts time and memory on the pod without running the model", impl_->plan.source};
  }
}
std::vector<double> PhaseTrainer::ipuMemoryBytes() const { return impl_->peakBytes; }
std::vector<MicroBatch> PhaseTrainer::batches(long long step) const { return impl_->batchesOf(step); }

bool PhaseTrainer::copiesAgree() const {
  // Every replica, and every IPU holding a copy of a tied tensor, must hold the same weights.
  const Impl& im = *impl_;
  // Phased, the weights are in Streaming Memory; with RTS of the weights each
  // replica keeps only its share current, so copies agree within a replica.
  std::map<std::tuple<int, int, int>, const Mat*> first;
  for (const auto& gr : im.groups)
    for (const auto& s : gr.slots) {
      const Mat& w = im.phased ? s.home : s.value;
      auto [it, fresh] = first.emplace(std::make_tuple(s.param, s.shard, im.rtsStreamed ? gr.replica : 0), &w);
      if (!fresh && !(*it->second == w)) return false;
    }
  return true;
}

const StepTraffic& PhaseTrainer::lastStepTraffic() const { return impl_->traffic; }
std::vector<double> PhaseTrainer::ipuParameters() const { return impl_->parameters(); }

double PhaseTrainer::streamingBytes() const {
  double b = 0;
  for (const auto& gr : impl_->groups)
    if (gr.replica == 0) {
      for (const auto& st : gr.streaming) b += st.bytes(impl_->fp16State ? 2 : 4);
      if (impl_->phased)
        for (const auto& s : gr.slots)
          b += static_cast<double>(impl_->rtsStreamed ? s.owned.end - s.owned.begin : static_cast<std::size_t>(s.home.size())) * (impl_->fp16Weights ? 2 : 4);
    }
  return b;
}

std::vector<std::vector<double>> PhaseTrainer::phaseParameterBytes() const { return impl_->phaseParamPeak; }
std::vector<std::vector<double>> PhaseTrainer::phaseMemoryBytes() const { return impl_->phasePeak; }

std::map<std::string, double> PhaseTrainer::evaluate(int samples) const {
  const Impl& im = *impl_;
  std::map<std::string, double> sums;
  double loss = 0;
  int batches = 0;
  const int majority = im.data->majorityLabel();
  const auto& layers = im.model->layers();
  // Phased, the weights are in Streaming Memory: evaluate with a copy of them.
  std::vector<std::vector<Mat>> stored;
  if (im.phased)
    for (int g = 0; g < im.P; ++g) {
      stored.emplace_back();
      for (std::size_t j = 0; j < im.group(im.firstLocal, g).slots.size(); ++j) stored.back().push_back(im.storedWeights(im.group(im.firstLocal, g), j));
    }
  for (int first = 0; first < samples; first += im.MB) {
    const int n = std::min(im.MB, samples - first);
    MicroBatch mb = im.data->make(first, n, true);
    Mat x;
    for (std::size_t li = 0; li < layers.size(); ++li) {
      const ModelLayer& L = layers[li];
      // This instance's first replica: the copies are alike, and another
      // instance's are not updated here (update()).
      const Group& g = im.group(im.firstLocal, L.ipu);
      Numerics nx(im.fp16Compute, im.fp16Partials, false, subKey(0xE7A1ULL, li));
      RunningBatchNorm bn(im.running[li]);
      nx.setBatchNorm(&bn);
      Saved sv;
      Mat out;
      HeadResult hr;
      L.kernel->forward(x, mb, im.paramsFor(g, static_cast<int>(li), im.phased ? &stored[static_cast<std::size_t>(L.ipu)] : nullptr), nx, sv, out,
                        L.head ? &hr : nullptr);
      if (L.head) {
        loss += hr.loss;
        for (const auto& [k, v] : hr.sums) sums[k] += v;
      } else {
        x = std::move(out);
      }
    }
    for (int l : mb.maskedLabel) sums["mlm_majority"] += l == majority ? 1 : 0;
    for (int l : mb.nextToken) sums["lm_majority"] += l == majority ? 1 : 0;
    for (int l : mb.classLabel) sums["class_majority"] += l == majority ? 1 : 0;
    ++batches;
  }
  std::map<std::string, double> out;
  auto ratio = [&](const std::string& a, const std::string& b) { return sums[b] > 0 ? sums[a] / sums[b] : 0.0; };
  if (sums["mlm_count"] > 0) {
    out["mlm_accuracy"] = ratio("mlm_correct", "mlm_count");
    out["mlm_baseline"] = ratio("mlm_majority", "mlm_count");
  }
  if (sums["nsp_count"] > 0) out["nsp_accuracy"] = ratio("nsp_correct", "nsp_count");
  if (sums["lm_count"] > 0) {
    out["lm_accuracy"] = ratio("lm_correct", "lm_count");
    out["lm_baseline"] = ratio("lm_majority", "lm_count");
  }
  if (sums["class_count"] > 0) {
    out["accuracy"] = ratio("class_correct", "class_count");
    out["baseline"] = ratio("class_majority", "class_count");
  }
  if (batches > 0) out["loss"] = loss / batches;
  return out;
}

}  // namespace ipu::emu
