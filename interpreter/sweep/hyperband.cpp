#include "interpreter/sweep/hyperband.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace ipu::sweep {

namespace {

// The first value reported at a step >= bracket, if any.
std::optional<double> valueAt(const Curve& curve, long long bracket) {
  for (const auto& [step, value] : curve)
    if (step >= bracket) return value;
  return std::nullopt;
}

// Whether a is strictly better than b under the goal; non-finite is worst.
bool better(double a, double b, Goal goal) {
  bool aFinite = std::isfinite(a), bFinite = std::isfinite(b);
  if (!aFinite || !bFinite) return aFinite && !bFinite;
  return goal == Goal::Minimize ? a < b : a > b;
}

}  // namespace

std::vector<long long> hyperbandBrackets(const EarlyTerminate& rule, long long lastStep) {
  std::vector<long long> brackets;
  if (!rule.enabled || rule.minIter < 1 || rule.eta < 2) return brackets;
  long long limit = rule.maxIter > 0 ? std::min(rule.maxIter, lastStep) : lastStep;
  for (long long b = rule.minIter; b <= limit; ) {
    brackets.push_back(b);
    if (b > limit / rule.eta) break;  // the next would pass the limit (or overflow)
    b *= rule.eta;
  }
  return brackets;
}

StopDecision hyperbandDecision(const EarlyTerminate& rule, Goal goal, const std::vector<Curve>& curves,
                               std::size_t index, long long step) {
  StopDecision decision;
  if (index >= curves.size()) return decision;
  std::vector<long long> brackets = hyperbandBrackets(rule, step);
  // The largest bracket <= step that this trial has reached.
  std::optional<double> mine;
  for (auto b = brackets.rbegin(); b != brackets.rend(); ++b) {
    mine = valueAt(curves[index], *b);
    if (mine) {
      decision.bracket = *b;
      break;
    }
  }
  if (!mine) return decision;
  for (std::size_t i = 0; i < curves.size(); ++i) {
    std::optional<double> theirs = i == index ? mine : valueAt(curves[i], decision.bracket);
    if (!theirs) continue;
    ++decision.reached;
    if (i != index && better(*theirs, *mine, goal)) ++decision.rank;
  }
  const auto eta = static_cast<std::size_t>(rule.eta);
  decision.kept = (decision.reached + eta - 1) / eta;
  decision.stop = decision.rank >= decision.kept;
  if (decision.stop)
    decision.reason = "hyperband: at step " + std::to_string(decision.bracket) + ", " + std::to_string(decision.rank) +
                      " of the " + std::to_string(decision.reached) + " trials that reached it did better; the best " +
                      std::to_string(decision.kept) + " continue";
  return decision;
}

}  // namespace ipu::sweep
