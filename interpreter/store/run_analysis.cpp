#include "interpreter/store/run_analysis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace ipu::store {

void sortRuns(std::vector<RunRecord>& runs, const Field& field, bool descending) {
  std::stable_sort(runs.begin(), runs.end(), [&](const RunRecord& a, const RunRecord& b) {
    FieldValue x = FieldResolver::value(a, field), y = FieldResolver::value(b, field);
    if (x.present != y.present) return x.present;  // missing values last, either way
    if (!x.present) return false;
    bool less = x.numeric && y.numeric ? x.number < y.number : x.text < y.text;
    bool greater = x.numeric && y.numeric ? x.number > y.number : x.text > y.text;
    return descending ? greater : less;
  });
}

std::string sortKey(const std::string& spec, bool& descending) {
  std::string key = spec;
  descending = false;
  if (!key.empty() && key[0] == '-') {
    descending = true;
    key = key.substr(1);
  }
  for (const std::string s : {":desc", ":asc"})
    if (key.size() > s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0) {
      descending = s == ":desc";
      key = key.substr(0, key.size() - s.size());
    }
  return key;
}

std::vector<std::string> differingParameters(const std::vector<RunRecord>& runs) {
  std::map<std::string, std::set<std::string>> values;
  std::map<std::string, std::size_t> seen;
  for (const auto& r : runs)
    for (const auto& [k, v] : r.parameters) {
      values[k].insert(v);
      ++seen[k];
    }
  std::vector<std::string> out;
  for (const auto& [k, vs] : values)
    if (vs.size() > 1 || seen[k] != runs.size()) out.push_back(k);
  return out;
}

std::vector<Field> tellingColumns(const std::vector<RunRecord>& runs, const FieldResolver& names) {
  std::vector<Field> columns;
  const auto differing = differingParameters(runs);
  std::vector<std::string> chosen;
  for (bool perPhase : {false, true})
    for (const auto& k : differing)
      if ((k.rfind("phases.", 0) == 0) == perPhase && k != "training" && chosen.size() < 4) chosen.push_back(k);
  for (const auto& k : chosen)
    if (auto f = names.resolve(k)) columns.push_back(*f);
  for (const char* m : {"loss", "samples_per_s"})
    if (auto f = names.resolve(m)) columns.push_back(*f);
  return columns;
}

namespace {

double meanOf(const std::vector<MetricPoint>& points) {
  double sum = 0;
  long long n = 0;
  for (const auto& pt : points)
    if (std::isfinite(pt.value)) {
      sum += pt.value;
      ++n;
    }
  return n > 0 ? sum / static_cast<double>(n) : std::nan("");
}

}  // namespace

std::vector<EstimatePairing> pairWithEstimates(RunStore& store, const std::vector<RunRecord>& runs,
                                               const std::vector<RunRecord>& all) {
  std::vector<EstimatePairing> pairs;
  for (const auto& r : runs) {
    if (r.kind != RunKind::Run) continue;
    for (const auto& e : all)  // newest first
      if (e.kind == RunKind::Estimate && e.planHash == r.planHash) {
        EstimatePairing p{&r, e, {}};
        for (const auto& [k, s] : e.metrics)
          if (r.metrics.count(k)) p.metrics.push_back({k, s.last, meanOf(store.metricHistory(r.id, k))});
        pairs.push_back(std::move(p));
        break;
      }
  }
  return pairs;
}

}  // namespace ipu::store
