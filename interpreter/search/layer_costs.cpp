#include "interpreter/search/layer_costs.h"

#include "interpreter/check/model.h"

namespace ipu::search {

check::PhaseSpec* LayerCosts::phaseFor(long long microBatch) {
  auto it = cache_.find(microBatch);
  if (it != cache_.end()) return it->second.get();
  std::unique_ptr<check::PhaseSpec> out;
  if (microBatch == phase_.batch.microBatch) {
    out = std::make_unique<check::PhaseSpec>(phase_);
  } else if (phase_.model != nullptr && phase_.model->value != nullptr) {
    check::PhaseContext ctx;
    ctx.structural = false;
    ctx.phaseName = phase_.name;
    ctx.phaseSpan = phase_.span;
    ctx.microBatch = check::Value::integral(microBatch);
    if (phase_.seqLen > 0) ctx.seqLen = check::Value::integral(phase_.seqLen);
    if (phase_.maskedTokens > 0) ctx.maskedTokens = check::Value::integral(phase_.maskedTokens);
    if (phase_.imageSize > 0) ctx.imageSize = check::Value::integral(phase_.imageSize);
    const std::size_t before = ev_.diags().errorCount();
    auto structure = check::expandModel(ev_, *phase_.model->value, ctx);
    std::vector<check::LayerFacts> layers;
    if (structure->leaves.size() == phase_.layers.size())
      for (const auto& leaf : structure->leaves) layers.push_back(check::layerFacts(ev_, leaf, ctx));
    if (ev_.diags().errorCount() == before && layers.size() == phase_.layers.size()) {
      out = std::make_unique<check::PhaseSpec>(phase_);
      out->layers = std::move(layers);
    }
  }
  if (out) out->batch.microBatch = microBatch;
  return (cache_[microBatch] = std::move(out)).get();
}

}  // namespace ipu::search
