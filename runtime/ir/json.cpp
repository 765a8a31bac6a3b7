#include "runtime/ir/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ipu::ir {

nlohmann::ordered_json canonicalNumber(double v) {
  if (!std::isfinite(v)) return nullptr;  // JSON has no NaN or infinity
  if (v != std::floor(v) || std::fabs(v) >= 9e15) {
    // Ten significant digits: more than any figure here is known to, and
    // short enough that a changed last bit is not a changed document.
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", v);
    v = std::strtod(buf, nullptr);
  }
  if (v == std::floor(v) && std::fabs(v) < 9e15) return static_cast<long long>(v);
  return v;  // nlohmann writes the shortest text that reads back as v: the same digits
}

namespace {

nlohmann::ordered_json canonical(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::number_float: return canonicalNumber(j.get<double>());
    case nlohmann::ordered_json::value_t::array: {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const auto& item : j) out.push_back(canonical(item));
      return out;
    }
    case nlohmann::ordered_json::value_t::object: {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      for (const auto& [key, value] : j.items()) out[key] = canonical(value);
      return out;
    }
    default: return j;
  }
}

}  // namespace

std::string dumpJson(const nlohmann::ordered_json& doc, int indent) {
  return canonical(doc).dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace ipu::ir
