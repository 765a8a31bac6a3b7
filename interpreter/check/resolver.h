// Resolution of evaluated records into typed specs (program.h): hardware
// records into hw::Pod, models into their layer lists, mappings into
// placements, trainings into phases with derived batch figures and schedules.
// The constraints that need several declarations at once (t x p x r against
// the pod, every layer placed once, batch arithmetic, phase references) are
// checked here. Internal to the check layer.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "interpreter/check/evaluator.h"
#include "interpreter/check/program.h"

namespace ipu::check {

// Layer costs per (model, micro batch, sequence length, masked tokens, image
// size): mapping variants with the same shapes share one costing.
class LayerCostCache {
 public:
  using Key = std::tuple<const void*, long long, long long, long long, long long>;
  std::shared_ptr<const std::vector<LayerFacts>> find(const Key& k) const {
    auto it = entries_.find(k);
    return it == entries_.end() ? nullptr : it->second;
  }
  void put(const Key& k, std::shared_ptr<const std::vector<LayerFacts>> v) { entries_[k] = std::move(v); }

 private:
  std::map<Key, std::shared_ptr<const std::vector<LayerFacts>>> entries_;
};

class Resolver {
 public:
  explicit Resolver(Evaluator& ev) : ev_(ev) {}

  std::shared_ptr<const ModelSpec> model(const Value& v);
  std::shared_ptr<const MappingSpec> mapping(const Value& v);
  bool training(const Record& rec, TrainingSpec& out);
  HookSpec hook(const Record& rec);
  hw::Pod pod(const Record& rec);
  // `phase` (resolved before) with another batch: steps from epochs, the
  // learning-rate schedule and the layer costs derived again, as the script
  // with that batch would. False (errors reported) when it cannot be.
  bool rederive(PhaseSpec& phase, const ir::Batch& batch, LayerCostCache& cache);

 private:
  bool phase(const Record& training, const PhaseEntry& entry, const std::vector<PhaseSpec>& earlier, PhaseSpec& out);
  bool batch(const Record& phase, const Record& training, const MappingSpec& mapping, ir::Batch& out, Span at);
  ir::Precision precision(const Value* v);
  ir::Optimizer optimizer(const Value* v);
  ir::Dataset dataset(const Value* v);
  bool schedule(const Value& v, const PhaseSpec& ph, ir::LrSchedule& out);
  bool costLayers(PhaseSpec& phase, Span phaseSpan, LayerCostCache* cache);
  void placeExplicit(const PipelineValue& p, MappingSpec& spec);
  // `batch_norm_replicas`: into the mapping, checked against the replicas and the model.
  void batchNormReplicas(const Record& rec, MappingSpec& spec);

  Evaluator& ev_;
  std::map<const void*, std::shared_ptr<const ModelSpec>> models_;
  std::map<const void*, std::shared_ptr<const MappingSpec>> mappings_;
};

}  // namespace ipu::check
