// Mapping variants planned in process (session/variant.h) against today's
// script-per-variant loop, on the BERT-Large POD64 and GPT-3 175B POD256
// examples: random valid variants (t, p, r, micro batch, recompute, offload,
// replicated tensor sharding, phases), each planned and estimated. Prints the
// median per variant of both ways and their ratio, and how long `ipu check`
// of each example takes in a process whose prelude is loaded. Figures, not
// tests: docs/benchmarks.md records them. Medians on a shared machine.
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "interpreter/check/prelude.h"
#include "interpreter/session/session.h"
#include "runtime/ir/mapping_fields.h"
#include "runtime/cost/cost_model.h"

namespace {

using MappingVariant = ipu::plan::MappingValue;

// CPU time of this thread: the machine is shared, and wall-clock time would
// measure the neighbours too.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  }
};

double usSince(double t0) { return Clock::now() - t0; }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string read(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trimmed(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b);
}

// The example with its first mapping and its phase's micro batch replaced by
// the variant: what a script-per-variant search writes.
std::string writeVariant(const std::string& text, const MappingVariant& v) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  bool inMapping = false, done = false, inPipeline = false;
  while (std::getline(in, line)) {
    std::string t = trimmed(line);
    if (!done && !inMapping && t.rfind("mapping ", 0) == 0 && t.back() == '{') {
      inMapping = true;
      out << line << "\n";
      continue;
    }
    if (inMapping) {
      if (inPipeline) {
        if (t == "}") inPipeline = false;
        continue;
      }
      if (t.rfind("pipeline", 0) == 0) {
        inPipeline = t.back() == '{';
        continue;
      }
      if (t == "}") {
        out << "  pipeline: balanced(" << v.pipelineIpus << ")\n";
        // Every setting through the table of mapping fields, as `ipu search --write` prints them.
        for (const auto& l : ipu::ir::settingLines(v.settings, /*all=*/true)) out << "  " << l << "\n";
        out << "}\n";
        inMapping = false;
        done = true;
      }
      continue;  // every other field is the variant's
    }
    if (t.rfind("micro_batch:", 0) == 0) {
      out << "    micro_batch: " << *v.batch.microBatch << "\n";
      continue;
    }
    out << line << "\n";
  }
  return out.str();
}

struct Example {
  const char* file;
  std::vector<int> pipelines, shards, phases, microBatches;
  int podIpus;
  std::size_t variants, scripts;
};

bool apiOnly = false;    // `--api-only`: only the in-process variants (for a profiler)
bool checkOnly = false;  // `--check-only`: only `ipu check` in a warm process, 300 times

void run(const Example& ex) {
  const std::string path = std::string(IPU_SOURCE_DIR) + "/examples/" + ex.file;
  const std::string text = read(path);
  ipu::session::Session base;
  auto f = base.addSource(path, text);
  if (base.check(f) == nullptr) {
    std::printf("%s: does not check\n", ex.file);
    return;
  }
  const MappingVariant written = base.variantOf();
  std::mt19937 rng(1123);
  auto pick = [&](const std::vector<int>& xs) { return xs[rng() % xs.size()]; };
  std::vector<MappingVariant> variants;
  std::vector<double> api;
  std::size_t fits = 0, tries = 0;
  while (!checkOnly && variants.size() < ex.variants && tries++ < ex.variants * 20) {
    MappingVariant v = written;
    v.placement = MappingVariant::Placement::Balanced;
    v.pipelineIpus = pick(ex.pipelines);
    v.settings.shard = pick(ex.shards);
    int maxR = ex.podIpus / (v.pipelineIpus * v.settings.shard);
    v.settings.replicas = 1;
    for (int k = static_cast<int>(rng() % 7); k > 0 && v.settings.replicas * 2 <= maxR; --k) v.settings.replicas *= 2;
    v.settings.phases = pick(ex.phases);
    v.settings.recompute = static_cast<ipu::ir::Recompute>(rng() % 3);
    v.settings.optimizerStateStreaming = rng() % 2;
    v.settings.weightsStreaming = rng() % 4 == 0;
    v.settings.rtsWeights = rng() % 3 == 0;
    v.settings.rtsOptimizerState = rng() % 2;
    v.settings.availableMemoryProportion = {0.25};
    v.batch.microBatch = pick(ex.microBatches);
    auto t0 = Clock::now();
    ipu::session::PlannedVariant p = base.planVariant(v, 0, 0, ipu::session::Detail::Verdict);
    if (!p.ok) continue;  // e.g. a global batch the micro batch does not divide: not a valid variant
    ipu::cost::PhaseEstimate e = ipu::cost::estimatePhase(p.plan);
    api.push_back(usSince(t0));
    fits += p.plan.fits && e.ok;
    variants.push_back(v);
  }
  std::vector<double> scripts;
  for (std::size_t i = 0; i < std::min(apiOnly || checkOnly ? 0 : ex.scripts, variants.size()); ++i) {
    auto t0 = Clock::now();
    ipu::session::Session s;
    auto sf = s.addSource(path, writeVariant(text, variants[i]));
    const ipu::cost::Estimate* e = s.estimate(sf);
    scripts.push_back(usSince(t0));
    if (e == nullptr && i == 0) std::printf("  (a variant script did not estimate)\n");
  }
  std::vector<double> check;
  for (int rep = 0; rep < (apiOnly ? 0 : checkOnly ? 300 : 30); ++rep) {
    auto t0 = Clock::now();
    ipu::session::Session s;
    auto cf = s.addSource(path, text);
    s.check(cf);
    check.push_back(usSince(t0));
  }
  const double a = median(api), b = median(scripts);
  std::printf("%-24s %6zu variants (%zu fit)  in process %9.1f us   script per variant %9.1f us (%zu)   ratio %6.1fx\n",
              ex.file, variants.size(), fits, a, b, scripts.size(), a > 0 ? b / a : 0.0);
  std::printf("%-24s ipu check in a warm process: %.2f ms (median of %zu)\n", "", median(check) / 1000, check.size());
}

}  // namespace

int main(int argc, char** argv) {
  apiOnly = argc > 1 && std::string(argv[1]) == "--api-only";
  checkOnly = argc > 1 && std::string(argv[1]) == "--check-only";
  auto t0 = Clock::now();
  const ipu::check::Prelude& prelude = ipu::check::Prelude::get();
  std::printf("prelude (standard library parsed and evaluated once): %.1f ms\n\n", usSince(t0) / 1000);
  (void)prelude;
  run({"bert_large_pod64.ipu", {1, 2, 4, 8, 16}, {1, 2}, {1, 2}, {1, 2, 4}, 64, 2000, 100});
  run({"gpt3_175b_pod256.ipu", {4, 8, 16}, {4, 8}, {1, 16, 64}, {1, 2, 4}, 256, 300, 30});
  return 0;
}
