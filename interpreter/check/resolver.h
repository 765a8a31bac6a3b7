// Resolution of evaluated records into typed specs (program.h): hardware
// records into hw::Pod, models into their layer lists, mappings into
// placements, trainings into phases with derived batch figures and schedules.
// The constraints that need several declarations at once (t x p x r against
// the pod, every layer placed once, batch arithmetic, phase references) are
// checked here. Internal to the check layer.
#pragma once

#include <map>
#include <memory>

#include "interpreter/check/evaluator.h"
#include "interpreter/check/program.h"

namespace ipu::check {

class Resolver {
 public:
  explicit Resolver(Evaluator& ev) : ev_(ev) {}

  std::shared_ptr<const ModelSpec> model(const Value& v);
  std::shared_ptr<const MappingSpec> mapping(const Value& v);
  bool training(const Record& rec, TrainingSpec& out);
  HookSpec hook(const Record& rec);
  hw::Pod pod(const Record& rec);

 private:
  bool phase(const Record& training, const PhaseEntry& entry, const std::vector<PhaseSpec>& earlier, PhaseSpec& out);
  bool batch(const Record& phase, const Record& training, const MappingSpec& mapping, ir::Batch& out, Span at);
  ir::Precision precision(const Value* v);
  ir::Optimizer optimizer(const Value* v);
  ir::Dataset dataset(const Value* v);
  bool schedule(const Value& v, const PhaseSpec& ph, ir::LrSchedule& out);
  void placeExplicit(const PipelineValue& p, MappingSpec& spec);

  Evaluator& ev_;
  std::map<const void*, std::shared_ptr<const ModelSpec>> models_;
  std::map<const void*, std::shared_ptr<const MappingSpec>> mappings_;
};

}  // namespace ipu::check
