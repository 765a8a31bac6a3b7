#include "runtime/ir/mapping_fields.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "runtime/base/invariant.h"
#include "runtime/ir/kinds.h"

namespace ipu::ir {

namespace {

// Bounds far above any machine, small enough that products of them stay exact
// (the schema's kMaxCount).
constexpr long long kMaxCount = 1 << 20;

FieldValue count(long long n) {
  FieldValue v;
  v.count = n;
  return v;
}
FieldValue symbol(std::string s) {
  FieldValue v;
  v.symbols.push_back(std::move(s));
  return v;
}
FieldValue symbols(std::vector<std::string> s) {
  FieldValue v;
  v.symbols = std::move(s);
  return v;
}
FieldValue fractions(std::vector<double> f) {
  FieldValue v;
  v.fractions = std::move(f);
  return v;
}
const std::string& first(const FieldValue& v) {
  static const std::string none;
  return v.symbols.empty() ? none : v.symbols.front();
}
int asInt(const FieldValue& v) { return static_cast<int>(v.count); }
bool has(const FieldValue& v, const char* s) { return std::find(v.symbols.begin(), v.symbols.end(), s) != v.symbols.end(); }

std::vector<std::string> namesOf(const Recompute (&all)[3]) {
  std::vector<std::string> out;
  for (Recompute r : all) out.emplace_back(name(r));
  return out;
}
std::vector<std::string> pipelineKinds() {
  std::vector<std::string> out;
  for (PipelineKind k : kPipelineKinds) out.emplace_back(nameOf(k));
  return out;
}

std::vector<MappingFieldRow> makeRows() {
  const std::vector<std::string> place = {"on_chip", "streaming"};
  return {
      {MappingField::Shard, "shard", FieldForm::Count, {}, kMaxCount, count(1),
       "tensor sharding `t`: IPUs each pipeline stage is split over", FieldWritten::ByUser, false,
       [](const Mapping& m) { return count(m.shard); }, [](Mapping& m, const FieldValue& v) { m.shard = asInt(v); }},
      {MappingField::PipelineIpus, "pipeline_ipus", FieldForm::Count, {}, kMaxCount, count(1),
       "pipeline IPUs `p` of one replica (set by `pipeline`)", FieldWritten::ByPlacement, false,
       [](const Mapping& m) { return count(m.pipelineIpus); },
       [](Mapping& m, const FieldValue& v) { m.pipelineIpus = asInt(v); }},
      {MappingField::Replicas, "replicas", FieldForm::Count, {}, kMaxCount, count(1), "data-parallel replicas `r`",
       FieldWritten::ByUser, false, [](const Mapping& m) { return count(m.replicas); },
       [](Mapping& m, const FieldValue& v) { m.replicas = asInt(v); }},
      {MappingField::Phases, "phases", FieldForm::Count, {}, kMaxCount, count(1),
       "phased execution: sub-graphs per IPU whose state streams in and out of Streaming Memory", FieldWritten::ByUser,
       false, [](const Mapping& m) { return count(m.phases); }, [](Mapping& m, const FieldValue& v) { m.phases = asInt(v); }},
      {MappingField::Pipeline, "pipeline", FieldForm::Choice, pipelineKinds(), 0, symbol("single"),
       "which layers run on which IPU: `pipeline { ipu 0: ... }`, `balanced(p)` or `lua f`", FieldWritten::ByPlacement,
       false, [](const Mapping& m) { return symbol(nameOf(m.pipelineKind)); },
       [](Mapping& m, const FieldValue& v) { m.pipelineKind = pipelineKindFromName(first(v)).value_or(PipelineKind::Single); }},
      {MappingField::Recompute, "recompute", FieldForm::Choice, namesOf(kRecomputes), 0, symbol("none"),
       "recomputation: keep only checkpoints and recompute activations in the backward pass", FieldWritten::ByUser, false,
       [](const Mapping& m) { return symbol(name(m.recompute)); },
       [](Mapping& m, const FieldValue& v) { m.recompute = recomputeFromName(first(v)).value_or(Recompute::None); }},
      {MappingField::OptimizerState, "optimizer_state", FieldForm::Choice, place, 0, symbol("on_chip"),
       "where optimizer state (and fp32 master weights) live", FieldWritten::ByUser, false,
       [](const Mapping& m) { return symbol(m.optimizerStateStreaming ? "streaming" : "on_chip"); },
       [](Mapping& m, const FieldValue& v) { m.optimizerStateStreaming = first(v) == "streaming"; }},
      {MappingField::Weights, "weights", FieldForm::Choice, place, 0, symbol("on_chip"), "where weights live between uses",
       FieldWritten::ByUser, false, [](const Mapping& m) { return symbol(m.weightsStreaming ? "streaming" : "on_chip"); },
       [](Mapping& m, const FieldValue& v) { m.weightsStreaming = first(v) == "streaming"; }},
      {MappingField::ReplicatedTensorSharding, "replicated_tensor_sharding", FieldForm::Choices, {"weights", "optimizer_state"},
       0, symbols({}), "shard identical tensors across replicas (RTS)", FieldWritten::ByUser, false,
       [](const Mapping& m) {
         FieldValue v;
         if (m.rtsWeights) v.symbols.emplace_back("weights");
         if (m.rtsOptimizerState) v.symbols.emplace_back("optimizer_state");
         return v;
       },
       [](Mapping& m, const FieldValue& v) {
         m.rtsWeights = has(v, "weights");
         m.rtsOptimizerState = has(v, "optimizer_state");
       }},
      {MappingField::AvailableMemoryProportion, "available_memory_proportion", FieldForm::Fractions, {}, 0, fractions({0.6}),
       "share of tile memory matmuls and convolutions may use for temporaries, overall or per IPU", FieldWritten::ByUser,
       false, [](const Mapping& m) { return fractions(m.availableMemoryProportion); },
       [](Mapping& m, const FieldValue& v) { m.availableMemoryProportion = v.fractions; }},
      {MappingField::BatchNormReplicas, "batch_norm_replicas", FieldForm::CountOrAll, {}, kMaxCount, count(1),
       "distributed batch norm: replicas whose micro batches share batch-norm statistics, a divisor of `replicas` "
       "(consecutive replicas form a group), or `all`",
       FieldWritten::ByUser, true, [](const Mapping& m) { return count(m.batchNormReplicas); },
       [](Mapping& m, const FieldValue& v) { m.batchNormReplicas = asInt(v); }},
  };
}

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// `[a, b]` or `a`: the items, trimmed. Empty items are kept (and rejected by the caller).
std::vector<std::string> items(const std::string& text, bool& bracketed) {
  std::string t = trim(text);
  bracketed = t.size() >= 2 && t.front() == '[' && t.back() == ']';
  if (bracketed) t = t.substr(1, t.size() - 2);
  std::vector<std::string> out;
  if (bracketed && trim(t).empty()) return out;
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = t.find(',', start);
    out.push_back(trim(t.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::optional<long long> whole(const std::string& s, long long lo, long long hi) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  long long x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    x = x * 10 + (c - '0');
  }
  if (x < lo || x > hi) return std::nullopt;
  return x;
}

std::optional<double> share(const std::string& s) {
  std::string t = s;
  const bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double x = std::strtod(t.c_str(), &end);
  if (end == nullptr || *end != '\0' || !std::isfinite(x)) return std::nullopt;
  if (percent) x /= 100;
  if (!(x > 0) || x > 1) return std::nullopt;
  return x;
}

std::string quoted(const std::vector<std::string>& s, const char* last) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += i + 1 == s.size() ? std::string(" ") + last + " " : ", ";
    out += "`" + s[i] + "`";
  }
  return out;
}

// The shortest decimal that reads back as the same double.
std::string shortest(double x) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

}  // namespace

