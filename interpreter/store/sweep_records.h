// A sweep's spec and a trial's assignment as JSON: how the run store keeps
// them (sweeps.spec, trials.assignment) and how `ipu sweep status --json`
// shows them. Source positions (spans) are not kept: a stored sweep outlives
// the script file it came from.
//
// A parameter value is a JSON number for a number (1.0 stays a float), an
// integer for an integer, a boolean for a boolean, a string for text and
// {"name": "fp16"} for a name of the script.
#pragma once

#include <nlohmann/json.hpp>

#include "interpreter/sweep/space.h"

namespace ipu::store {

nlohmann::json toJson(const sweep::ParamValue& v);
nlohmann::json toJson(const sweep::Assignment& a);  // {"lr": 0.001, "mapping.replicas": 4}
nlohmann::json toJson(const sweep::SweepSpec& spec);

// The reverse; a malformed document throws StoreError naming `what`.
sweep::ParamValue paramValueFromJson(const nlohmann::json& j, const std::string& what);
sweep::Assignment assignmentFromJson(const nlohmann::json& j, const std::string& what);
sweep::SweepSpec specFromJson(const nlohmann::json& j, const std::string& what);

}  // namespace ipu::store
