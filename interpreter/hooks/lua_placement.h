// `pipeline: lua place`: the planner's PlacementFunction backed by a Lua
// function of the script's hooks. `place(layer, info)` is called once per
// layer in data-flow order and returns the layer's pipeline IPU (from 0).
// Answers are kept per mapping and phase, so the planner's lever variants
// (which keep the pipeline) do not call Lua again.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "interpreter/hooks/hook_set.h"
#include "interpreter/plan/placement_function.h"

namespace ipu::hooks {

class LuaPlacement : public plan::PlacementFunction {
 public:
  explicit LuaPlacement(HookSet& hooks) : hooks_(hooks) {}
  std::optional<std::vector<int>> place(const plan::PlacementRequest& request) override;

 private:
  HookSet& hooks_;
  std::map<std::pair<std::string, std::string>, std::optional<std::vector<int>>> answers_;
};

}  // namespace ipu::hooks
