// PhaseTrainer::Impl, the pipeline executor (trainer/impl.h): one cycle of
// the plan's schedule runs each group's forward, recompute and backward
// passes of its stages as one BSP superstep, then the exchange delivers the
// activations and gradients between stages. Phased execution reuses the
// layer passes (forwardLayer, backwardLayer) with its own order.
#include "runtime/emulator/trainer/impl.h"

#include <algorithm>

#include "runtime/base/invariant.h"

namespace ipu::emu {

using namespace trainer;

void PhaseTrainer::Impl::forwardStage(Group& g, int stage, int micro) {
  const auto& layers = stageLayers[static_cast<std::size_t>(stage)];
  StashEntry e;
  Mat in;
  if (stage > 0) {
    auto it = g.activationsIn.find({stage, micro});
    IPU_INVARIANT(it != g.activationsIn.end(), "the schedule runs a stage's forward pass after its input activations arrived");
    in = std::move(it->second);
    g.activationsIn.erase(it);
  }
  e.trunk.push_back(std::move(in));
  e.trunkOf.resize(layers.size());
  e.saved.resize(layers.size());
  bool lastUsed = false;
  for (std::size_t k = 0; k < layers.size(); ++k) {
    const int li = layers[k];
    const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
    e.trunkOf[k] = static_cast<int>(e.trunk.size()) - 1;
    lastUsed = true;
    Saved sv;
    Mat out;
    forwardLayer(g, li, micro, e.trunk.back(), sv, out);
    if (!L.head) {
      e.trunk.push_back(std::move(out));
      lastUsed = false;
    }
    if (recompute == ir::Recompute::None) e.saved[k] = std::move(sv);
  }
  if (stage < S - 1) g.outbox.push_back({g.replica, stage + 1, micro, false, e.trunk.back()});
  // Keep only what the backward pass needs: checkpoints under recomputation.
  if (!lastUsed && e.trunk.size() > 1) e.trunk.pop_back();
  if (recompute == ir::Recompute::Stage) e.trunk.resize(1);
  g.stash[{stage, micro}] = std::move(e);
}

void PhaseTrainer::Impl::forwardLayer(Group& g, int li, int micro, const Mat& x, Saved& saved, Mat& y) {
  const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
  const auto slot = static_cast<std::size_t>(g.replica * GA + micro);
  Numerics nx = numerics(g.replica, micro, li, 0);
  StepBatchNorm bn(*this, g.replica, micro, li, BatchNormContext::Mode::Train, false);
  nx.setBatchNorm(&bn);
  ShardExchange moved;
  nx.setShardExchange(&moved);
  HeadResult* head = L.head ? &results[slot][static_cast<std::size_t>(li)] : nullptr;
  L.kernel->forward(x, batches[slot], paramsFor(g, li), nx, saved, y, head);
  countShardExchange(g, moved, false);
  if (L.head) hasResult[slot][static_cast<std::size_t>(li)] = 1;
}

void PhaseTrainer::Impl::countShardExchange(const Group& g, const ShardExchange& moved, bool backward) {
  if (moved.operations == 0) return;
  auto& into = (backward ? traffic.shardGradients : traffic.shardActivations)[static_cast<std::size_t>(g.replica)];
  const double bc = ir::bytesOf(plan.precision.compute);
  for (int t = 0; t < T; ++t) {
    StepTraffic::ShardReductions& here = into[static_cast<std::size_t>(g.ipu * T + t)];
    here.bytes += moved.elements * bc;
    here.operations += moved.operations;
  }
}

void PhaseTrainer::Impl::recomputeStage(Group& g, int stage, int micro) {
  // `every_layer` recomputes each layer right before its backward pass (in
  // backwardStage), so that one layer's saved values are live at a time.
  if (recompute != ir::Recompute::Stage) return;
  // Recompute the whole stage from its input checkpoint.
  const auto& layers = stageLayers[static_cast<std::size_t>(stage)];
  const MicroBatch& mb = batches[static_cast<std::size_t>(g.replica * GA + micro)];
  StashEntry& e = g.stash.at({stage, micro});
  for (std::size_t k = 0; k < layers.size(); ++k) {
    const int li = layers[k];
    const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
    Numerics nx = numerics(g.replica, micro, li, 0);
    StepBatchNorm bn(*this, g.replica, micro, li, BatchNormContext::Mode::Recompute, false);
    nx.setBatchNorm(&bn);
    ShardExchange moved;
    nx.setShardExchange(&moved);
    Mat out;
    L.kernel->forward(e.trunk[static_cast<std::size_t>(e.trunkOf[k])], mb, paramsFor(g, li), nx, e.saved[k], out, nullptr);
    countShardExchange(g, moved, false);
    if (!L.head && k + 1 < layers.size()) e.trunk.push_back(std::move(out));
  }
}

void PhaseTrainer::Impl::backwardStage(Group& g, int stage, int micro) {
  const auto& layers = stageLayers[static_cast<std::size_t>(stage)];
  auto sit = g.stash.find({stage, micro});
  IPU_INVARIANT(sit != g.stash.end(), "the schedule runs a stage's backward pass after its forward pass stashed the micro batch");
  StashEntry e = std::move(sit->second);
  g.stash.erase(sit);
  Mat d;
  if (stage < S - 1) {
    auto it = g.gradientsIn.find({stage, micro});
    IPU_INVARIANT(it != g.gradientsIn.end(), "the schedule runs a stage's backward pass after the next stage's gradients arrived");
    d = std::move(it->second);
    g.gradientsIn.erase(it);
  }
  for (std::size_t k = layers.size(); k-- > 0;)
    backwardLayer(g, layers[k], micro, e.trunk[static_cast<std::size_t>(e.trunkOf[k])],
                  recompute == ir::Recompute::EveryLayer ? nullptr : &e.saved[k], d);
  if (stage > 0) g.outbox.push_back({g.replica, stage - 1, micro, true, std::move(d)});
}

void PhaseTrainer::Impl::backwardLayer(Group& g, int li, int micro, const Mat& x, Saved* saved, Mat& d) {
  const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
  const int slot = g.replica * GA + micro;
  const MicroBatch& mb = batches[static_cast<std::size_t>(slot)];
  Saved recomputed;
  if (saved == nullptr) {
    // Recomputation: the layer's forward again, normalising with the
    // batch-norm statistics its forward pass recorded.
    Numerics nx = numerics(g.replica, micro, li, 0);
    StepBatchNorm bn(*this, g.replica, micro, li, BatchNormContext::Mode::Recompute, false);
    nx.setBatchNorm(&bn);
    ShardExchange moved;
    nx.setShardExchange(&moved);
    Mat out;
    L.kernel->forward(x, mb, paramsFor(g, li), nx, recomputed, out, nullptr);
    countShardExchange(g, moved, false);
    saved = &recomputed;
  }
  Numerics nb = numerics(g.replica, micro, li, 1);
  StepBatchNorm bnBackward(*this, g.replica, micro, li, BatchNormContext::Mode::Train, true);
  nb.setBatchNorm(&bnBackward);
  const int kt = L.kernel->sharded() ? T : 1;
  ShardGrads grads(static_cast<std::size_t>(kt));
  Mat dx;
  ShardExchange moved;
  nb.setShardExchange(&moved);
  L.kernel->backward(x, d, mb, paramsFor(g, li), nb, *saved, static_cast<float>(lossScale), dx, grads);
  countShardExchange(g, moved, true);
  // A head's input gradient adds to the trunk's (its input is also the next layer's).
  if (L.head && d.size() != 0) {
    d += dx;
    nb.round(d);
  } else {
    d = std::move(dx);
  }
  accumulate(g, li, grads, slot);
}

void PhaseTrainer::Impl::runCycle(const std::vector<ir::Work>& work) {
  runGroups(groups.size(), [&](std::size_t i) {
    Group& g = groups[i];
    if (!local(g.replica)) return;   // another instance runs it
    for (const auto& w : work) {
      IPU_INVARIANT(w.stage >= 0 && w.stage < S, "the pipeline schedule's work names stages of the plan");
      if (stageIpu[static_cast<std::size_t>(w.stage)] != g.ipu) continue;
      const int micro = static_cast<int>(w.micro);
      switch (w.pass) {
        case ir::Pass::Forward: forwardStage(g, w.stage, micro); break;
        case ir::Pass::Recompute: recomputeStage(g, w.stage, micro); break;
        case ir::Pass::Backward: backwardStage(g, w.stage, micro); break;
      }
    }
    g.dynamicPeak = std::max(g.dynamicPeak, g.dynamicElements());
  });
  deliver();
}

void PhaseTrainer::Impl::deliver() {
  // Exchange: deliver what each IPU sent to the IPU of the receiving stage.
  const double bc = ir::bytesOf(plan.precision.compute);
  for (auto& g : groups) {
    for (auto& m : g.outbox) {
      IPU_INVARIANT(m.stage >= 0 && m.stage < S && (m.gradient ? m.stage < S - 1 : m.stage > 0),
                    "a message goes to a neighbouring stage: activations forward, gradients backward");
      // Activations go from stage - 1 to stage; gradients from stage + 1 to stage.
      const std::size_t boundary = static_cast<std::size_t>(m.gradient ? m.stage : m.stage - 1);
      auto& moved = m.gradient ? traffic.gradients : traffic.activations;
      moved[static_cast<std::size_t>(m.replica)][boundary] += static_cast<double>(m.tensor.size()) * bc;
      Group& to = group(m.replica, stageIpu[static_cast<std::size_t>(m.stage)]);
      (m.gradient ? to.gradientsIn : to.activationsIn)[{m.stage, m.micro}] = std::move(m.tensor);
    }
    g.outbox.clear();
  }
}

}  // namespace ipu::emu
