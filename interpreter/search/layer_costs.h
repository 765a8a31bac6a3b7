// The mapping search varies the micro batch, and a layer's FLOPs, activations
// and workspace depend on it: this costs a phase's layers again for another
// micro batch by evaluating the model's closure (kept by the checker in
// ModelSpec::value) in a phase context with that micro batch, exactly as the
// checker costed them for the declared one. Results are cached per micro
// batch; no script text is written or parsed.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "interpreter/check/evaluator.h"
#include "interpreter/check/program.h"

namespace ipu::search {

class LayerCosts {
 public:
  LayerCosts(check::Evaluator& evaluator, const check::PhaseSpec& phase) : ev_(evaluator), phase_(phase) {}

  // The phase with its layers costed for `microBatch` (its batch figures are
  // the declared ones: the caller sets them). Null when the model cannot be
  // costed for that micro batch (its definition rejects it).
  check::PhaseSpec* phaseFor(long long microBatch);

 private:
  check::Evaluator& ev_;
  const check::PhaseSpec& phase_;
  std::map<long long, std::unique_ptr<check::PhaseSpec>> cache_;
};

}  // namespace ipu::search
