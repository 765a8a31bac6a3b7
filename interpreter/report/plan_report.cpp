#include "interpreter/report/plan_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>
#include <sstream>

#include "interpreter/check/units.h"

namespace ipu::report {

using base::Style;

namespace {

// Megabytes for a table column (at most 7 characters, whatever the size).
std::string mb(double bytes) { return check::formatCell(bytes / 1e6, 1, 7); }

std::string commas(long long n) {
  std::string s = std::to_string(n), out;
  int c = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it, ++c) {
    if (c && c % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
  }
  return out;
}

std::string millions(double n) {
  char buf[32];
  if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  return buf;
}

std::string pad(const std::string& s, std::size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

// Compact names of a set of layers: consecutive repeat elements become ranges.
std::string layerNames(const ir::PhasePlan& p, const std::vector<int>& idx) {
  // Group "prefix[i].rest" by (prefix, rest) into runs of consecutive i, when
  // all the group's sub-layers are present.
  std::vector<std::string> out;
  std::size_t k = 0;
  auto split = [](const std::string& name, std::string& head, long long& i, std::string& rest) {
    auto lb = name.find('[');
    auto rb = name.find(']');
    if (lb == std::string::npos || rb == std::string::npos || rb < lb) return false;
    head = name.substr(0, lb);
    i = std::atoll(name.substr(lb + 1, rb - lb - 1).c_str());
    rest = name.substr(rb + 1);
    return true;
  };
  while (k < idx.size()) {
    const std::string& name = p.layers[static_cast<std::size_t>(idx[k])].name;
    std::string head, rest;
    long long i = 0;
    if (!split(name, head, i, rest)) {
      out.push_back(name);
      ++k;
      continue;
    }
    // Extend over whole elements head[i], head[i+1], ...
    long long first = i, last = i - 1;
    std::size_t j = k;
    while (j < idx.size()) {
      // all layers of element `last + 1` must follow contiguously
      long long want = last + 1;
      std::size_t m = j;
      std::string h2, r2;
      long long i2 = 0;
      while (m < idx.size() && split(p.layers[static_cast<std::size_t>(idx[m])].name, h2, i2, r2) && h2 == head && i2 == want) ++m;
      if (m == j) break;
      // Check the element is complete in the model.
      std::size_t inModel = 0;
      for (const auto& l : p.layers) {
        std::string h3, r3;
        long long i3 = 0;
        if (split(l.name, h3, i3, r3) && h3 == head && i3 == want) ++inModel;
      }
      if (m - j != inModel) break;
      last = want;
      j = m;
    }
    if (last >= first) {
      out.push_back(last == first ? head + "[" + std::to_string(first) + "]"
                                  : head + "[" + std::to_string(first) + ".." + std::to_string(last + 1) + "]");
      k = j;
    } else {
      out.push_back(name);
      ++k;
    }
  }
  std::string s;
  for (std::size_t i = 0; i < out.size(); ++i) s += (i ? ", " : "") + out[i];
  return s;
}

std::vector<std::string> wrap(const std::string& text, std::size_t width) {
  std::vector<std::string> lines;
  std::string line;
  std::stringstream ss(text);
  std::string word;
  while (std::getline(ss, word, ' ')) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

std::string bar(double fraction, const base::Painter& p) {
  const int width = 10;
  int filled = static_cast<int>(std::round(std::min(1.0, fraction) * width));
  std::string b = std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(width - filled), '.');
  Style st = fraction > 1 ? Style::Error : fraction > 0.9 ? Style::Warning : Style::Good;
  return p.paint(st, b);
}

void printPhase(std::ostream& os, const ir::PhasePlan& ph, const base::Painter& p, bool memoryOnly) {
  const hw::Chip& chip = ph.pod.machine.chip;
  const ir::Mapping& m = ph.mapping;
  os << "\n" << p.paint(Style::Bold, "phase " + ph.name) << "  " << ph.model << " (" << millions(ph.parameters)
     << " parameters) on " << ph.pod.name << " (" << ph.pod.ipus() << " x " << chip.name << " @ "
     << check::formatQuantity(chip.clockHz, check::dims::hertz()) << ", " << check::formatBytes(chip.memoryBytes)
     << " each)";
  if (!ph.from.empty()) os << ", starting from phase " << ph.from;
  os << "\n";
  auto row = [&](const char* label, const std::string& text) {
    if (!memoryOnly) os << "  " << p.paint(Style::Dim, pad(label, 10)) << text << "\n";
  };
  std::ostringstream map;
  map << m.name << ": " << m.shard << " x " << m.pipelineIpus << " x " << m.replicas << " = " << ph.ipusUsed << " of "
      << ph.pod.ipus() << " IPUs (shard x pipeline x replicas)";
  if (m.pipelineKind == ir::PipelineKind::Balanced) map << ", balanced";
  if (m.phases > 1) map << "; " << m.phases << " execution phases";
  map << "; recompute " << ir::name(m.recompute);
  if (m.optimizerStateStreaming) map << "; optimizer state in Streaming Memory";
  if (m.weightsStreaming) map << "; weights in Streaming Memory";
  if (m.rtsWeights || m.rtsOptimizerState)
    map << "; replicated tensor sharding of "
        << (m.rtsWeights && m.rtsOptimizerState ? "weights and optimizer state" : m.rtsWeights ? "weights" : "optimizer state");
  if (m.batchNormGroup() > 1)
    map << "; batch norm over " << (m.batchNormReplicas == ir::Mapping::kAllReplicas ? "all " : "groups of ") << m.batchNormGroup()
        << " replicas";
  row("mapping", map.str());
  std::ostringstream batch;
  batch << ph.batch.microBatch << " micro x " << commas(ph.batch.gradientAccumulation) << " accumulated x "
        << ph.batch.replicas << " replicas = " << commas(ph.batch.globalBatch) << " global";
  if (ph.batch.derived != ir::DerivedBatch::None) batch << " (" << ir::nameOf(ph.batch.derived) << " derived)";
  row("batch", batch.str());
  std::ostringstream data;
  if (ph.seqLen) data << "seq_len " << ph.seqLen;
  if (ph.maskedTokens) data << ", " << ph.maskedTokens << " masked tokens";
  if (ph.imageSize) data << (data.tellp() > 0 ? ", " : "") << "image_size " << ph.imageSize;
  if (data.tellp() > 0) data << "; ";
  data << commas(ph.steps) << " steps";
  if (ph.epochs > 0) data << " (" << check::formatNumber(ph.epochs) << " epochs of " << commas(static_cast<long long>(ph.dataset.samples)) << ")";
  data << "; dataset " << ph.dataset.name;
  if (ph.labelSmoothing > 0) data << "; label smoothing " << check::formatNumber(ph.labelSmoothing);
  row("training", data.str());
  std::ostringstream prec;
  const ir::Precision& pr = ph.precision;
  prec << pr.name << ": " << ir::name(pr.compute) << " compute, " << ir::name(pr.weights) << " weights";
  if (pr.masterWeights) prec << " + fp32 master";
  prec << ", " << ir::name(pr.partials) << " partials, " << ir::name(pr.accumulators) << " accumulators, "
       << ir::name(pr.optimizerState) << " optimizer state";
  if (pr.stochasticRounding) prec << ", stochastic rounding";
  switch (pr.lossScale.kind) {
    case ir::LossScaleKind::Static: prec << ", loss scale " << check::formatNumber(pr.lossScale.value); break;
    case ir::LossScaleKind::Dynamic: prec << ", dynamic loss scale from " << check::formatNumber(pr.lossScale.value); break;
    case ir::LossScaleKind::None:
    case ir::LossScaleKind::Lua: break;
  }
  row("precision", prec.str());
  std::ostringstream opt;
  const std::string kind = ir::nameOf(ph.optimizer.kind);
  opt << (ph.optimizer.name.empty() ? kind : ph.optimizer.name + " (" + kind + ")");
  if (!ph.lr.luaFunction.empty()) opt << ", lr from Lua `" << ph.lr.luaFunction << "`";
  else {
    opt << ", lr " << check::formatNumber(ph.lr.peak);
    if (ph.lr.per > 0) opt << " (" << check::formatNumber(ph.lr.base) << " per " << check::formatNumber(ph.lr.per) << ")";
    if (ph.lr.warmupSteps > 0) opt << ", warmup " << commas(static_cast<long long>(ph.lr.warmupSteps)) << " steps";
    if (ph.lr.decay != ir::LrDecay::Constant) opt << ", then " << ir::nameOf(ph.lr.decay) << " to " << check::formatNumber(ph.lr.end);
  }
  row("optimizer", opt.str());
  std::ostringstream pipe;
  pipe << ph.stages.size() << " stage" << (ph.stages.size() == 1 ? "" : "s") << ", " << commas(ph.schedule.cycles())
       << " cycles per step";
  if (ph.stages.size() > 1) {
    pipe << ": ";
    for (std::size_t s = 0; s < ph.stages.size() && s < 12; ++s) pipe << (s ? " > " : "") << "IPU " << ph.stages[s].ipu;
    if (ph.stages.size() > 12) pipe << " > ...";
  }
  row("pipeline", pipe.str());

  // Memory table: one row per pipeline IPU (its shards are identical).
  os << "\n";
  const std::size_t nameWidth = 34;
  auto header = [&](const std::string& s, std::size_t w, bool right = true) { return p.paint(Style::Dim, pad(s, w, right)); };
  os << "  " << header("IPU", 7, false) << header("layers", nameWidth + 1, false) << header("weights", 9)
     << header("optim.", 9) << header("grads", 9) << header("activ.", 9) << header("code", 8) << header("exch.", 8)
     << header("temp.", 8) << header("total MB", 10) << "  " << header("of " + mb(chip.memoryBytes) + " MB", 16, false)
     << "\n";
  const int t = std::max(1, m.shard);
  for (const auto& ipu : ph.ipus) {
    if (ipu.shard != 0) continue;
    std::string label = t > 1 ? std::to_string(ipu.index) + "-" + std::to_string(ipu.index + t - 1) : std::to_string(ipu.index);
    auto lines = wrap(layerNames(ph, ipu.layers), nameWidth);
    const ir::MemoryBreakdown& mem = ipu.memory;
    double frac = mem.total() / ipu.capacityBytes;
    os << "  " << pad(label, 7) << pad(lines[0], nameWidth + 1) << pad(mb(mem.weights), 9, true)
       << pad(mb(mem.optimizerState), 9, true) << pad(mb(mem.gradientAccumulators), 9, true)
       << pad(mb(mem.activations), 9, true) << pad(mb(mem.code), 8, true) << pad(mb(mem.exchange), 8, true)
       << pad(mb(mem.temporaries), 8, true) << pad(mb(mem.total()), 10, true) << "  " << bar(frac, p) << ' '
       << p.paint(frac > 1 ? Style::Error : Style::Bold, pad(check::formatPercent(frac), 4, true))
       << "\n";
    for (std::size_t i = 1; i < lines.size(); ++i) os << "  " << pad("", 7) << lines[i] << "\n";
  }
  double streaming = 0, streamingCap = 0;
  for (const auto& ipu : ph.ipus) {
    streaming = std::max(streaming, ipu.streamingBytes);
    streamingCap = ipu.streamingCapacityBytes;
  }
  if (streaming > 0)
    os << "  " << p.paint(Style::Dim, "Streaming Memory: ") << check::formatBytes(streaming) << " of "
       << check::formatBytes(streamingCap) << " per IPU\n";
  const ir::Ipu* worst = nullptr;
  for (const auto& ipu : ph.ipus)
    if (worst == nullptr || ipu.memory.total() > worst->memory.total()) worst = &ipu;
  if (worst != nullptr) {
    double frac = worst->memory.total() / worst->capacityBytes;
    std::ostringstream v;
    v << "peak " << check::formatBytes(worst->memory.total()) << " on IPU " << worst->index << " ("
      << check::formatPercent(frac) << " of " << check::formatBytes(worst->capacityBytes) << ")";
    if (ph.fits) os << "  " << p.paint(Style::Good, "fits") << ": " << v.str() << "\n";
    else os << "  " << p.paint(Style::Error, "does not fit") << ": " << v.str() << " (see the error above)\n";
  }
}

}  // namespace

void printPlanReport(std::ostream& os, const ir::ExecutionPlan& plan, const base::Painter& p, bool memoryOnly) {
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const auto& run = plan.runs[i];
    if (i) os << "\n";
    os << p.paint(Style::Accent, "run " + run.name) << p.paint(Style::Dim, "  " + run.source.file + ":" +
                                                                           std::to_string(run.source.line))
       << "\n";
    for (const auto& ph : run.phases) printPhase(os, ph, p, memoryOnly);
  }
}

}  // namespace ipu::report
