// The pipeline schedule of one optimizer step, as the plan carries it: for
// every pipeline cycle and every stage, which micro batch the stage runs
// forward, recomputes or runs backward (or that it idles). The planner builds
// it once from the mapping; the cost model, the timeline and the emulator read
// it, and this file is the only place the rule is written.
//
// The rule is PopART's grouped pipeline (1F1B in steady state). With S
// forward stages the last stage's forward and backward run in the same cycle,
// so a micro batch passes 2S - 1 training stages and a step of GA micro
// batches takes GA + 2S - 2 cycles (fill, steady state, drain):
//   stage s runs the forward of micro batch c - s in cycle c,
//   and the backward of micro batch c - 2(S - 1) + s;
//   under recomputation, the backward's recomputation runs just before it, in
//   the same cycle.
// A cycle is one BSP superstep (compute, sync, exchange): everything a stage
// needs in cycle c was sent in an earlier cycle (or, for the last stage's
// backward, computed by itself in the same cycle).
//
// A step of GA 2000 on 64 stages is 2126 cycles of 64 stages: the plan stores
// the three numbers the schedule is a function of, never the table.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ipu::ir {

enum class Recompute { None, EveryLayer, Stage };
inline constexpr Recompute kRecomputes[] = {Recompute::None, Recompute::EveryLayer, Recompute::Stage};
const char* name(Recompute r);  // the mapping's `recompute` symbol: none, every_layer, stage_inputs
std::optional<Recompute> recomputeFromName(std::string_view name);

enum class Pass : std::uint8_t { Forward, Recompute, Backward };
const char* name(Pass p);

// One stage's work on one micro batch.
struct Work {
  int stage = 0;
  long long micro = 0;
  Pass pass = Pass::Forward;
  bool operator==(const Work& o) const { return stage == o.stage && micro == o.micro && pass == o.pass; }
};

// What one stage does in one cycle: -1 where it runs nothing of that kind.
struct StageCycle {
  long long forward = -1;     // micro batch it runs forward
  long long backward = -1;    // micro batch it runs backward
  bool recompute = false;     // whether the backward's micro batch is recomputed first
  bool idle() const { return forward < 0 && backward < 0; }
};

struct PipelineSchedule {
  int stages = 1;
  long long microBatches = 1;          // gradient accumulation
  Recompute recompute = Recompute::None;

  // GA + 2S - 2 (GA for one stage).
  long long cycles() const;
  // What `stage` does in `cycle`.
  StageCycle at(int stage, long long cycle) const;
  // The work of one cycle in the order an executor runs it: every forward in
  // stage order, then every (recompute and) backward from the last stage to
  // the first, as Graphcore's grouped schedule does. The last stage's
  // backward follows the forwards, so it consumes the forward it depends on.
  std::vector<Work> cycle(long long c) const;
  // Micro batches a stage holds between its forward and its backward in the
  // steady state (its stash depth): 2(S - 1 - s) + 1. The memory plan sizes
  // the stash for it whatever GA is (a smaller GA never reaches it).
  int stashDepth(int stage) const;
};

}  // namespace ipu::ir
