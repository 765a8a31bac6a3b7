// The pipeline schedule: which stage works on which micro batch in each
// pipeline cycle of an optimizer step. With S forward stages, the last
// stage's forward and backward fuse, so a micro batch passes 2S - 1 training
// stages and a step of GA micro batches takes GA + 2S - 2 cycles (the plan's
// `pipeline_cycles`). Stage s runs the forward of micro batch c - s in cycle
// c and its backward in cycle c - 2(S - 1) + s. Within a cycle the work is
// grouped as Graphcore's grouped schedule does: all forward passes, then all
// backward passes; a cycle is one BSP superstep (compute, sync, exchange), and
// everything a stage needs in cycle c was sent in an earlier cycle.
#pragma once

#include <vector>

namespace ipu::emu {

struct StageWork {
  int stage = 0;
  int micro = 0;
  bool forward = true;   // the last stage's forward includes its backward
};

std::vector<std::vector<StageWork>> pipelineCycles(int stages, int gradientAccumulation);

}  // namespace ipu::emu
