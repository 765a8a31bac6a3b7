// How fast the emulator trains (`ipu run`), against PyTorch and against the
// machine's own limit, in one run:
//
// - the machine's practical limit: a large single-precision matrix product
//   (2048^3) with the best library available here, Eigen as this build
//   compiles it or OpenBLAS (Debian's libopenblas0-pthread), on one core and
//   on all cores;
// - a tiny BERT (vocabulary 1,000, sequences of 32, global batch 16, AdamW,
//   fp32) at hidden 64, 128, 256 and 512 with 2 and 8 layers, on 1 IPU, with
//   1 host thread and with all of them, against PyTorch (Debian's
//   python3-torch) training the same model on the same batches with the same
//   number of threads and OpenBLAS. The benchmark installs OpenBLAS when it
//   is missing and points PyTorch at it (and, for the reference figure, at
//   the netlib reference BLAS) through LD_LIBRARY_PATH of the PyTorch
//   process, whatever the system's libblas.so.3 alternative selects; PyTorch
//   reports which library its products resolve to. Each side is measured
//   twice, in turns, and the better figure of each kept. The emulator's
//   GFLOP/s come from the plan's FLOP counts, and are set against the limit
//   measured again in the same turns (a shared host's load changes over a
//   run: the limit from its start made the ratio a matter of timing);
// - the cost of emulating a mapping (p = 4 stages x r = 2 replicas against
//   1 IPU at the same global and micro batch);
// - the cost of emulating fp16 (fp16 compute with fp32 partials and master
//   weights; fp16 with stochastic rounding; all fp16 with fp16 partials and
//   stochastic rounding) against fp32, at every hidden size, the four
//   configurations measured in turns (a step of each per round);
// - the product kernels with fp16 partials (AVX-512, AVX2, portable: those
//   the host runs) on one thread against Eigen's fp32 product;
// - examples/tiny_bert.ipu end to end with its held-out MLM accuracy.
//
// Each figure is measured for at least kSeconds after warm-up steps; the
// machine may be shared, so compare the ratios printed within one run.
// Arguments name the sections to run (sizes, reference, mapping, fp16,
// kernels, example; the machine limit always runs); none runs them all.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

#include "interpreter/base/render.h"
#include "interpreter/session/session.h"
#include "runtime/emulator/data.h"
#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/emulator.h"
#include "runtime/emulator/fp16.h"
#include "runtime/emulator/fp16_product.h"
#include "runtime/emulator/numerics.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/base/thread_pool.h"
#include "runtime/emulator/trainer.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 2;
constexpr double kSeconds = 2.5;     // timed, per figure
constexpr int kExportSteps = 6;      // batches handed to PyTorch (it cycles through them)
constexpr int kRounds = 2;           // measurements of each side of the emulator-PyTorch comparison

const std::string kLibDir = IPU_MULTIARCH_LIBDIR;                 // /usr/lib/x86_64-linux-gnu
const std::string kOpenBlasDir = kLibDir + "/openblas-pthread";   // libopenblas0-pthread
const std::string kReferenceBlasDir = kLibDir + "/blas:" + kLibDir + "/lapack";   // libblas3, liblapack3

struct Size {
  int hidden, layers;
  int heads() const { return std::max(2, hidden / 64); }
};

std::string script(const Size& z, const std::string& mapping, const std::string& precision, int microBatch, int ga) {
  return "import \"std/pods\"\nimport \"std/models/bert\"\n"
         "chip bench_chip = GC200 with { tiles: 16, memory: 2048 MB, code_base: 1 MB }\n"
         "machine bench_machine = M2000 with { chip: bench_chip, ipus: 8, streaming_memory: 8 GB }\n"
         "pod bench_pod { machine: bench_machine, machines: 1 }\n"
         "model tiny = bert(layers: " + std::to_string(z.layers) + ", hidden: " + std::to_string(z.hidden) +
         ", heads: " + std::to_string(z.heads()) + ", ffn: " + std::to_string(4 * z.hidden) + ", vocab: 1000, positions: 128)\n"
         "mapping m for tiny on bench_pod {\n" + mapping + "\n}\n"
         "precision p {\n" + precision + "\n}\n"
         "training t {\n mapping: m\n precision: p\n optimizer: adamw(weight_decay: 0.01)\n seed: 1\n"
         " phase one { seq_len: 32, masked_tokens: 5, micro_batch: " + std::to_string(microBatch) +
         ", gradient_accumulation: " + std::to_string(ga) + ", steps: 1000, lr: 0.001 }\n}\n";
}

