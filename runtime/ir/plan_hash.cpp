#include "runtime/ir/plan_hash.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/ir/json.h"

namespace ipu::ir {

namespace {

class Fnv1a {
 public:
  void byte(unsigned char c) {
    h_ ^= c;
    h_ *= 0x100000001b3ull;
  }
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) byte(p[i]);
  }
  // Little-endian whatever the host, so the hash is the same everywhere.
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<unsigned char>(v >> (8 * i)));
  }
  void text(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ull;
};

// A string as a document writes it (invalid UTF-8 replaced), so that the
// hash of a plan and of its plan.json agree even then.
std::string written(const std::string& s) {
  return nlohmann::ordered_json(s).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void feed(Fnv1a& h, const nlohmann::ordered_json& j);

void feedNumber(Fnv1a& h, const nlohmann::ordered_json& n) {
  // One encoding per value whatever its JSON type: 3 and 3.0 are one number.
  if (n.is_null()) {
    h.byte('n');
  } else if (n.is_number_unsigned()) {
    h.byte('i');
    h.u64(n.get<std::uint64_t>());
  } else if (n.is_number_integer()) {
    h.byte('i');
    h.u64(static_cast<std::uint64_t>(n.get<std::int64_t>()));
  } else {
    const double d = n.get<double>();
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    h.byte('d');
    h.u64(bits);
  }
}

void feed(Fnv1a& h, const nlohmann::ordered_json& j) {
  using Type = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case Type::null:
    case Type::discarded: h.byte('n'); break;
    case Type::boolean: h.byte(j.get<bool>() ? 't' : 'f'); break;
    case Type::number_integer:
    case Type::number_unsigned: feedNumber(h, j); break;
    case Type::number_float: feedNumber(h, canonicalNumber(j.get<double>())); break;
    case Type::string:
      h.byte('s');
      h.text(written(j.get_ref<const std::string&>()));
      break;
    case Type::binary: h.byte('b'); break;  // never in a plan document
    case Type::array:
      h.byte('[');
      h.u64(j.size());
      for (const auto& item : j) feed(h, item);
      break;
    case Type::object: {
      // By key, not by the order the keys were written in.
      std::vector<std::pair<std::string, const nlohmann::ordered_json*>> members;
      for (auto it = j.begin(); it != j.end(); ++it) members.emplace_back(written(it.key()), &it.value());
      std::sort(members.begin(), members.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      h.byte('{');
      h.u64(members.size());
      for (const auto& [key, value] : members) {
        h.text(key);
        feed(h, *value);
      }
      break;
    }
  }
}

}  // namespace

std::string contentHash(const nlohmann::ordered_json& document) {
  Fnv1a h;
  feed(h, document);
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.value()));
  return buf;
}

std::string planHash(const RunPlan& run) { return contentHash(toJson(ExecutionPlan{{run}})); }

}  // namespace ipu::ir
