#include "interpreter/runner/measured_run.h"

#include <nlohmann/json.hpp>
#include "runtime/ir/mapping_fields.h"

namespace ipu::runner {

namespace {

const char* placementName(plan::MappingValue::Placement p) {
  switch (p) {
    case plan::MappingValue::Placement::AsWritten: return "as_written";
    case plan::MappingValue::Placement::Balanced: return "balanced";
    case plan::MappingValue::Placement::Single: return "single";
    case plan::MappingValue::Placement::Explicit: return "explicit";
  }
  return "as_written";
}

std::optional<plan::MappingValue::Placement> placementNamed(const std::string& text) {
  for (auto p : {plan::MappingValue::Placement::AsWritten, plan::MappingValue::Placement::Balanced,
                 plan::MappingValue::Placement::Single, plan::MappingValue::Placement::Explicit})
    if (text == placementName(p)) return p;
  return std::nullopt;
}

// A whole number from 1, as a batch figure or a pipeline's IPUs are.
bool positiveCount(const std::string& text, long long& out) {
  std::size_t used = 0;
  try {
    out = std::stoll(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == text.size() && out >= 1;
}

}  // namespace

std::string mappingText(const plan::MappingValue& value) {
  nlohmann::ordered_json j;
  j["placement"] = placementName(value.placement);
  j["pipeline_ipus"] = value.pipelineIpus;
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const auto& [ipu, layers] : value.stages) stages.push_back({{"ipu", ipu}, {"layers", layers}});
  j["stages"] = stages;
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();
  for (const auto& row : ir::mappingFields()) {
    if (row.written != ir::FieldWritten::ByUser) continue;
    ir::FieldValue v = row.get(value.settings);
    // An empty list keeps the base mapping's proportions (mapping_value.h).
    if (row.form == ir::FieldForm::Fractions && v.fractions.empty()) continue;
    settings[row.name] = ir::fieldText(row, v);
  }
  j["settings"] = settings;
  nlohmann::ordered_json batch = nlohmann::ordered_json::object();
  if (value.batch.microBatch) batch["micro_batch"] = *value.batch.microBatch;
  if (value.batch.gradientAccumulation) batch["gradient_accumulation"] = *value.batch.gradientAccumulation;
  if (value.batch.globalBatch) batch["global_batch"] = *value.batch.globalBatch;
  j["batch"] = batch;
  return j.dump();
}

bool applyMappingText(plan::MappingValue& value, const std::string& text, std::string& problem) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    problem = "the recorded mapping is not a JSON object";
    return false;
  }
  try {
    auto placement = placementNamed(j.at("placement").get<std::string>());
    if (!placement) {
      problem = "the recorded mapping's placement is unknown";
      return false;
    }
    value.placement = *placement;
    value.pipelineIpus = j.at("pipeline_ipus").get<int>();
    value.stages.clear();
    for (const auto& s : j.at("stages")) value.stages.emplace_back(s.at("ipu").get<int>(), s.at("layers").get<std::vector<int>>());
    for (const auto& [name, v] : j.at("settings").items()) {
      const ir::MappingFieldRow* row = ir::mappingFieldNamed(name);
      if (row == nullptr || row->written != ir::FieldWritten::ByUser) {
        problem = "the recorded mapping has an unknown field `" + name + "`";
        return false;
      }
      auto parsed = ir::parseField(*row, v.get<std::string>(), problem);
      if (!parsed) return false;
      row->set(value.settings, *parsed);
    }
    const auto& batch = j.at("batch");
    value.batch = {};
    if (batch.contains("micro_batch")) value.batch.microBatch = batch["micro_batch"].get<long long>();
    if (batch.contains("gradient_accumulation")) value.batch.gradientAccumulation = batch["gradient_accumulation"].get<long long>();
    if (batch.contains("global_batch")) value.batch.globalBatch = batch["global_batch"].get<long long>();
  } catch (const nlohmann::json::exception& e) {
    problem = std::string("the recorded mapping is malformed: ") + e.what();
    return false;
  }
  return true;
}