ipu::ir::PhasePlan planOf(const std::string& text) {
  ipu::session::Session s;
  auto f = s.addSource("bench.ipu", text);
  const ipu::ir::ExecutionPlan* plan = s.plan(f);
  for (const auto& d : s.diagnostics().all())
    if (d.severity == ipu::base::Severity::Error) {
      std::fprintf(stderr, "%s", ipu::base::renderHuman(d, s.sources(), false).c_str());
      std::exit(1);
    }
  return plan->runs[0].phases[0];
}

// FLOP of one optimizer step, from the plan: every layer's forward and
// backward FLOP per micro batch, times the micro batches of a step.
double stepFlops(const ipu::ir::PhasePlan& phase) {
  double perMicroBatch = 0;
  for (const auto& l : phase.layers) perMicroBatch += l.forward.total() + l.backward.total();
  return perMicroBatch * static_cast<double>(phase.batch.globalBatch) / static_cast<double>(phase.batch.microBatch);
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

// Samples per second of the emulator, over at least kSeconds after kWarmup steps.
double samplesPerSecond(const ipu::ir::PhasePlan& phase, int threads) {
  auto t = trainer(phase, threads);
  auto step = [&] {
    auto r = t->step();
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error().message.c_str());
      std::exit(1);
    }
  };
  for (int s = 0; s < kWarmup; ++s) step();
  const auto start = Clock::now();
  int steps = 0;
  double seconds = 0;
  while (steps < 3 || seconds < kSeconds) {
    step();
    ++steps;
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return static_cast<double>(phase.batch.globalBatch) * steps / seconds;
}

// Samples per second of several configurations measured in turns (one
// step of each per round, after kWarmup steps each, until every one has run
// for kSeconds): on a shared machine, a change of load then weighs on all of
// them alike, so their ratios hold even when the absolute figures drift.
std::vector<double> interleavedSamplesPerSecond(const std::vector<ipu::ir::PhasePlan>& phases, int threads) {
  std::vector<std::unique_ptr<ipu::emu::PhaseTrainer>> trainers;
  for (const auto& phase : phases) trainers.push_back(trainer(phase, threads));
  auto step = [&](std::size_t i) {
    auto r = trainers[i]->step();
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error().message.c_str());
      std::exit(1);
    }
  };
  for (std::size_t i = 0; i < trainers.size(); ++i)
    for (int s = 0; s < kWarmup; ++s) step(i);
  std::vector<double> seconds(trainers.size(), 0.0);
  std::vector<int> steps(trainers.size(), 0);
  while (*std::min_element(seconds.begin(), seconds.end()) < kSeconds || *std::min_element(steps.begin(), steps.end()) < 3)
    for (std::size_t i = 0; i < trainers.size(); ++i) {
      const auto start = Clock::now();
      step(i);
      seconds[i] += std::chrono::duration<double>(Clock::now() - start).count();
      ++steps[i];
    }
  std::vector<double> rates;
  for (std::size_t i = 0; i < trainers.size(); ++i)
    rates.push_back(static_cast<double>(phases[i].batch.globalBatch) * steps[i] / seconds[i]);
  return rates;
}

ipu::emu::Mat row(const std::vector<int>& v) {
  ipu::emu::Mat m(1, static_cast<Eigen::Index>(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) m(0, static_cast<Eigen::Index>(i)) = static_cast<float>(v[i]);
  return m;
}

// The batches and initial weights of a phase, for the PyTorch side.
void exportFor(const ipu::ir::PhasePlan& phase, const Size& z, const std::string& dir) {
  auto t = trainer(phase, 1);
  ipu::emu::TensorFile w;
  w.tensors = t->weights();
  ipu::emu::writeTensorFile(dir + "/weights.ipt", w);
  ipu::emu::TensorFile b;
  b.set("steps", std::to_string(kExportSteps));
  b.set("heads", std::to_string(z.heads()));
  b.set("layers", std::to_string(z.layers));
  b.set("weights", dir + "/weights.ipt");
  int k = 0;
  for (int s = 0; s < kExportSteps; ++s)
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

struct TorchResult {
  double samplesPerSecond = 0;
  std::string blas, version;
};

// PyTorch on the BLAS in `libraryPath`, with `threads` threads (its own and
// OpenBLAS's). Its OpenMP threads wait passively (OMP_WAIT_POLICY): with
// GNU OpenMP's default busy-waiting, two threads on a host that other
// processes also use ran up to 30 times slower than one (docs/benchmarks.md).
TorchResult torchRun(const std::string& dir, int threads, const std::string& libraryPath) {
  const std::string t = std::to_string(threads);
  const std::string cmd = "env LD_LIBRARY_PATH=" + libraryPath + " OPENBLAS_NUM_THREADS=" + t + " OMP_NUM_THREADS=" + t +
                          " OMP_WAIT_POLICY=PASSIVE " +
                          IPU_PYTHON + " " + IPU_SOURCE_DIR + "/bench/torch_tiny_bert.py " + dir + "/batches.ipt " + t + " " +
                          std::to_string(kSeconds) + " 2>&1";
  TorchResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[1024];
  std::string out;
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int rc = pclose(p);
  const auto at = out.find("samples_per_second ");
  if (rc != 0 || at == std::string::npos) {
    std::fprintf(stderr, "  PyTorch run failed (is python3-torch installed?):\n%s\n", out.c_str());
    return r;
  }
  std::sscanf(out.c_str() + at, "samples_per_second %lf", &r.samplesPerSecond);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("blas ", 0) == 0) r.blas = line.substr(5);
    if (line.rfind("torch ", 0) == 0) r.version = line.substr(6);
  }
  return r;
}

