// A plan's identity: a content hash of the plan document (the ipu-plan/1 tree
// that ir::toJson builds and a run directory keeps as plan.json), computed
// from its values, not from the text it is written as. Equal plans hash
// equal; a change of any value of the plan (a layer, a figure, a setting, a
// source position) changes the hash. What does not change it: the order of
// an object's keys, indentation, and how a number is spelled, so the plan
// planned now and the plan.json an older run wrote compare by content.
//
// Numbers are taken as the documents write them (ir::canonicalNumber: ten
// significant digits), so a plan and the same plan read back from its
// plan.json hash alike. The hash is 64-bit FNV-1a over a tagged,
// length-prefixed encoding of the tree (docs/tracking.md, "Plan hash"): an
// identity for run records and caches, not a defence against forgery.
//
// Used for: the plan hash of run records (`ipu runs`: an estimate and a run
// of the same plan are set side by side), what a checkpoint belongs to, and
// whether `ipu run --resume` continues the same plan.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/ir/execution_plan.h"

namespace ipu::ir {

// 16 hex digits.
std::string contentHash(const nlohmann::ordered_json& document);
// The hash of the one-run plan document {"format": "ipu-plan/1", "runs": [run]}.
std::string planHash(const RunPlan& run);

}  // namespace ipu::ir
