// PhaseTrainer::Impl, phased execution (runtime/ir/phased.h; trainer/impl.h):
// the step runs segment by segment, all replicas together; the weights come
// from Streaming Memory for each segment (with RTS of the weights, gathered
// from the replicas' shares) and the activations and gradients between
// segments go through it. It measures what each phase holds on chip, which
// the plan's ir::Ipu::phaseBytes predicts.
#include "runtime/emulator/trainer/impl.h"

#include <algorithm>

#include "runtime/base/invariant.h"

namespace ipu::emu {

using namespace trainer;

std::vector<std::size_t> PhaseTrainer::Impl::slotsOf(const Group& g, const ir::PhaseSegment& seg) const {
  std::vector<std::size_t> out;
  for (int li : seg.layers)
    for (int pid : model->layers()[static_cast<std::size_t>(li)].params)
      for (std::size_t j = 0; j < g.slots.size(); ++j)
        if (g.slots[j].param == pid && std::find(out.begin(), out.end(), j) == out.end()) out.push_back(j);
  std::sort(out.begin(), out.end());
  return out;
}

Mat PhaseTrainer::Impl::storedWeights(const Group& g, std::size_t j) const {
  if (!rtsStreamed) return g.slots[j].home;
  // Each replica keeps its share current: assemble the tensor from all of them.
  Mat w(g.slots[j].rows, g.slots[j].cols);
  for (int r = 0; r < R; ++r) {
    const Slot& src = group(r, g.ipu).slots[j];
    std::copy(src.home.data() + src.owned.begin, src.home.data() + src.owned.end, w.data() + src.owned.begin);
  }
  return w;
}

void PhaseTrainer::Impl::loadWeights(Group& g, const std::vector<std::size_t>& slots) {
  const double wb = fp16Weights ? 2 : 4;
  auto& streamed = traffic.streamed[static_cast<std::size_t>(g.replica)];
  for (std::size_t j : slots) {
    Slot& s = g.slots[j];
    s.value = storedWeights(g, j);
    // This replica reads its share; with RTS the rest comes by an all-gather.
    const double n = static_cast<double>(s.rows * s.cols);
    const double read = rtsStreamed ? static_cast<double>(s.owned.end - s.owned.begin) : n;
    forIpusOf(g, s, [&](std::size_t i) {
      streamed[i].weights += read * wb;
      if (rtsStreamed) traffic.gatheredStreamed[static_cast<std::size_t>(g.replica)][i] += n * wb;
    });
  }
}

void PhaseTrainer::Impl::runPhased() {
  // Forward: stages in order, each stage's segments in order; backward in
  // reverse. All replicas run a segment together; a stage's exchange is
  // delivered once all of its segments ran.
  const int n = static_cast<int>(segments.size());
  auto pass = [&](bool backward) {
    for (int i = 0; i < n; ++i) {
      if (settings.cancel != nullptr && settings.cancel->load()) return;
      const int k = backward ? n - 1 - i : i;
      runGroups(static_cast<std::size_t>(R), [&](std::size_t r) {
        if (local(static_cast<int>(r))) runSegment(group(static_cast<int>(r), segments[static_cast<std::size_t>(k)].ipu), k, backward);
      });
      const int next = backward ? k - 1 : k + 1;
      if (next < 0 || next >= n || segments[static_cast<std::size_t>(next)].stage != segments[static_cast<std::size_t>(k)].stage) deliver();
    }
  };
  pass(false);
  pass(true);
}

void PhaseTrainer::Impl::runSegment(Group& g, int k, bool backward) {
  const ir::PhaseSegment& seg = segments[static_cast<std::size_t>(k)];
  const int n = static_cast<int>(segments.size());
  const bool stageFirst = k == 0 || segments[static_cast<std::size_t>(k - 1)].stage != seg.stage;
  const bool stageLast = k == n - 1 || segments[static_cast<std::size_t>(k + 1)].stage != seg.stage;
  const double cb = fp16Compute ? 2 : 4, wb = fp16Weights ? 2 : 4, ab = fp16Acc ? 2 : 4;
  auto& streamed = traffic.streamed[static_cast<std::size_t>(g.replica)];
  double actBytes = 0;   // activations and gradients through Streaming Memory, for every IPU of the group
  auto out = [&](std::map<Key2, Mat>& where, Key2 key, const Mat& m) {
    where[key] = m;
    actBytes += static_cast<double>(m.size()) * cb;
  };
  auto back = [&](std::map<Key2, Mat>& where, Key2 key) {
    auto it = where.find(key);
    IPU_INVARIANT(it != where.end(), "a phased backward run finds what its forward run left in Streaming Memory");
    Mat m = std::move(it->second);
    where.erase(it);
    actBytes += static_cast<double>(m.size()) * cb;
    return m;
  };

  // The segment's weights come on chip (and, in the backward run, its
  // accumulators); the next run's weights are prefetched meanwhile.
  const std::vector<std::size_t> slots = slotsOf(g, seg);
  loadWeights(g, slots);
  std::vector<double> onChip(static_cast<std::size_t>(T), 0.0);
  for (std::size_t j : slots) {
    const double e = static_cast<double>(g.slots[j].rows * g.slots[j].cols);
    forIpusOf(g, g.slots[j], [&](std::size_t i) { onChip[i - static_cast<std::size_t>(g.ipu * T)] += e * (wb + (backward ? ab : 0.0)); });
  }
  const std::vector<ir::SegmentRun> runs = ir::segmentRuns(segments, g.ipu);
  for (std::size_t i = 0; i + 1 < runs.size(); ++i)
    if (runs[i].segment == k && runs[i].backward == backward)
      for (std::size_t j : slotsOf(g, segments[static_cast<std::size_t>(runs[i + 1].segment)])) {
        const double e = static_cast<double>(g.slots[j].rows * g.slots[j].cols);
        forIpusOf(g, g.slots[j], [&](std::size_t ip) { onChip[ip - static_cast<std::size_t>(g.ipu * T)] += e * wb; });
      }

  double dynamic = g.dynamicElements();   // exchange buffers (the stash is in Streaming Memory)
  for (int m = 0; m < GA; ++m) {
    if (!backward) {
      // The trunk entering the segment: from the previous stage, or from the
      // previous segment through Streaming Memory.
      Mat x;
      if (!stageFirst) {
        x = g.streamedInputs.at({seg.layers.front(), m});
        actBytes += static_cast<double>(x.size()) * cb;
      } else if (seg.stage > 0) {
        auto it = g.activationsIn.find({seg.stage, m});
        IPU_INVARIANT(it != g.activationsIn.end(), "a stage's first segment runs after its input activations arrived");
        x = std::move(it->second);
        g.activationsIn.erase(it);
      }
      for (std::size_t q = 0; q < seg.layers.size(); ++q) {
        const int li = seg.layers[q];
        const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
        // Each layer's input waits in Streaming Memory for its backward pass
        // (the previous segment already wrote the first one's).
        if (q > 0 || stageFirst) out(g.streamedInputs, {li, m}, x);
        Saved sv;
        Mat y;
        forwardLayer(g, li, m, x, sv, y);
        if (!L.head) x = std::move(y);
      }
      if (!stageLast) out(g.streamedInputs, {segments[static_cast<std::size_t>(k + 1)].layers.front(), m}, x);
      else if (seg.stage < S - 1) g.outbox.push_back({g.replica, seg.stage + 1, m, false, std::move(x)});
    } else {
      Mat d;
      if (!stageLast) d = back(g.streamedGradients, {k, m});
      else if (seg.stage < S - 1) {
        auto it = g.gradientsIn.find({seg.stage, m});
        IPU_INVARIANT(it != g.gradientsIn.end(), "a stage's last segment runs backward after the next stage's gradients arrived");
        d = std::move(it->second);
        g.gradientsIn.erase(it);
      }
      // Each layer's input comes back, and its forward pass is recomputed from it.
      for (std::size_t q = seg.layers.size(); q-- > 0;)
        backwardLayer(g, seg.layers[q], m, back(g.streamedInputs, {seg.layers[q], m}), nullptr, d);
      if (!stageFirst) out(g.streamedGradients, {k - 1, m}, d);
      else if (seg.stage > 0) g.outbox.push_back({g.replica, seg.stage - 1, m, true, std::move(d)});
    }
    dynamic = std::max(dynamic, g.dynamicElements());
  }
  g.dynamicPeak = std::max(g.dynamicPeak, dynamic);

  // The weights leave; the backward run writes its accumulators out.
  for (std::size_t j : slots) {
    Slot& s = g.slots[j];
    s.value = Mat();
    if (backward) {
      const double e = static_cast<double>(s.rows * s.cols);
      forIpusOf(g, s, [&](std::size_t i) { streamed[i].gradients += e * ab; });
    }
  }
  for (int t = 0; t < T; ++t) {
    const std::size_t i = static_cast<std::size_t>(g.ipu * T + t);
    streamed[i].activations += actBytes;
    if (g.replica != 0) continue;
    // Replica 0 measures what the replicas (identical) hold.
    double& pp = phaseParamPeak[i][static_cast<std::size_t>(seg.phase)];
    pp = std::max(pp, onChip[static_cast<std::size_t>(t)]);
    double& peak = phasePeak[i][static_cast<std::size_t>(seg.phase)];
    peak = std::max(peak, staticBytes[i] + onChip[static_cast<std::size_t>(t)] + dynamic * cb / T);
  }
}

}  // namespace ipu::emu