const std::vector<MappingFieldRow>& mappingFields() {
  static const std::vector<MappingFieldRow> rows = makeRows();
  return rows;
}

const MappingFieldRow& mappingField(MappingField f) {
  const MappingFieldRow* found = nullptr;
  for (const auto& r : mappingFields())
    if (r.field == f) found = &r;
  IPU_INVARIANT(found != nullptr, "every mapping field has a row in the table (tests/unit/mapping_fields_test.cpp)");
  return *found;
}

const MappingFieldRow* mappingFieldNamed(const std::string& n) {
  for (const auto& r : mappingFields())
    if (n == r.name) return &r;
  return nullptr;
}

std::string fieldTakes(const MappingFieldRow& row) {
  switch (row.form) {
    case FieldForm::Count: return "a whole number from 1";
    case FieldForm::CountOrAll: return "a whole number from 1 or `all`";
    case FieldForm::Choice: return quoted(row.symbols, "or");
    case FieldForm::Choices: {
      std::vector<std::string> s = {"none"};
      s.insert(s.end(), row.symbols.begin(), row.symbols.end());
      return quoted(s, "or") + ", or a list such as `[" + row.symbols.front() + ", " + row.symbols.back() + "]`";
    }
    case FieldForm::Fractions: return "a share in (0, 1] such as `0.6` or `60%`, or one per pipeline IPU `[0.5, 0.6]`";
  }
  return "";
}

