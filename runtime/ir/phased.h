// Phased execution (`phases: k`, `weights: streaming`) as both backends run
// it; this file is the only place the rule is written.
//
// The planner splits each pipeline IPU's layers into phases (Layer::phase:
// contiguous runs balanced by their weights). A step then runs every stage's
// layers in *segments*, maximal runs of the stage's consecutive layers in the
// same phase, one after another (PopART's batch serialisation):
//   forward:  stages in order; in each, its segments in order, each running
//             every micro batch of the step before the next segment starts;
//   backward: stages in reverse; in each, its segments in reverse.
// A segment's weights come onto its IPUs from Streaming Memory for each of its
// two runs (forward and backward) and leave after it, while the next run's
// weights are prefetched into a second buffer; its gradient accumulators are
// on chip for its backward run and written out after it. Each layer keeps its
// input in Streaming Memory for the backward pass, which recomputes the layer
// from it. The cost model prices the traffic this implies (ir::Traffic) and the
// emulator executes it, moving exactly those bytes (tests/emulator/phased_test.cpp).
#pragma once

#include <vector>

#include "runtime/ir/execution_plan.h"

namespace ipu::ir {

// Whether the mapping runs phase by phase.
inline bool isPhased(const Mapping& m) { return m.phases > 1 || m.weightsStreaming; }

struct PhaseSegment {
  int stage = 0;
  int ipu = 0;              // pipeline IPU
  int phase = 0;
  std::vector<int> layers;  // indices into PhasePlan::layers, in the stage's order
};

// Every stage's segments, stages in forward order.
std::vector<PhaseSegment> phaseSegments(const PhasePlan& p);

// One run of a segment on its pipeline IPU.
struct SegmentRun {
  int segment = 0;          // index into phaseSegments()
  bool backward = false;
};
// The runs of pipeline IPU `ipu` in the order it executes them in a step; the
// run after run i is the one whose weights are prefetched during it.
std::vector<SegmentRun> segmentRuns(const std::vector<PhaseSegment>& segments, int ipu);

// Parameters (elements) a segment's weights put on each IPU of its shard group:
// its layers' own (divided over the group when shardable) and the weights they
// share with a layer outside the segment (their copy of a tied tensor).
double segmentParameters(const PhasePlan& p, const PhaseSegment& s, int shard);
// segmentParameters of every segment, in order (what a plan's IPUs look up
// for their runs).
std::vector<double> segmentsParameters(const PhasePlan& p, const std::vector<PhaseSegment>& segments, int shard);

// Whether layer `li` reads the micro batch itself rather than an activation:
// the first layer of the first stage. Its input is host data, not streamed.
bool readsHostInput(const PhasePlan& p, int li);

// The elements layer `li` sends to Streaming Memory for its backward pass,
// per micro batch, and reads back: with recomputation its input (nothing for
// the layer that reads the host's micro batch), without every activation it
// keeps (its share of the shard group when it is shardable).
double stashedElements(const PhasePlan& p, int li, Recompute recompute, int shard);

}  // namespace ipu::ir
