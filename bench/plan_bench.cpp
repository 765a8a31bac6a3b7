// How long `ipu plan` takes: each example end to end (parse, check, plan), and
// how planning grows with a model's depth (GPT-style models of 12 to 1,536
// layers, placed by balanced(8)). Timings are medians of repeated runs on a
// shared machine; compare the ratios printed within one run, not absolute
// numbers across machines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "interpreter/session/session.h"

namespace {

using Clock = std::chrono::steady_clock;

double planOnce(const std::string& name, const std::string& text, bool* ok = nullptr) {
  auto t0 = Clock::now();
  ipu::session::Session s;
  auto f = s.addSource(name, text);
  const auto* plan = s.plan(f);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (ok != nullptr) *ok = plan != nullptr && !plan->runs.empty();
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double timed(const std::string& name, const std::string& text, int reps, bool* ok = nullptr) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(planOnce(name, text, ok));
  return median(t);
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string gptScript(int layers) {
  return "import \"std/pods\"\nimport \"std/models/gpt\"\nimport \"std/precision\"\n"
         "model deep = gpt(layers: " + std::to_string(layers) + ", hidden: 256, heads: 4)\n"
         "mapping m for deep on POD64 { pipeline: balanced(8), replicas: 8, recompute: every_layer, "
         "optimizer_state: streaming, phases: 16 }\n"
         "training t { mapping: m, precision: fp16_sr, optimizer: adamw()\n"
         "  phase p { seq_len: 1024, micro_batch: 1, global_batch: 512, steps: 1000, lr: 0.0001 } }\n";
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const fs::path root = IPU_SOURCE_DIR;
  std::printf("ipu plan: end-to-end time per example (parse + check + plan), median of 9 runs\n");
  std::vector<fs::path> examples;
  for (const auto& e : fs::directory_iterator(root / "examples"))
    if (e.path().extension() == ".ipu") examples.push_back(e.path());
  std::sort(examples.begin(), examples.end());
  for (const auto& p : examples) {
    bool ok = false;
    double ms = timed(p.string(), read(p), 9, &ok);
    std::printf("  %-32s %8.2f ms%s\n", p.filename().c_str(), ms, ok ? "" : "  (did not plan)");
  }

  std::printf("\ngrowth with depth: GPT models (hidden 256), balanced(8) over POD64, 16 phases, median of 5 runs\n");
  std::printf("  %8s %8s %10s %12s %s\n", "layers", "leaves", "ms", "us/leaf", "ratio to previous (x2 leaves)");
  double previous = 0;
  for (int layers : {12, 24, 48, 96, 192, 384, 768, 1536}) {
    bool ok = false;
    double ms = timed("gpt" + std::to_string(layers) + ".ipu", gptScript(layers), 5, &ok);
    int leaves = 2 * layers + 2;
    std::printf("  %8d %8d %10.2f %12.2f", layers, leaves, ms, 1000 * ms / leaves);
    if (previous > 0) std::printf("   %.2f", ms / previous);
    std::printf("%s\n", ok ? "" : "  (did not plan)");
    previous = ms;
  }
  std::printf("\nLinear growth doubles the time when the depth doubles (ratio 2.0).\n");

  // A mapping that does not fit makes the planner measure its levers: each is
  // a full re-plan of the phase.
  std::string resident = "import \"" + (root / "examples/gpt3_175b_pod256.ipu").string() +
                         "\" as g\ntraining t = g.gpt3 with { mapping: g.gpt3_resident }\nrun t\n";
  std::printf("\nGPT-3 175B without phased execution (does not fit; levers measured): %.2f ms\n",
              timed("resident.ipu", resident, 5));
  return 0;
}
