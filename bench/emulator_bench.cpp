// How fast the emulator trains (`ipu run`): the tiny BERT of
// examples/tiny_bert.ipu (2 layers, hidden 64, vocab 1000, sequences of 32)
// at a global batch of 16, for a fixed number of steps,
//
// - on 1 IPU in fp32, against PyTorch (Debian's python3-torch) training the
//   same model on the same batches on the same machine in the same run, with
//   the same number of host threads: the ratio of samples per second;
// - the cost of emulating a mapping: p = 4 pipeline stages x r = 2 replicas
//   against 1 IPU at the same global and micro batch;
// - the cost of emulating fp16: fp16 compute with fp32 partials and master
//   weights (Graphcore's mixed recipe), and all-fp16 with fp16 partials and
//   stochastic rounding, against fp32;
// - then examples/tiny_bert.ipu end to end (both phases) with its held-out
//   MLM accuracy.
//
// Timings exclude a few warm-up steps; the machine is shared, so compare the
// ratios printed within one run.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "interpreter/base/render.h"
#include "interpreter/session/session.h"
#include "runtime/emulator/data.h"
#include "runtime/emulator/emulator.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/emulator/trainer.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 5;
constexpr int kSteps = 45;   // timed: kSteps - kWarmup

std::string script(const std::string& mapping, const std::string& precision, int microBatch, int ga, int steps) {
  return "import \"std/pods\"\nimport \"std/models/bert\"\n"
         "chip bench_chip = GC200 with { tiles: 16, memory: 256 MB, code_base: 1 MB }\n"
         "machine bench_machine = M2000 with { chip: bench_chip, ipus: 8, streaming_memory: 1 GB }\n"
         "pod bench_pod { machine: bench_machine, machines: 1 }\n"
         "model tiny = bert(layers: 2, hidden: 64, heads: 2, ffn: 256, vocab: 1000, positions: 128)\n"
         "mapping m for tiny on bench_pod {\n" + mapping + "\n}\n"
         "precision p {\n" + precision + "\n}\n"
         "training t {\n mapping: m\n precision: p\n optimizer: adamw(weight_decay: 0.01)\n seed: 1\n"
         " phase one { seq_len: 32, masked_tokens: 5, micro_batch: " + std::to_string(microBatch) +
         ", gradient_accumulation: " + std::to_string(ga) + ", steps: " + std::to_string(steps) + ", lr: 0.001 }\n}\n";
}

ipu::ir::ExecutionPlan planOf(const std::string& text) {
  ipu::session::Session s;
  auto f = s.addSource("bench.ipu", text);
  const ipu::ir::ExecutionPlan* plan = s.plan(f);
  for (const auto& d : s.diagnostics().all())
    if (d.severity == ipu::base::Severity::Error) {
      std::fprintf(stderr, "%s", ipu::base::renderHuman(d, s.sources(), false).c_str());
      std::exit(1);
    }
  return *plan;
}

std::shared_ptr<const ipu::emu::TextCorpus> corpus() {
  static auto c = ipu::emu::loadCorpus(ipu::emu::defaultCorpusPath(), 1000);
  if (!c) {
    std::fprintf(stderr, "%s\n", c.error().message.c_str());
    std::exit(1);
  }
  return c.value();
}

std::unique_ptr<ipu::emu::PhaseTrainer> trainer(const ipu::ir::PhasePlan& phase, int threads) {
  ipu::emu::TrainerSettings ts;
  ts.seed = 1;
  ts.hostThreads = threads;
  ts.runName = "t";
  auto t = ipu::emu::PhaseTrainer::create(phase, ts, corpus());
  if (!t) {
    std::fprintf(stderr, "%s\n", t.error().message.c_str());
    std::exit(1);
  }
  return std::move(t.value());
}

double samplesPerSecond(const ipu::ir::PhasePlan& phase, int threads) {
  auto t = trainer(phase, threads);
  Clock::time_point start;
  for (int s = 0; s < kSteps; ++s) {
    if (s == kWarmup) start = Clock::now();
    auto r = t->step();
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error().message.c_str());
      std::exit(1);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(phase.batch.globalBatch) * (kSteps - kWarmup) / seconds;
}