// OpenBLAS from Debian, installed when missing. Installing it makes Debian
// select it as the system's libblas.so.3 (its alternative has the higher
// priority); the benchmark itself never relies on that alternative.
bool ensureOpenBlas() {
  if (fs::exists(kOpenBlasDir + "/libblas.so.3")) return true;
  std::printf("OpenBLAS is not installed: installing Debian's libopenblas0-pthread\n");
  const std::string apt = "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libopenblas0-pthread";
  const std::string cmd = (::geteuid() == 0 ? "" : "sudo -n ") + apt + " >/dev/null";
  if (std::system(cmd.c_str()) != 0 || !fs::exists(kOpenBlasDir + "/libblas.so.3")) {
    std::printf("  could not install it (run as root: apt-get install libopenblas0-pthread); no OpenBLAS figures\n");
    return false;
  }
  return true;
}

// ----------------------------------------------------------- machine limit

template <class F>
double bestGflops(F product, double flops) {
  product();  // warm-up
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = Clock::now();
    product();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return flops / best / 1e9;
}

// The machine's practical limit: a 2048^3 single-precision product with
// Eigen as this build compiles it (over all cores as the emulator runs it:
// row blocks on its thread pool) and with OpenBLAS when it is here, GFLOP/s,
// the best of 3.
class LimitMeter {
 public:
  enum class Library { Eigen, OpenBlas };

  LimitMeter(int cores, bool haveOpenBlas) : pool_(cores), a_(Mat::Random(kN, kN)), b_(Mat::Random(kN, kN)), c_(kN, kN) {
    if (!haveOpenBlas) return;
    void* lib = ::dlopen((kOpenBlasDir + "/libopenblas.so.0").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    gemm_ = reinterpret_cast<Gemm>(::dlsym(lib, "cblas_sgemm"));
    setThreads_ = reinterpret_cast<void (*)(int)>(::dlsym(lib, "openblas_set_num_threads"));
    auto config = reinterpret_cast<char* (*)()>(::dlsym(lib, "openblas_get_config"));
    auto core = reinterpret_cast<char* (*)()>(::dlsym(lib, "openblas_get_corename"));
    if (config != nullptr && core != nullptr) openblas = std::string(config()) + "; kernels " + core();
  }

  bool hasOpenBlas() const { return gemm_ != nullptr && setThreads_ != nullptr; }

  double measure(Library library, int threads) {
    const double flops = 2.0 * kN * kN * kN;
    if (library == Library::OpenBlas) {
      if (!hasOpenBlas()) return 0;
      constexpr int kRowMajor = 101, kNoTrans = 111;
      setThreads_(threads);
      return bestGflops([&] { gemm_(kRowMajor, kNoTrans, kNoTrans, kN, kN, kN, 1.0f, a_.data(), kN, b_.data(), kN, 0.0f, c_.data(), kN); },
                        flops);
    }
    if (threads == 1) return bestGflops([&] { c_.noalias() = a_ * b_; }, flops);
    ipu::emu::Numerics nx(false, false, false, 0, &pool_);
    return bestGflops([&] { c_ = nx.mm(a_, b_); }, flops);
  }

  std::string openblas;   // its configuration and kernels

 private:
  using Mat = ipu::emu::Mat;
  using Gemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
  static constexpr int kN = 2048;
  ipu::ThreadPool pool_;
  Mat a_, b_, c_;
  Gemm gemm_ = nullptr;
  void (*setThreads_)(int) = nullptr;
};

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

}  // namespace

