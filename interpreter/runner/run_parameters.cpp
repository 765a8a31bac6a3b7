#include "interpreter/runner/run_parameters.h"

#include "runtime/ir/mapping_fields.h"
#include "runtime/ir/plan_hash.h"

#include <cstdint>
#include <cstdio>

namespace ipu::runner {

namespace {

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

std::map<std::string, std::string> phaseValues(const ir::PhasePlan& p) {
  std::map<std::string, std::string> v;
  auto num = [&](const std::string& k, double x) { v[k] = number(x); };
  auto text = [&](const std::string& k, const std::string& x) {
    if (!x.empty()) v[k] = x;
  };
  auto flag = [&](const std::string& k, bool b) { v[k] = b ? "true" : "false"; };
  text("model", p.model);
  text("pod", p.pod.name);
  num("steps", static_cast<double>(p.steps));
  if (p.seqLen > 0) num("seq_len", static_cast<double>(p.seqLen));
  num("parameters", p.parameters);
  text("mapping.name", p.mapping.name);
  // Every setting under its name in the table of mapping fields (the
  // language's, the plan JSON's, `--fix`'s): `mapping.optimizer_state = streaming`.
  for (const auto& row : ir::mappingFields()) v["mapping." + std::string(row.name)] = ir::fieldText(row, row.get(p.mapping));
  num("mapping.ipus_used", p.ipusUsed);
  text("precision.name", p.precision.name);
  text("precision.compute", ir::name(p.precision.compute));
  text("precision.weights", ir::name(p.precision.weights));
  text("precision.loss_scale", ir::nameOf(p.precision.lossScale.kind));
  flag("precision.stochastic_rounding", p.precision.stochasticRounding);
  text("optimizer.name", p.optimizer.name);
  text("optimizer.kind", ir::nameOf(p.optimizer.kind));
  num("optimizer.beta1", p.optimizer.beta1);
  num("optimizer.beta2", p.optimizer.beta2);
  num("optimizer.epsilon", p.optimizer.epsilon);
  num("optimizer.weight_decay", p.optimizer.weightDecay);
  num("optimizer.momentum", p.optimizer.momentum);
  num("lr.base", p.lr.base);
  num("lr.peak", p.lr.peak);
  num("lr.warmup_steps", p.lr.warmupSteps);
  text("lr.decay", ir::nameOf(p.lr.decay));
  num("lr.end", p.lr.end);
  text("lr.lua", p.lr.luaFunction);
  num("batch.micro_batch", static_cast<double>(p.batch.microBatch));
  num("batch.gradient_accumulation", static_cast<double>(p.batch.gradientAccumulation));
  num("batch.global_batch", static_cast<double>(p.batch.globalBatch));
  text("dataset.name", p.dataset.name);
  text("dataset.kind", ir::nameOf(p.dataset.kind));
  flag("fits", p.fits);
  return v;
}

}  // namespace

std::map<std::string, std::string> runParameters(const ir::RunPlan& run) {
  std::map<std::string, std::string> out;
  out["training"] = run.name;
  out["seed"] = std::to_string(run.seed);
  out["phases"] = std::to_string(run.phases.size());
  std::map<std::string, std::string> shared;
  bool first = true;
  for (const auto& phase : run.phases) {
    auto values = phaseValues(phase);
    for (const auto& [k, v] : values) out["phases." + phase.name + "." + k] = v;
    if (first) {
      shared = values;
      first = false;
      continue;
    }
    for (auto it = shared.begin(); it != shared.end();) {
      auto other = values.find(it->first);
      it = other == values.end() || other->second != it->second ? shared.erase(it) : std::next(it);
    }
  }
  for (auto& [k, v] : shared) out.emplace(k, v);
  return out;
}

std::string planText(const ir::RunPlan& run) { return ir::Json(ir::toJson(ir::ExecutionPlan{{run}})).dump(); }

std::string planHash(const ir::RunPlan& run) { return ir::planHash(run); }

}  // namespace ipu::runner