ipu::emu::Mat row(const std::vector<int>& v) {
  ipu::emu::Mat m(1, static_cast<Eigen::Index>(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) m(0, static_cast<Eigen::Index>(i)) = static_cast<float>(v[i]);
  return m;
}

// The batches and initial weights of a phase, for the PyTorch side.
void exportFor(const ipu::ir::PhasePlan& phase, const std::string& dir) {
  auto t = trainer(phase, 1);
  ipu::emu::TensorFile w;
  w.tensors = t->weights();
  ipu::emu::writeTensorFile(dir + "/weights.ipt", w);
  ipu::emu::TensorFile b;
  b.set("steps", std::to_string(kSteps));
  b.set("warmup", std::to_string(kWarmup));
  b.set("heads", "2");
  b.set("layers", "2");
  b.set("weights", dir + "/weights.ipt");
  int k = 0;
  for (int s = 0; s < kSteps; ++s)
    for (const auto& mb : t->batches(s)) {
      const std::string p = "mb" + std::to_string(k++) + ".";
      b.set(p + "samples", std::to_string(mb.samples));
      b.set(p + "seq", std::to_string(mb.seq));
      b.set(p + "mlm_count", std::to_string(mb.mlmCount));
      b.set(p + "class_count", std::to_string(mb.classCount));
      b.tensors.emplace_back(p + "tokens", row(mb.tokens));
      b.tensors.emplace_back(p + "segments", row(mb.segments));
      b.tensors.emplace_back(p + "positions", row(mb.positions));
      b.tensors.emplace_back(p + "sequence_ids", row(mb.sequenceIds));
      b.tensors.emplace_back(p + "masked_row", row(mb.maskedRow));
      b.tensors.emplace_back(p + "masked_label", row(mb.maskedLabel));
      b.tensors.emplace_back(p + "classified_row", row(mb.classifiedRow));
      b.tensors.emplace_back(p + "class_label", row(mb.classLabel));
    }
  b.set("micro_batches", std::to_string(k));
  ipu::emu::writeTensorFile(dir + "/batches.ipt", b);
}

double torchSamplesPerSecond(const std::string& dir, int threads) {
  const std::string cmd = std::string(IPU_PYTHON) + " " + IPU_SOURCE_DIR + "/bench/torch_tiny_bert.py " + dir + "/batches.ipt " +
                          std::to_string(threads) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  char buf[512];
  std::string out;
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int rc = pclose(p);
  double v = 0;
  const auto at = out.find("samples_per_second ");
  if (rc != 0 || at == std::string::npos) {
    std::fprintf(stderr, "  PyTorch run failed (is python3-torch installed?):\n%s\n", out.c_str());
    return 0;
  }
  std::sscanf(out.c_str() + at, "samples_per_second %lf", &v);
  return v;
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const std::string fp32 = "compute: fp32";
  const std::string mixed = "compute: fp16\n weights: fp16\n master_weights: fp32\n partials: fp32\n accumulators: fp32\n loss_scale: 1024";
  const std::string sr = "compute: fp16\n weights: fp16\n partials: fp16\n accumulators: fp16\n stochastic_rounding: on\n loss_scale: 256";
  const std::string p4r2 = "pipeline {\n ipu 0: embedding\n ipu 1: encoder[0]\n ipu 2: encoder[1]\n ipu 3: mlm_head, nsp_head\n }\n replicas: 2";

  std::printf("ipu run: tiny BERT (2 layers, hidden 64, vocab 1000, seq 32), global batch 16, AdamW;\n"
              "samples/s over %d steps after %d warm-up steps\n\n", kSteps - kWarmup, kWarmup);
  const auto base = planOf(script("", fp32, 16, 1, 100)).runs[0].phases[0];
  const fs::path dir = fs::temp_directory_path() / ("ipu_emulator_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  exportFor(base, dir.string());
  std::printf("1 IPU, fp32, micro batch 16          emulator   PyTorch (CPU)   ratio\n");
  for (int threads : {1, 2}) {
    const double emu = samplesPerSecond(base, threads);
    const double torch = torchSamplesPerSecond(dir.string(), threads);
    std::printf("  %d host thread%s                     %8.1f   %8.1f        %5.2fx\n", threads, threads == 1 ? " " : "s", emu, torch,
                torch > 0 ? emu / torch : 0.0);
  }
  fs::remove_all(dir);

  std::printf("\ncost of emulating the mapping (same global batch 16, micro batch 4)\n");
  const auto onePlan = planOf(script("", fp32, 4, 4, 100)).runs[0].phases[0];
  const auto mappedPlan = planOf(script(p4r2, fp32, 4, 2, 100)).runs[0].phases[0];
  for (int threads : {1, 2}) {
    const double one = samplesPerSecond(onePlan, threads);
    const double mapped = samplesPerSecond(mappedPlan, threads);
    std::printf("  %d host thread%s: 1 IPU, GA 4 %8.1f samples/s; p = 4 x r = 2, GA 2 %8.1f samples/s (%.2fx the time of 1 IPU)\n",
                threads, threads == 1 ? " " : "s", one, mapped, one / mapped);
  }

  std::printf("\ncost of emulating fp16 (1 IPU, micro batch 16, 2 host threads)\n");
  const double f32 = samplesPerSecond(base, 2);
  const double f16 = samplesPerSecond(planOf(script("", mixed, 16, 1, 100)).runs[0].phases[0], 2);
  const double f16sr = samplesPerSecond(planOf(script("", sr, 16, 1, 100)).runs[0].phases[0], 2);
  std::printf("  fp32                                         %8.1f samples/s\n", f32);
  std::printf("  fp16 compute, fp32 partials and master       %8.1f samples/s   (%.2fx the time of fp32)\n", f16, f32 / f16);
  std::printf("  fp16 everywhere, fp16 partials, stochastic   %8.1f samples/s   (%.2fx the time of fp32)\n", f16sr, f32 / f16sr);

  std::printf("\nexamples/tiny_bert.ipu end to end (2 phases, 300 steps, p = 2 x r = 2, 2 host threads)\n");
  std::ifstream in(std::string(IPU_SOURCE_DIR) + "/examples/tiny_bert.ipu");
  std::stringstream text;
  text << in.rdbuf();
  ipu::session::Session s;
  auto f = s.addSource(std::string(IPU_SOURCE_DIR) + "/examples/tiny_bert.ipu", text.str());
  const auto* plan = s.plan(f);
  if (plan == nullptr || plan->runs.empty()) return 1;
  ipu::emu::Options o;
  o.hostThreads = 2;
  const auto t0 = Clock::now();
  auto out = ipu::emu::run(plan->runs[0], o);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!out) {
    std::fprintf(stderr, "%s\n", out.error().message.c_str());
    return 1;
  }
  for (const auto& ph : out->phases)
    std::printf("  phase %-6s %4lld steps, last loss %.3f, held-out MLM accuracy %.3f (majority baseline %.3f), NSP %.3f\n",
                ph.name.c_str(), ph.steps, ph.lastLoss, ph.evaluation.at("mlm_accuracy"), ph.evaluation.at("mlm_baseline"),
                ph.evaluation.at("nsp_accuracy"));
  std::printf("  %.1f s in all\n", seconds);
  return 0;
}
