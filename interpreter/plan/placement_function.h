// Placement decided outside the plan layer: `pipeline: lua place` asks a
// function (a Lua hook, wired in by the session) for the pipeline IPU of each
// layer. The plan layer only states what it asks and checks the answer; it
// knows nothing of Lua.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "interpreter/base/source.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::plan {

struct PlacementRequest {
  std::string function;   // the `lua NAME`
  base::Span at;          // where the mapping names it
  std::string mapping, phase, model;
  int maxIpus = 1;        // pipeline IPUs available: the pod's IPUs / (shard x replicas)
  int shard = 1, replicas = 1;
  double chipMemoryBytes = 0;
  const std::vector<ir::Layer>* layers = nullptr;  // in data-flow order, costed for the phase
};

class PlacementFunction {
 public:
  virtual ~PlacementFunction() = default;
  // The pipeline IPU of every layer, or nothing when the function failed
  // (it reported why). Values are not range-checked yet: the planner does.
  virtual std::optional<std::vector<int>> place(const PlacementRequest& request) = 0;
};

}  // namespace ipu::plan
