#include "interpreter/search/layer_costs.h"

namespace ipu::search {

check::PhaseSpec* LayerCosts::phaseFor(long long microBatch) {
  auto it = phases_.find(microBatch);
  if (it != phases_.end()) return it->second.get();
  auto out = std::make_unique<check::PhaseSpec>(phase_);
  const long long global = phase_.batch.globalBatch;
  bool ok = microBatch > 0 && global > 0 && global % microBatch == 0;
  if (ok && microBatch != phase_.batch.microBatch) {
    ir::Batch batch = phase_.batch;
    batch.microBatch = microBatch;
    batch.replicas = 1;
    batch.gradientAccumulation = global / microBatch;
    batch.derived = ir::DerivedBatch::GradientAccumulation;
    // Errors here would be the model rejecting this micro batch: they are
    // not the user's script's errors, so they are not kept.
    base::Diagnostics& diags = evaluator_.diags();
    const std::size_t before = diags.all().size();
    ok = resolver_.rederive(*out, batch, cache_) && diags.all().size() == before;
    diags.splitOff(before);
  }
  if (!ok) out.reset();
  return (phases_[microBatch] = std::move(out)).get();
}

}  // namespace ipu::search
