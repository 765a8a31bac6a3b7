#include "interpreter/check/batch.h"

#include "interpreter/check/codes.h"

namespace ipu::check {

namespace {

std::string commas(long long n) {
  std::string s = std::to_string(n), out;
  int count = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (count && count % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return out;
}

}  // namespace

BatchProblem deriveBatch(const BatchRequest& req, long long r, const std::string& phase, ir::Batch& out) {
  const bool mb = req.microBatch.has_value(), ga = req.gradientAccumulation.has_value(), gb = req.globalBatch.has_value();
  out.replicas = r;
  const int given = mb + ga + gb;
  if (given < 2)
    return {code::kBatchUnderdetermined, "",
            "phase `" + phase + "` needs two of `micro_batch`, `gradient_accumulation` and `global_batch`" +
                (given == 1 ? std::string(" (it sets one)") : std::string(" (it sets none)")),
            "global_batch = micro_batch x gradient_accumulation x replicas; give any two and the third is derived"};
  if (given == 3) {
    out.microBatch = *req.microBatch;
    out.gradientAccumulation = *req.gradientAccumulation;
    out.globalBatch = *req.globalBatch;
    long long product = out.microBatch * out.gradientAccumulation * r;
    if (product != out.globalBatch)
      return {code::kBatchInconsistent, "global_batch",
              "global batch does not add up: micro_batch x gradient_accumulation x replicas = " + commas(out.microBatch) +
                  " x " + commas(out.gradientAccumulation) + " x " + std::to_string(r) + " = " + commas(product) +
                  ", not " + commas(out.globalBatch),
              "give only two of the three and let the third be derived"};
    out.derived = ir::DerivedBatch::None;
    return {};
  }
  if (!gb) {
    out.microBatch = *req.microBatch;
    out.gradientAccumulation = *req.gradientAccumulation;
    out.globalBatch = out.microBatch * out.gradientAccumulation * r;
    out.derived = ir::DerivedBatch::GlobalBatch;
    return {};
  }
  long long global = *req.globalBatch;
  long long other = mb ? *req.microBatch : *req.gradientAccumulation;
  long long divisor = other * r;
  const ir::DerivedBatch derived = mb ? ir::DerivedBatch::GradientAccumulation : ir::DerivedBatch::MicroBatch;
  const char* derivedName = ir::nameOf(derived);
  if (divisor <= 0 || global % divisor != 0 || global / divisor < 1) {
    long long below = divisor > 0 ? (global / divisor) * divisor : 0;
    long long above = below + divisor;
    std::string help = "nearest global batches that divide evenly: ";
    if (below > 0) help += commas(below) + " (" + derivedName + " " + commas(below / divisor) + ") or ";
    help += commas(above) + " (" + derivedName + " " + commas(above / divisor) + ")";
    return {code::kBatchIndivisible, "global_batch",
            "global batch " + commas(global) + " is not a multiple of " + (mb ? "micro_batch" : "gradient_accumulation") +
                " x replicas = " + commas(other) + " x " + std::to_string(r) + " = " + commas(divisor),
            help};
  }
  if (mb) {
    out.microBatch = other;
    out.gradientAccumulation = global / divisor;
  } else {
    out.gradientAccumulation = other;
    out.microBatch = global / divisor;
  }
  out.globalBatch = global;
  out.derived = derived;
  return {};
}

}  // namespace ipu::check