bool setMappingField(plan::MappingValue& value, const std::string& name, const std::string& text, std::string& problem) {
  long long n = 0;
  if (name == "pipeline_ipus") {
    if (!positiveCount(text, n) || n > 1 << 16) {
      problem = "`pipeline_ipus` takes a whole number from 1";
      return false;
    }
    value.placement = n == 1 ? plan::MappingValue::Placement::Single : plan::MappingValue::Placement::Balanced;
    value.pipelineIpus = static_cast<int>(n);
    value.stages.clear();
    return true;
  }
  if (name == "placement") {
    auto p = placementNamed(text);
    if (!p || *p == plan::MappingValue::Placement::Explicit) {
      problem = "`placement` takes `as_written`, `balanced` or `single`";
      return false;
    }
    value.placement = *p;
    if (*p == plan::MappingValue::Placement::Single) value.pipelineIpus = 1;
    value.stages.clear();
    return true;
  }
  std::optional<long long>* batch = name == "micro_batch"              ? &value.batch.microBatch
                                    : name == "gradient_accumulation" ? &value.batch.gradientAccumulation
                                    : name == "global_batch"          ? &value.batch.globalBatch
                                                                      : nullptr;
  if (batch != nullptr) {
    if (!positiveCount(text, n)) {
      problem = "`" + name + "` takes a whole number from 1";
      return false;
    }
    *batch = n;
    // Two figures determine the third: the one set, and micro batch or accumulation as written.
    if (name == "global_batch" && value.batch.microBatch && value.batch.gradientAccumulation)
      value.batch.gradientAccumulation.reset();
    if (name != "global_batch" && value.batch.microBatch && value.batch.gradientAccumulation && value.batch.globalBatch)
      value.batch.globalBatch.reset();
    return true;
  }
  const ir::MappingFieldRow* row = ir::mappingFieldNamed(name);
  if (row == nullptr || row->written != ir::FieldWritten::ByUser) {
    std::string names;
    for (const auto& r : ir::mappingFields())
      if (r.written == ir::FieldWritten::ByUser) names += std::string(names.empty() ? "" : ", ") + r.name;
    problem = "no mapping field `" + name + "` (fields: " + names +
              ", pipeline_ipus, placement, micro_batch, gradient_accumulation, global_batch)";
    return false;
  }
  auto parsed = ir::parseField(*row, text, problem);
  if (!parsed) {
    problem = "`" + name + "`: " + problem;
    return false;
  }
  row->set(value.settings, *parsed);
  return true;
}

MeasuredPlan planMeasured(session::Session& s, base::FileId file, const std::string& run, const std::string& phase,
                          const plan::MappingValue* mapping) {
  MeasuredPlan out;
  const ir::ExecutionPlan* plan = s.plan(file, /*requireRuns=*/true);
  if (plan == nullptr || s.diagnostics().hasErrors()) {
    out.diagnostics = s.diagnostics();
    if (plan == nullptr && !out.diagnostics.hasErrors()) out.problem = "the script does not plan";
    return out;
  }
  bool runFound = false;
  for (std::size_t i = 0; i < plan->runs.size() && !runFound; ++i)
    if (run.empty() || plan->runs[i].name == run) out.run = i, runFound = true;
  if (!runFound) {
    out.problem = "no training `" + run + "` in the script";
    return out;
  }
  const ir::RunPlan& r = plan->runs[out.run];
  bool phaseFound = false;
  for (std::size_t k = 0; k < r.phases.size() && !phaseFound; ++k)
    if (phase.empty() || r.phases[k].name == phase) out.phase = k, phaseFound = true;
  if (!phaseFound) {
    out.problem = "no phase `" + phase + "` in training `" + r.name + "`";
    return out;
  }
  out.plan.runs.push_back(r);
  if (mapping != nullptr) {
    session::PlannedVariant v = s.planVariant(*mapping, out.run, out.phase);
    out.diagnostics = v.diagnostics;
    if (!v.ok) return out;
    out.plan.runs[0].phases[out.phase] = v.plan;
  }
  out.ok = true;
  return out;
}

}  // namespace ipu::runner
