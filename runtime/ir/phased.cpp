#include "runtime/ir/phased.h"

#include <algorithm>

#include "runtime/base/invariant.h"

namespace ipu::ir {

std::vector<PhaseSegment> phaseSegments(const PhasePlan& p) {
  std::vector<PhaseSegment> out;
  std::vector<const Stage*> stages;
  for (const auto& s : p.stages) stages.push_back(&s);
  std::sort(stages.begin(), stages.end(), [](const Stage* a, const Stage* b) { return a->index < b->index; });
  for (const Stage* s : stages)
    for (int li : s->layers) {
      IPU_INVARIANT(li >= 0 && static_cast<std::size_t>(li) < p.layers.size(), "a stage names layers of its plan");
      const Layer& l = p.layers[static_cast<std::size_t>(li)];
      if (out.empty() || out.back().stage != s->index || out.back().phase != l.phase)
        out.push_back(PhaseSegment{s->index, s->ipu, l.phase, {}});
      out.back().layers.push_back(li);
    }
  return out;
}

std::vector<SegmentRun> segmentRuns(const std::vector<PhaseSegment>& segments, int ipu) {
  std::vector<SegmentRun> out;
  for (std::size_t i = 0; i < segments.size(); ++i)
    if (segments[i].ipu == ipu) out.push_back({static_cast<int>(i), false});
  for (std::size_t i = segments.size(); i-- > 0;)
    if (segments[i].ipu == ipu) out.push_back({static_cast<int>(i), true});
  return out;
}

double segmentParameters(const PhasePlan& p, const PhaseSegment& s, int shard) {
  const double t = std::max(1, shard);
  double n = 0;
  for (int li : s.layers) {
    IPU_INVARIANT(li >= 0 && static_cast<std::size_t>(li) < p.layers.size(), "a phase segment names layers of its plan");
    const Layer& l = p.layers[static_cast<std::size_t>(li)];
    n += l.shardable ? l.params / t : l.params;
    if (l.tiedTo.empty()) continue;
    bool ownerHere = false;
    for (int o : s.layers) ownerHere |= p.layers[static_cast<std::size_t>(o)].name == l.tiedTo;
    if (!ownerHere) n += l.shardable ? l.tiedParams / t : l.tiedParams;
  }
  return n;
}

std::vector<double> segmentsParameters(const PhasePlan& p, const std::vector<PhaseSegment>& segments, int shard) {
  std::vector<double> out;
  out.reserve(segments.size());
  for (const PhaseSegment& s : segments) out.push_back(segmentParameters(p, s, shard));
  return out;
}

bool readsHostInput(const PhasePlan& p, int li) {
  for (const auto& s : p.stages)
    if (s.index == 0 && !s.layers.empty()) return s.layers.front() == li;
  return false;
}

double stashedElements(const PhasePlan& p, int li, Recompute recompute, int shard) {
  IPU_INVARIANT(li >= 0 && static_cast<std::size_t>(li) < p.layers.size(), "a stashed layer is a layer of its plan");
  const Layer& l = p.layers[static_cast<std::size_t>(li)];
  if (recompute == Recompute::None) return l.shardable ? l.activationElements / std::max(1, shard) : l.activationElements;
  return readsHostInput(p, li) ? 0 : l.inputElements;
}

}  // namespace ipu::ir
