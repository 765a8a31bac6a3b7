// The mapping search varies the micro batch, and a layer's FLOPs, activations
// and workspace depend on it: this gives the phase re-derived for another
// micro batch at the same global batch, through the checker's own
// re-derivation (check::Resolver::rederive: the model's closure evaluated with
// that micro batch, layer costs cached per shape in a LayerCostCache), exactly
// as a script written with that micro batch would be. No script text is
// written or parsed.
#pragma once

#include <map>
#include <memory>

#include "interpreter/check/evaluator.h"
#include "interpreter/check/program.h"
#include "interpreter/check/resolver.h"

namespace ipu::search {

class LayerCosts {
 public:
  LayerCosts(check::Evaluator& evaluator, const check::PhaseSpec& phase)
      : evaluator_(evaluator), resolver_(evaluator), phase_(phase) {}

  // The phase with its layers costed for `microBatch` (its other batch
  // figures are for one replica: the caller sets them per candidate). Null
  // when the phase cannot be derived for that micro batch.
  check::PhaseSpec* phaseFor(long long microBatch);

 private:
  check::Evaluator& evaluator_;
  check::Resolver resolver_;
  check::LayerCostCache cache_;
  const check::PhaseSpec& phase_;
  std::map<long long, std::unique_ptr<check::PhaseSpec>> phases_;
};

}  // namespace ipu::search
