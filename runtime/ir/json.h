// The documented `--json` outputs and the files a run keeps (plans,
// diagnostics, estimates, run records, metrics) are nlohmann::json trees; this
// header fixes how they are written, so that every one of them follows the
// same contract (docs/plan.md, "JSON conventions"):
//   - objects keep the order their keys were inserted in: people read and
//     diff these files, and a key's place is part of their readability;
//   - a number that is a whole number below 9e15 is written without a
//     fraction (`1`, not `1.0`); any other number is written with at most 10
//     significant digits; NaN and infinities are written as null;
//   - bytes that are not UTF-8 (a file in another encoding) become U+FFFD
//     instead of making the document invalid.
// Reading JSON is nlohmann::json::parse, nothing more.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace ipu::ir {
class Json;
}

// nlohmann::json takes any type with a to_json as a value; without this it
// would take an ir::Json (which converts to a string, as every json does) for
// a string instead of copying it as the JSON it is.
template <>
struct nlohmann::adl_serializer<ipu::ir::Json> {
  static void to_json(nlohmann::ordered_json& j, const ipu::ir::Json& value);
  static void to_json(nlohmann::ordered_json& j, ipu::ir::Json&& value);
};

namespace ipu::ir {

// Writes `doc` under the contract above; indent < 0 is one compact line
// (JSON Lines), otherwise pretty with that indent.
std::string dumpJson(const nlohmann::ordered_json& doc, int indent = 2);

// A number as the contract writes it: null when not finite, an integer when
// whole and below 9e15, else rounded to 10 significant digits. Content hashes
// (runtime/ir/plan_hash.h) use it so that a document and the same document
// read back from its file hash alike.
nlohmann::ordered_json canonicalNumber(double v);

// An ordered nlohmann::json whose dump() follows the contract. `push` is the
// name the plan and estimate documents (runtime/ir/execution_plan.cpp,
// runtime/cost/cost_model.cpp) were written with; it is push_back.
class Json : public nlohmann::ordered_json {
 public:
  using nlohmann::ordered_json::ordered_json;
  Json() = default;
  Json(const nlohmann::ordered_json& j) : nlohmann::ordered_json(j) {}
  Json(nlohmann::ordered_json&& j) : nlohmann::ordered_json(std::move(j)) {}

  static Json object() { return Json(nlohmann::ordered_json::object()); }
  static Json array() { return Json(nlohmann::ordered_json::array()); }
  void push(Json value) { push_back(std::move(value)); }
  std::string dump(int indent = 2) const { return dumpJson(*this, indent); }
};

}  // namespace ipu::ir

inline void nlohmann::adl_serializer<ipu::ir::Json>::to_json(nlohmann::ordered_json& j, const ipu::ir::Json& value) {
  j = static_cast<const nlohmann::ordered_json&>(value);
}
inline void nlohmann::adl_serializer<ipu::ir::Json>::to_json(nlohmann::ordered_json& j, ipu::ir::Json&& value) {
  j = static_cast<nlohmann::ordered_json&&>(value);
}