int main(int argc, char** argv) {
  auto wanted = [&](const char* section) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == section) return true;
    return false;
  };
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<int> threadCounts = cores > 1 ? std::vector<int>{1, cores} : std::vector<int>{1};
  std::printf("host: %s, %d hardware threads; Eigen %d.%d.%d with %s\n", cpuModel().c_str(), cores, EIGEN_WORLD_VERSION,
              EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse());
  const bool haveOpenBlas = ensureOpenBlas();

  std::printf("\nmachine limit: single-precision matrix product 2048 x 2048 x 2048, GFLOP/s (best of 3)\n");
  LimitMeter meter(cores, haveOpenBlas);
  using Library = LimitMeter::Library;
  const double eigenOne = meter.measure(Library::Eigen, 1), eigenAll = meter.measure(Library::Eigen, cores);
  const double openblasOne = meter.measure(Library::OpenBlas, 1), openblasAll = meter.measure(Library::OpenBlas, cores);
  std::printf("  Eigen (this build)      1 core %7.1f   %d cores %7.1f\n", eigenOne, cores, eigenAll);
  if (meter.hasOpenBlas())
    std::printf("  OpenBLAS                1 core %7.1f   %d cores %7.1f   (%s)\n", openblasOne, cores, openblasAll, meter.openblas.c_str());
  std::printf("  limit                   1 core %7.1f   %d cores %7.1f\n", std::max(eigenOne, openblasOne), cores,
              std::max(eigenAll, openblasAll));
  // The library that sets the limit, per thread count: the comparison with
  // PyTorch measures it again in turns with both sides.
  auto limitLibrary = [&](int threads) {
    return (threads == 1 ? openblasOne > eigenOne : openblasAll > eigenAll) ? Library::OpenBlas : Library::Eigen;
  };

  const std::string fp32 = "compute: fp32";
  const fs::path dir = fs::temp_directory_path() / ("ipu_emulator_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::vector<Size> sizes{{64, 2}, {64, 8}, {128, 2}, {128, 8}, {256, 2}, {256, 8}, {512, 2}, {512, 8}};

  if (wanted("sizes")) {
  std::printf("\ntiny BERT on 1 IPU, fp32, global batch 16 (micro batch 16), seq 32, vocab 1000, AdamW: samples/s\n"
              "(each side the better of %d measurements taken in turns)\n", kRounds);
  bool printedBlas = false;
  std::printf("(the limit measured again in the same turns, the better of %d)\n", kRounds);
  std::printf("  hidden layers threads   emulator  PyTorch+OpenBLAS   ratio   emulator GFLOP/s   limit GFLOP/s   of the limit\n");
  for (const Size& z : sizes) {
    const auto phase = planOf(script(z, "", fp32, 16, 1));
    exportFor(phase, z, dir.string());
    const double flops = stepFlops(phase);
    for (int threads : threadCounts) {
      // Each side measured kRounds times in turns (emulator, PyTorch,
      // emulator, ...), the better of each kept: a change of the shared
      // host's load during one measurement weighs on neither side's figure.
      double emu = 0, lim = 0;
      TorchResult torch;
      for (int round = 0; round < kRounds; ++round) {
        emu = std::max(emu, samplesPerSecond(phase, threads));
        lim = std::max(lim, meter.measure(limitLibrary(threads), threads));
        if (!haveOpenBlas) continue;
        TorchResult t = torchRun(dir.string(), threads, kOpenBlasDir);
        if (t.samplesPerSecond > torch.samplesPerSecond) torch = std::move(t);
      }
      if (!printedBlas && !torch.blas.empty()) {
        std::printf("  (PyTorch %s; its BLAS: %s)\n", torch.version.c_str(), torch.blas.c_str());
        printedBlas = true;
      }
      const double gflops = emu / 16.0 * flops / 1e9;
      std::printf("  %6d %6d %7d %10.1f %17.1f %7.2fx %18.1f %15.1f %13.0f%%\n", z.hidden, z.layers, threads, emu, torch.samplesPerSecond,
                  torch.samplesPerSecond > 0 ? emu / torch.samplesPerSecond : 0.0, gflops, lim, lim > 0 ? 100.0 * gflops / lim : 0.0);
      std::fflush(stdout);
    }
  }
  }

  if (wanted("reference")) {
  std::printf("\nfor continuity: PyTorch with the reference BLAS (netlib), hidden 64, 2 layers\n");
  {
    const Size z{64, 2};
    const auto phase = planOf(script(z, "", fp32, 16, 1));
    exportFor(phase, z, dir.string());
    for (int threads : threadCounts) {
      const double emu = samplesPerSecond(phase, threads);
      const TorchResult torch = torchRun(dir.string(), threads, kReferenceBlasDir);
      std::printf("  %d thread%s: emulator %8.1f, PyTorch %8.1f samples/s (%.2fx); PyTorch's BLAS: %s\n", threads,
                  threads == 1 ? " " : "s", emu, torch.samplesPerSecond, torch.samplesPerSecond > 0 ? emu / torch.samplesPerSecond : 0.0,
                  torch.blas.c_str());
    }
  }
  }
  fs::remove_all(dir);

  if (wanted("mapping")) {
  std::printf("\ncost of emulating a mapping (hidden 64, 2 layers; global batch 16, micro batch 4)\n");
  {
    const Size z{64, 2};
    const std::string p4r2 = "pipeline {\n ipu 0: embedding\n ipu 1: encoder[0]\n ipu 2: encoder[1]\n ipu 3: mlm_head, nsp_head\n }\n replicas: 2";
    const auto onePlan = planOf(script(z, "", fp32, 4, 4));
    const auto mappedPlan = planOf(script(z, p4r2, fp32, 4, 2));
    for (int threads : threadCounts) {
      const double one = samplesPerSecond(onePlan, threads);
      const double mapped = samplesPerSecond(mappedPlan, threads);
      std::printf("  %d host thread%s: 1 IPU, GA 4 %8.1f samples/s; p = 4 x r = 2, GA 2 %8.1f samples/s (%.2fx the time of 1 IPU)\n",
                  threads, threads == 1 ? " " : "s", one, mapped, one / mapped);
    }
  }
  }

  if (wanted("fp16")) {
  std::printf("\ncost of emulating fp16 (1 IPU, micro batch 16, %d host threads): time per step / fp32's\n"
              "(the four configurations of a size measured in turns, a step each)\n", cores);
  {
    const std::string mixed = "compute: fp16\n weights: fp16\n master_weights: fp32\n partials: fp32\n accumulators: fp32\n loss_scale: 1024";
    const std::string srOnly = "compute: fp16\n weights: fp16\n partials: fp32\n accumulators: fp16\n stochastic_rounding: on\n loss_scale: 256";
    const std::string sr = "compute: fp16\n weights: fp16\n partials: fp16\n accumulators: fp16\n stochastic_rounding: on\n loss_scale: 256";
    std::printf("  A: fp16 compute and weights, fp32 partials and master weights, loss scale 1024 (round to nearest)\n"
                "  B: fp16 compute, weights and accumulators, fp32 partials, stochastic rounding, loss scale 256\n"
                "  C: as B with fp16 partials (a rounding per 16-deep block of every matrix product)\n");
    std::printf("  hidden layers   fp32 samples/s      A samples/s (time)      B samples/s (time)      C samples/s (time)\n");
    for (int hidden : {64, 128, 256, 512})
      for (int layers : {2, 8}) {
        const Size z{hidden, layers};
        const auto rates = interleavedSamplesPerSecond({planOf(script(z, "", fp32, 16, 1)), planOf(script(z, "", mixed, 16, 1)),
                                                        planOf(script(z, "", srOnly, 16, 1)), planOf(script(z, "", sr, 16, 1))},
                                                       cores);
        const double f32 = rates[0], a = rates[1], b = rates[2], c = rates[3];
        std::printf("  %6d %6d %16.1f %14.1f (%.2fx) %15.1f (%.2fx) %15.1f (%.2fx)\n", hidden, layers, f32, a, f32 / a, b, f32 / b, c,
                    f32 / c);
        std::fflush(stdout);
      }
  }
  }

  if (wanted("kernels")) {
  // One product with fp16 partials and stochastic rounding per kernel the
  // host runs (fp16_product.h), on one thread, against Eigen's fp32 product
  // of the same shape; measured in turns, the best of 5 rounds each.
  std::printf("\nfp16 partials product kernels, stochastic rounding, 1 thread: time per product / Eigen fp32's\n");
  // The three products of a layer's training step: forward (x W), data
  // gradient (dy W^T: op(B) transposed) and weight gradient (x^T dy: op(A)
  // transposed); each operand is stored as the trainer stores it.
  struct Shape {
    int rows, depth, cols;
    bool ta, tb;
    const char* what;
  };
  ipu::emu::Stream rng(3);
  for (const Shape& z : {Shape{512, 256, 1024, false, false, "feed-forward"}, Shape{512, 1024, 256, false, true, "its data gradient"},
                         Shape{256, 512, 1024, true, false, "its weight gradient"}, Shape{512, 2048, 512, false, false, "deep"},
                         Shape{32, 64, 32, false, false, "attention"}}) {
    ipu::emu::Mat a = z.ta ? ipu::emu::Mat(z.depth, z.rows) : ipu::emu::Mat(z.rows, z.depth);
    ipu::emu::Mat b = z.tb ? ipu::emu::Mat(z.cols, z.depth) : ipu::emu::Mat(z.depth, z.cols);
    ipu::emu::Mat c(z.rows, z.cols);
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = ipu::emu::fp16::roundNearest(static_cast<float>(rng.normal()));
    for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = ipu::emu::fp16::roundNearest(static_cast<float>(0.05 * rng.normal()));
    using ipu::emu::fp16::Kernel;
    std::vector<std::pair<const char*, Kernel>> kernels;
    for (auto k : {std::make_pair("AVX-512", Kernel::Avx512), std::make_pair("AVX2", Kernel::Avx2), std::make_pair("portable", Kernel::Portable)})
      if (ipu::emu::fp16::kernelSupported(k.second)) kernels.push_back(k);
    const int reps = std::max(1, static_cast<int>(2e8 / (2.0 * z.rows * z.depth * z.cols)));
    const ipu::emu::fp16::Operand opA = z.ta ? ipu::emu::fp16::Operand{a.data(), 1, a.cols()} : ipu::emu::fp16::Operand{a.data(), a.cols(), 1};
    const ipu::emu::fp16::Operand opB = z.tb ? ipu::emu::fp16::Operand{b.data(), 1, b.cols()} : ipu::emu::fp16::Operand{b.data(), b.cols(), 1};
    // The emulator's fp32 product (Eigen's, on this thread).
    ipu::emu::Numerics eigen(false, false, false, 0);
    // The best of 5 rounds (each kernel's fastest time): on a shared host a
    // round that another process disturbs does not count.
    std::vector<double> seconds(kernels.size() + 1, 1e30);
    for (int round = 0; round < 5; ++round) {
      auto start = Clock::now();
      for (int r = 0; r < reps; ++r) c = z.ta ? eigen.mmTN(a, b) : z.tb ? eigen.mmNT(a, b) : eigen.mm(a, b);
      seconds[0] = std::min(seconds[0], std::chrono::duration<double>(Clock::now() - start).count());
      for (std::size_t k = 0; k < kernels.size(); ++k) {
        start = Clock::now();
        for (int r = 0; r < reps; ++r) {
          ipu::emu::fp16::PartialsProduct product(opB, z.depth, z.cols, true, static_cast<std::uint64_t>(r), kernels[k].second);
          product.rows(opA, 0, z.rows, c.data());
        }
        seconds[k + 1] = std::min(seconds[k + 1], std::chrono::duration<double>(Clock::now() - start).count());
      }
    }
    const double flop = 2.0 * z.rows * z.depth * z.cols * reps;
    std::printf("  %4d x %4d x %4d (%s): Eigen fp32 %6.1f GFLOP/s", z.rows, z.depth, z.cols, z.what, flop / seconds[0] * 1e-9);
    for (std::size_t k = 0; k < kernels.size(); ++k)
      std::printf(", %s %6.1f (%.2fx)", kernels[k].first, flop / seconds[k + 1] * 1e-9, seconds[k + 1] / seconds[0]);
    std::printf("\n");
    std::fflush(stdout);
  }
  }

  if (!wanted("example")) return 0;
  std::printf("\nexamples/tiny_bert.ipu end to end (both phases, p = 2 x r = 2, %d host threads)\n", cores);
  std::ifstream in(std::string(IPU_SOURCE_DIR) + "/examples/tiny_bert.ipu");
  std::stringstream text;
  text << in.rdbuf();
  ipu::session::Session s;
  auto f = s.addSource(std::string(IPU_SOURCE_DIR) + "/examples/tiny_bert.ipu", text.str());
  const auto* plan = s.plan(f);
  if (plan == nullptr || plan->runs.empty()) return 1;
  ipu::emu::Options o;
  o.hostThreads = cores;
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