std::optional<FieldValue> parseField(const MappingFieldRow& row, const std::string& text, std::string& problem) {
  const std::string t = trim(text);
  auto fail = [&]() -> std::optional<FieldValue> {
    problem = "`" + std::string(row.name) + "` takes " + fieldTakes(row) + ", not `" + t + "`";
    return std::nullopt;
  };
  switch (row.form) {
    case FieldForm::Count: {
      auto n = whole(t, 1, row.maxCount);
      return n ? std::optional<FieldValue>(count(*n)) : fail();
    }
    case FieldForm::CountOrAll: {
      if (t == "all") return count(FieldValue::kAll);
      auto n = whole(t, 1, row.maxCount);
      return n ? std::optional<FieldValue>(count(*n)) : fail();
    }
    case FieldForm::Choice:
      if (std::find(row.symbols.begin(), row.symbols.end(), t) == row.symbols.end()) return fail();
      return symbol(t);
    case FieldForm::Choices: {
      if (t == "none" || t == "[]") return symbols({});
      bool bracketed = false;
      auto list = items(t, bracketed);
      FieldValue v;
      for (const auto& s : row.symbols) {
        const auto n = std::count(list.begin(), list.end(), s);
        if (n > 1) return fail();
        if (n == 1) v.symbols.push_back(s);
      }
      if (v.symbols.size() != list.size()) return fail();
      return v;
    }
    case FieldForm::Fractions: {
      bool bracketed = false;
      auto list = items(t, bracketed);
      FieldValue v;
      for (const auto& s : list) {
        auto x = share(s);
        if (!x) return fail();
        v.fractions.push_back(*x);
      }
      if (v.fractions.empty()) return fail();
      return v;
    }
  }
  return fail();
}

std::string fieldText(const MappingFieldRow& row, const FieldValue& v) {
  switch (row.form) {
    case FieldForm::Count: return std::to_string(v.count);
    case FieldForm::CountOrAll: return v.count == FieldValue::kAll ? "all" : std::to_string(v.count);
    case FieldForm::Choice: return first(v);
    case FieldForm::Choices: {
      if (v.symbols.empty()) return "none";
      if (v.symbols.size() == 1) return v.symbols.front();
      std::string s;
      for (const auto& x : v.symbols) s += (s.empty() ? "" : ", ") + x;
      return "[" + s + "]";
    }
    case FieldForm::Fractions: {
      std::string s;
      for (double x : v.fractions) s += (s.empty() ? "" : ", ") + shortest(x);
      return v.fractions.size() == 1 ? s : "[" + s + "]";
    }
  }
  return "";
}

Json fieldJson(const MappingFieldRow& row, const FieldValue& v) {
  switch (row.form) {
    case FieldForm::Count: return Json(v.count);
    case FieldForm::CountOrAll: return v.count == FieldValue::kAll ? Json("all") : Json(v.count);
    case FieldForm::Choice: return Json(first(v));
    case FieldForm::Choices: {
      Json a = Json::array();
      for (const auto& s : v.symbols) a.push(s);
      return a;
    }
    case FieldForm::Fractions: {
      Json a = Json::array();
      for (double x : v.fractions) a.push(x);
      return a;
    }
  }
  return Json();
}

std::vector<std::string> settingLines(const Mapping& m, bool all) {
  std::vector<std::string> out;
  for (const auto& row : mappingFields()) {
    if (row.written != FieldWritten::ByUser) continue;
    FieldValue v = row.get(m);
    if (!all && v == row.defaultValue) continue;
    out.push_back(std::string(row.name) + ": " + fieldText(row, v));
  }
  return out;
}

void writeMappingJson(const Mapping& m, Json& into) {
  for (const auto& row : mappingFields()) {
    FieldValue v = row.get(m);
    if (row.jsonOnlyWhenSet && v == row.defaultValue) continue;
    into[row.name] = fieldJson(row, v);
  }
}

}  // namespace ipu::ir
