#include "interpreter/hooks/lua_placement.h"

#include "runtime/ir/mapping_fields.h"

#include <algorithm>
#include <chrono>
#include <cmath>

extern "C" {
#include <lua.h>
}

namespace ipu::hooks {

std::optional<std::vector<int>> LuaPlacement::place(const plan::PlacementRequest& req) {
  const auto key = std::make_pair(req.mapping, req.phase);
  if (auto it = answers_.find(key); it != answers_.end()) return it->second;
  std::optional<std::vector<int>>& answer = answers_[key];
  LoadedHook* hook = hooks_.provider(req.function);
  if (hook == nullptr || hook->failed || req.layers == nullptr) return answer;  // reported when loading

  const auto& layers = *req.layers;
  double totalParams = 0, totalFlops = 0;
  for (const auto& l : layers) {
    totalParams += l.params;
    totalFlops += l.forward.total() + l.backward.total();
  }
  std::vector<int> ipus;
  ipus.reserve(layers.size());
  // The calls for one placement share a budget, so a slow function times
  // thousands of layers cannot make planning hang.
  const SandboxLimits& limits = hook->sandbox->limits();
  const auto start = threadCpuTime();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const ir::Layer& l = layers[i];
    LuaFailure failure;
    int ipu = -1;
    const long long spent =
        std::chrono::duration_cast<std::chrono::milliseconds>(threadCpuTime() - start).count();
    const long long left = std::min(limits.millisecondsPerCall, std::max(0LL, limits.millisecondsShared - spent));
    bool ok = hook->sandbox->call(
        req.function, 1,
        [&](lua_State* L) {
          lua_createtable(L, 0, 12);
          lua_pushinteger(L, static_cast<lua_Integer>(i));
          lua_setfield(L, -2, "index");
          lua_pushlstring(L, l.name.data(), l.name.size());
          lua_setfield(L, -2, "name");
          const std::string op = ir::opName(l);
          lua_pushlstring(L, op.data(), op.size());
          lua_setfield(L, -2, "op");
          lua_pushlstring(L, l.definition.data(), l.definition.size());
          lua_setfield(L, -2, "definition");
          lua_pushnumber(L, l.params);
          lua_setfield(L, -2, "params");
          lua_pushnumber(L, l.tiedParams);
          lua_setfield(L, -2, "tied_params");
          if (!l.tiedTo.empty()) {
            lua_pushlstring(L, l.tiedTo.data(), l.tiedTo.size());
            lua_setfield(L, -2, "tied_to");
          }
          lua_pushnumber(L, l.forward.total());
          lua_setfield(L, -2, "flops");
          lua_pushnumber(L, l.forward.total() + l.backward.total());
          lua_setfield(L, -2, "training_flops");
          lua_pushnumber(L, l.activationElements);
          lua_setfield(L, -2, "activations");
          lua_pushnumber(L, l.outputElements);
          lua_setfield(L, -2, "output");
          lua_createtable(L, 0, static_cast<int>(l.attributes.size()));
          for (const auto& a : l.attributes) {
            if (a.text.empty()) lua_pushnumber(L, a.number);
            else lua_pushlstring(L, a.text.data(), a.text.size());
            lua_setfield(L, -2, a.name.c_str());
          }
          lua_setfield(L, -2, "attributes");

          if (i > 0) {  // the same `info` for every layer of one placement
            lua_getfield(L, LUA_REGISTRYINDEX, "ipu.placement_info");
            return 2;
          }
          lua_createtable(L, 0, 12);
          lua_createtable(L, static_cast<int>(layers.size()), 0);
          for (std::size_t k = 0; k < layers.size(); ++k) {
            const ir::Layer& x = layers[k];
            lua_createtable(L, 0, 7);
            lua_pushinteger(L, static_cast<lua_Integer>(k));
            lua_setfield(L, -2, "index");
            lua_pushlstring(L, x.name.data(), x.name.size());
            lua_setfield(L, -2, "name");
            const std::string xOp = ir::opName(x);
            lua_pushlstring(L, xOp.data(), xOp.size());
            lua_setfield(L, -2, "op");
            lua_pushnumber(L, x.params);
            lua_setfield(L, -2, "params");
            lua_pushnumber(L, x.forward.total());
            lua_setfield(L, -2, "flops");
            lua_pushnumber(L, x.forward.total() + x.backward.total());
            lua_setfield(L, -2, "training_flops");
            lua_pushnumber(L, x.activationElements);
            lua_setfield(L, -2, "activations");
            lua_rawseti(L, -2, static_cast<lua_Integer>(k + 1));
          }
          lua_setfield(L, -2, "all_layers");
          lua_pushinteger(L, static_cast<lua_Integer>(layers.size()));
          lua_setfield(L, -2, "layers");
          lua_pushinteger(L, req.maxIpus);
          lua_setfield(L, -2, "max_ipus");
          lua_pushinteger(L, req.shard);
          lua_setfield(L, -2, ir::nameOf(ir::MappingField::Shard));
          lua_pushinteger(L, req.replicas);
          lua_setfield(L, -2, ir::nameOf(ir::MappingField::Replicas));
          lua_pushnumber(L, req.chipMemoryBytes);
          lua_setfield(L, -2, "chip_memory");
          lua_pushnumber(L, totalParams);
          lua_setfield(L, -2, "total_params");
          lua_pushnumber(L, totalFlops);
          lua_setfield(L, -2, "total_training_flops");
          lua_pushlstring(L, req.mapping.data(), req.mapping.size());
          lua_setfield(L, -2, "mapping");
          lua_pushlstring(L, req.phase.data(), req.phase.size());
          lua_setfield(L, -2, "phase");
          lua_pushlstring(L, req.model.data(), req.model.size());
          lua_setfield(L, -2, "model");
          lua_pushvalue(L, -1);
          lua_setfield(L, LUA_REGISTRYINDEX, "ipu.placement_info");
          return 2;
        },
        [&](lua_State* L, LuaFailure& f) {
          lua_Integer v = 0;
          int isInteger = 0;
          if (lua_type(L, -1) == LUA_TNUMBER) {
            v = lua_tointegerx(L, -1, &isInteger);
          }
          if (!isInteger || v < 0 || v > 1'000'000) {
            f = LuaFailure{};
            f.kind = LuaFailure::Kind::BadValue;
            f.message = "`" + req.function + "` returned " +
                        (lua_type(L, -1) == LUA_TNUMBER ? std::string("a number that is not an IPU index")
                                                        : std::string("a ") + lua_typename(L, lua_type(L, -1))) +
                        " for `" + l.name + "`; it must return the layer's IPU, a whole number from 0";
            return false;
          }
          ipu = static_cast<int>(v);
          return true;
        },
        failure, left);
    if (!ok) {
      hooks_.report(*hook, failure, req.function,
                    "placing `" + l.name + "` (mapping `" + req.mapping + "`, phase `" + req.phase + "`)", req.at);
      return answer;
    }
    ipus.push_back(ipu);
  }
  answer = std::move(ipus);
  return answer;
}

}  // namespace ipu::hooks
