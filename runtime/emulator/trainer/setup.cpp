// PhaseTrainer::Impl, set-up (trainer/impl.h): the buffers of every replica
// laid out from the plan and initialised from the seed (the same values on
// every mapping), the static bytes of each virtual IPU, and the helpers every
// pass uses to run one layer on a group: its numerics, its weights, and the
// accumulation of its gradients.
#include "runtime/emulator/trainer/impl.h"

#include <algorithm>
#include <sstream>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"
#include "runtime/ir/instance_traffic.h"

namespace ipu::emu {

using namespace trainer;

std::string trainer::fmtBytes(double b) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << b / 1e6 << " MB";
  return s.str();
}

std::vector<MicroBatch> PhaseTrainer::Impl::batchesOf(long long n) const {
  const long long global = static_cast<long long>(R) * GA * MB;
  std::vector<MicroBatch> out;
  out.reserve(static_cast<std::size_t>(R * GA));
  for (int i = 0; i < R * GA; ++i) out.push_back(data->make(n * global + static_cast<long long>(i) * MB, MB));
  std::vector<MicroBatch*> all;
  for (auto& b : out) all.push_back(&b);
  SampleSource::normalise(all);
  return out;
}


Expected<bool> PhaseTrainer::Impl::setup() {
  const auto& m = plan.mapping;
  R = std::max(1, m.replicas);
  localReplicas = R;
  if (settings.instances != nullptr && settings.instances->count() > 1) {
    // PopRun's rule: every instance drives the same number of replicas.
    const int n = settings.instances->count();
    if (auto refusal = ir::refuseInstances(plan, n)) return Error{code::kInstances, refusal->message, refusal->help, refusal->where};
    instances = settings.instances.get();
    localReplicas = R / n;
    firstLocal = instances->rank() * localReplicas;
    // Instances stop together, between steps (the run loop agrees on it):
    // one that left a step alone would leave the others waiting for its data.
    settings.cancel = nullptr;
  }
  T = std::max(1, m.shard);
  P = std::max(1, m.pipelineIpus);
  GA = static_cast<int>(std::max(1LL, plan.batch.gradientAccumulation));
  MB = static_cast<int>(std::max(1LL, plan.batch.microBatch));
  S = static_cast<int>(plan.stages.size());
  if (S == 0) return Error{code::kUnsupportedModel, "the plan of phase `" + plan.name + "` has no stages", "", plan.source};
  stageIpu.resize(static_cast<std::size_t>(S));
  stageLayers.resize(static_cast<std::size_t>(S));
  for (const auto& st : plan.stages) {
    if (st.index < 0 || st.index >= S || st.ipu < 0 || st.ipu >= P)
      return Error{code::kInternal, "the plan's stage " + std::to_string(st.index) + " is inconsistent", "", plan.source};
    stageIpu[static_cast<std::size_t>(st.index)] = st.ipu;
    stageLayers[static_cast<std::size_t>(st.index)] = st.layers;
  }
  for (std::size_t s = 0; s < stageLayers.size(); ++s)
    for (int l : stageLayers[s])
      if (l < 0 || l >= static_cast<int>(model->layers().size()) || model->layers()[static_cast<std::size_t>(l)].ipu != stageIpu[s])
        return Error{code::kInternal, "the plan's stage " + std::to_string(s) + " names a layer of another IPU", "", plan.source};
  const auto& pr = plan.precision;
  fp16Compute = pr.compute == ir::DType::FP16;
  fp16Partials = pr.partials == ir::DType::FP16;
  fp16Weights = pr.weights == ir::DType::FP16;
  fp16Acc = pr.accumulators == ir::DType::FP16;
  fp16State = pr.optimizerState == ir::DType::FP16;
  stochastic = pr.stochasticRounding;
  master = fp16Weights && pr.masterWeights;
  streamingState = m.optimizerStateStreaming || ir::isPhased(m);
  rts = R > 1 && (m.rtsOptimizerState || m.rtsWeights);
  phased = ir::isPhased(m);
  rtsStreamed = phased && R > 1 && m.rtsWeights;
  if (phased) segments = ir::phaseSegments(plan);
  recompute = m.recompute;
  // A Lua policy sets the scale before the first step.
  lossScale = pr.lossScale.kind == ir::LossScaleKind::Static || pr.lossScale.kind == ir::LossScaleKind::Dynamic
                  ? pr.lossScale.value
                  : 1.0;
  phaseKey = subKey(subKey(static_cast<std::uint64_t>(settings.seed), hashName(settings.runName)), hashName(plan.name));
  if (plan.schedule.stages != S || plan.schedule.microBatches != GA || plan.schedule.recompute != m.recompute)
    return Error{code::kInternal, "the plan's pipeline schedule does not match its stages and gradient accumulation", "", plan.source};
  pool = std::make_unique<ThreadPool>(std::max(1, settings.hostThreads));
  bnSpan = m.batchNormGroup();
  if (R % bnSpan != 0)
    return Error{code::kInternal,
                 "batch norm's statistics span " + std::to_string(bnSpan) + " replicas, which do not divide the " + std::to_string(R) + " replicas",
                 "the checker refuses this mapping (IPU1112)", m.source};
  bnTurns = std::make_unique<ComputeTurns>(std::max(1, settings.hostThreads));
  running.resize(model->layers().size());
  for (std::size_t li = 0; li < model->layers().size(); ++li)
    for (const auto& u : model->layers()[li].kernel->batchNorms())
      running[li].push_back({std::vector<float>(static_cast<std::size_t>(u.channels), 0.0f), std::vector<float>(static_cast<std::size_t>(u.channels), 1.0f)});

  // Buffers of every replica, initialised from the seed (the same on every mapping).
  groups.resize(static_cast<std::size_t>(R * P));
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < P; ++g) {
      Group& gr = group(r, g);
      gr.replica = r;
      gr.ipu = g;
      buildSlots(gr);
    }
  const auto values = model->initialValues(static_cast<std::uint64_t>(settings.seed));
  for (std::size_t p = 0; p < values.size(); ++p) {
    scatterState(static_cast<int>(p), 0, values[p]);
    if (master) scatterState(static_cast<int>(p), 4, values[p]);
  }
  if (phased) {
    // The weights live in Streaming Memory and come on chip segment by segment.
    for (auto& gr : groups)
      for (auto& s : gr.slots) s.value = Mat();
    int phases = 0;
    for (const auto& seg : segments) phases = std::max(phases, seg.phase + 1);
    phaseParamPeak.assign(static_cast<std::size_t>(P * T), std::vector<double>(static_cast<std::size_t>(phases), 0.0));
    phasePeak = phaseParamPeak;
  }
  computeStaticBytes();
  peakBytes = staticBytes;
  for (std::size_t i = 0; i < staticBytes.size(); ++i) {
    const double cap = i < plan.ipus.size() ? plan.ipus[i].capacityBytes : 0;
    if (cap > 0 && staticBytes[i] > cap)
      return Error{code::kIpuMemory,
                   "virtual IPU " + std::to_string(i) + " needs " + fmtBytes(staticBytes[i]) + " for code, weights, accumulators and optimizer state, more than the chip's " + fmtBytes(cap),
                   "the plan's memory model underestimated this mapping; try the levers `ipu plan` suggests", plan.mapping.source};
  }
  return true;
}

