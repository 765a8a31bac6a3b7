// How long `ipu estimate` takes: the cost model alone on each example's plan,
// each example end to end (parse, check, plan, estimate), and a sweep of 1,000
// BERT-Large mappings on a POD64 (pipeline depth, replicas, micro batch,
// recomputation, offload, replicated tensor sharding at a fixed global batch),
// each checked, planned and estimated from its script text, as a mapping
// search would. Timings are medians on a shared machine; compare ratios.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "interpreter/session/session.h"
#include "runtime/cost/cost_model.h"

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Variant {
  int p = 1, r = 1, microBatch = 1;
  bool recompute = false, offload = false, rts = false;
  std::string describe() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "p=%d r=%d mb=%d%s%s%s", p, r, microBatch, recompute ? " recompute" : "",
                  offload ? " offload" : "", rts ? " rts" : "");
    return buf;
  }
  std::string script() const {
    std::string m = "mapping m for bert_large on POD64 {\n  pipeline: balanced(" + std::to_string(p) +
                    ")\n  replicas: " + std::to_string(r) + "\n";
    if (recompute) m += "  recompute: every_layer\n";
    if (offload) m += "  optimizer_state: streaming\n";
    if (rts) m += "  replicated_tensor_sharding: optimizer_state\n";
    m += "}\n";
    return "import \"std/pods\"\nimport \"std/models/bert\"\nimport \"std/precision\"\n" + m +
           "training t {\n  mapping: m\n  precision: fp16_sr\n  optimizer: lamb(weight_decay: 0.01)\n"
           "  phase one { seq_len: 128; masked_tokens: 20; micro_batch: " + std::to_string(microBatch) +
           "; global_batch: 65536; steps: 7038; lr: 0.006 warmup 2000 steps then linear to 0 }\n}\n";
  }
};

std::vector<Variant> sweep(std::size_t count) {
  std::vector<Variant> out;
  for (int mb : {1, 2, 4, 8, 16, 32, 64})
    for (int p : {1, 2, 4, 8, 16})
      for (int r = 1; p * r <= 64; r *= 2)
        for (int flags = 0; flags < 8; ++flags) {
          Variant v;
          v.p = p;
          v.r = r;
          v.microBatch = mb;
          v.recompute = flags & 1;
          v.offload = flags & 2;
          v.rts = flags & 4;
          if (v.rts && r == 1) continue;  // nothing to shard over
          out.push_back(v);
        }
  // Spread the sample over the whole space rather than its first corner.
  std::vector<Variant> picked;
  const double stride = static_cast<double>(out.size()) / static_cast<double>(count);
  for (std::size_t i = 0; i < count; ++i) picked.push_back(out[static_cast<std::size_t>(static_cast<double>(i) * stride) % out.size()]);
  return picked;
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const fs::path root = IPU_SOURCE_DIR;
  std::vector<fs::path> examples;
  for (const auto& e : fs::directory_iterator(root / "examples"))
    if (e.path().extension() == ".ipu") examples.push_back(e.path());
  std::sort(examples.begin(), examples.end());

  std::printf("ipu estimate: per example, median of 15 runs\n");
  std::printf("  %-28s %8s %12s %14s\n", "example", "phases", "cost model", "end to end");
  for (const auto& path : examples) {
    const std::string text = read(path);
    std::vector<double> model, total;
    std::size_t phases = 0;
    bool ok = true;
    for (int rep = 0; rep < 15; ++rep) {
      auto t0 = Clock::now();
      ipu::session::Session s;
      auto f = s.addSource(path.string(), text);
      const ipu::ir::ExecutionPlan* plan = s.plan(f, true);
      if (plan == nullptr) {
        ok = false;
        break;
      }
      auto t1 = Clock::now();
      ipu::cost::Estimate e = ipu::cost::estimate(*plan);
      model.push_back(msSince(t1));
      total.push_back(msSince(t0));
      phases = 0;
      for (const auto& r : e.runs) phases += r.phases.size();
    }
    if (!ok) {
      std::printf("  %-28s (did not plan)\n", path.filename().c_str());
      continue;
    }
    std::printf("  %-28s %8zu %9.3f ms %11.2f ms\n", path.filename().c_str(), phases, median(model), median(total));
  }

  const std::size_t count = 1000;
  std::vector<Variant> variants = sweep(count);
  std::printf("\nsweep: %zu BERT-Large mappings on POD64 at a global batch of 65,536, each from its script text\n", count);
  std::vector<double> each;
  std::size_t fitting = 0, failed = 0;
  double best = 0;
  std::string bestName;
  auto t0 = Clock::now();
  for (std::size_t i = 0; i < variants.size(); ++i) {
    auto t1 = Clock::now();
    ipu::session::Session s;
    auto f = s.addSource("variant.ipu", variants[i].script());
    const ipu::cost::Estimate* e = s.estimate(f);
    each.push_back(msSince(t1));
    if (e == nullptr || e->runs.empty() || e->runs[0].phases.empty() || !e->runs[0].phases[0].ok) {
      ++failed;
      continue;
    }
    const auto& ph = e->runs[0].phases[0];
    if (ph.fits) {
      ++fitting;
      if (ph.samplesPerSecond > best) {
        best = ph.samplesPerSecond;
        bestName = variants[i].describe();
      }
    }
    if ((i + 1) % 250 == 0) std::fprintf(stderr, "  ... %zu of %zu\n", i + 1, variants.size());
  }
  const double totalMs = msSince(t0);
  std::printf("  total %.2f s, %.2f ms per mapping (median %.2f ms)\n", totalMs / 1000, totalMs / static_cast<double>(count),
              median(each));
  std::printf("  %zu fit in memory, %zu could not be planned or estimated (batch arithmetic)\n", fitting, failed);
  if (!bestName.empty()) std::printf("  fastest that fits: %s, %.0f samples/s\n", bestName.c_str(), best);
  return 0;
}
