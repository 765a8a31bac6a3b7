// Pass 1: the phase's costed layers become plan layers (names, ops, FLOPs,
// activation sizes, code, ties, source locations).
#pragma once

#include "interpreter/plan/context.h"

#include <map>
#include <memory>
#include <utility>

namespace ipu::plan {

// What pass 1 derives from a phase's costed layers alone (not from the
// mapping): mapping variants of one phase share it.
struct ExpandedLayers {
  std::shared_ptr<const std::vector<check::LayerFacts>> facts;  // keeps the key alive
  std::vector<ir::Layer> layers;
  std::vector<std::vector<int>> tiedPartners;
  std::vector<int> codeClass;
};

class LayerExpansions {
 public:
  using Key = std::pair<const void*, double>;  // the costed layers, the code scale
  std::map<Key, std::shared_ptr<const ExpandedLayers>> entries;
};

void expandLayers(PhaseContext& ctx);

}  // namespace ipu::plan