void PhaseTrainer::Impl::buildSlots(Group& g) {
  const auto& layers = model->layers();
  const auto& params = model->params();
  for (std::size_t li = 0; li < layers.size(); ++li) {
    const ModelLayer& L = layers[li];
    if (L.ipu != g.ipu) continue;
    const bool sharded = L.kernel->sharded();
    const auto& specs = L.specs;
    for (std::size_t k = 0; k < specs.size(); ++k) {
      const int pid = L.params[k];
      const ParamSpec& full = params[static_cast<std::size_t>(pid)].spec;
      const bool split = sharded && specs[k].axis != ShardAxis::None;
      for (int s = 0; s < (split ? T : 1); ++s) {
        const Key2 key{pid, split ? s : -1};
        auto it = g.slotAt.find(key);
        if (it == g.slotAt.end()) {
          Slot slot;
          slot.param = pid;
          slot.shard = key.second;
          slot.rows = full.rows;
          slot.cols = full.cols;
          if (split && specs[k].axis == ShardAxis::Cols) {
            slot.cols = full.cols / T;
            slot.col0 = slot.cols * s;
          } else if (split) {
            slot.rows = full.rows / T;
            slot.row0 = slot.rows * s;
          }
          const std::size_t n = static_cast<std::size_t>(slot.rows * slot.cols);
          slot.owned = rts ? chunkOf(n, R, g.replica) : Chunk{0, n};
          slot.primary = layers[static_cast<std::size_t>(params[static_cast<std::size_t>(pid)].owner)].ipu == g.ipu;
          const std::size_t owned = slot.owned.end - slot.owned.begin;
          OptimizerState st;
          const int moments = plan.optimizer.moments;
          if (moments >= 1) st.m.assign(owned, 0.0f);
          if (moments >= 2) st.v.assign(owned, 0.0f);
          if (master) st.master.assign(owned, 0.0f);
          if (streamingState) {
            slot.streamed = static_cast<int>(g.streaming.size());
            g.streaming.push_back(std::move(st));
          } else {
            slot.state = std::move(st);
          }
          g.slotAt[key] = static_cast<int>(g.slots.size());
          g.slots.push_back(std::move(slot));
          it = g.slotAt.find(key);
        }
        Use u;
        u.layer = static_cast<int>(li);
        g.slots[static_cast<std::size_t>(it->second)].uses.push_back(std::move(u));
      }
    }
  }
}

void PhaseTrainer::Impl::computeStaticBytes() {
  const double wb = fp16Weights ? 2 : 4, ab = fp16Acc ? 2 : 4, sb = fp16State ? 2 : 4;
  staticBytes.assign(static_cast<std::size_t>(P * T), 0.0);
  for (int g = 0; g < P; ++g) {
    const Group& gr = group(0, g);
    double staging = 0;
    for (const auto& s : gr.slots) {
      const double n = static_cast<double>(s.rows * s.cols);
      // Phased, a segment's weights and accumulators are on chip only while it runs (runSegment counts them).
      double bytes = phased ? 0.0 : n * wb + n * ab * static_cast<double>(s.uses.size());
      const OptimizerState& st = stateOf(gr, s);
      if (s.streamed < 0) bytes += st.bytes(sb);
      else staging = std::max(staging, st.bytes(sb));
      for (int t = 0; t < T; ++t)
        if (s.shard < 0 || s.shard == t) staticBytes[static_cast<std::size_t>(g * T + t)] += bytes;
    }
    for (int t = 0; t < T; ++t) staticBytes[static_cast<std::size_t>(g * T + t)] += staging + plan.pod.machine.chip.codeBaseBytes;
  }
  for (const auto& L : model->layers())
    for (int t = 0; t < T; ++t) staticBytes[static_cast<std::size_t>(L.ipu * T + t)] += L.plan->codeBytes;
}


Numerics PhaseTrainer::Impl::numerics(int replica, int micro, int layer, int pass) const {
  const std::uint64_t gmb = static_cast<std::uint64_t>(replica * GA + micro);
  return Numerics(fp16Compute, fp16Partials, stochastic,
                  subKey(subKey(subKey(stepKey, gmb), static_cast<std::uint64_t>(layer)), static_cast<std::uint64_t>(pass)),
                  pool.get());
}

ShardParams PhaseTrainer::Impl::paramsFor(const Group& g, int layer, const std::vector<Mat>* weights) const {
  const ModelLayer& L = model->layers()[static_cast<std::size_t>(layer)];
  const bool sharded = L.kernel->sharded();
  const auto& specs = L.specs;
  const int kt = sharded ? T : 1;
  ShardParams p(static_cast<std::size_t>(kt));
  for (int s = 0; s < kt; ++s)
    for (std::size_t k = 0; k < specs.size(); ++k) {
      const bool split = sharded && specs[k].axis != ShardAxis::None;
      const int slot = g.slotAt.at({L.params[k], split ? s : -1});
      p[static_cast<std::size_t>(s)].push_back(weights != nullptr ? &(*weights)[static_cast<std::size_t>(slot)] : &g.slots[static_cast<std::size_t>(slot)].value);
    }
  return p;
}

void PhaseTrainer::Impl::accumulate(Group& g, int layer, ShardGrads& grads, int gmb) {
  const ModelLayer& L = model->layers()[static_cast<std::size_t>(layer)];
  const bool sharded = L.kernel->sharded();
  const auto& specs = L.specs;
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const bool split = sharded && specs[k].axis != ShardAxis::None;
    for (int s = 0; s < (split ? T : 1); ++s) {
      Mat& gradient = grads[static_cast<std::size_t>(split ? s : 0)][k];
      Slot& slot = g.slots[static_cast<std::size_t>(g.slotAt.at({L.params[k], split ? s : -1}))];
      for (auto& u : slot.uses) {
        if (u.layer != layer) continue;
        if (!u.written) {
          u.acc = std::move(gradient);
          u.written = true;
        } else {
          u.acc += gradient;
          if (fp16Acc)
            roundToHalf(u.acc.data(), static_cast<std::size_t>(u.acc.size()), stochastic,
                        subKey(subKey(stepKey, 0xACC0ULL + static_cast<std::uint64_t>(gmb)), static_cast<std::uint64_t>(layer * 64 + static_cast<int>(k) * 8 + s)));
        }
      }
    }
  }
}

}  // namespace ipu::emu
