// How long `ipu search` takes, whole space: BERT-Large on an IPU-POD64 at a
// global batch of 65,536 (the MLPerf POD64 script with its accumulation
// replaced by that global batch) and GPT-3 175B on an IPU-POD256
// (examples/gpt3_175b_pod256.ipu), plus the published scripts. Prints the
// candidates in the space, how many were planned and estimated, pruned and
// rejected for memory, the seconds of one thread (median of a few runs, the
// process's CPU time), candidates per second of it, and the wall time with
// one worker per core beside the wall time with one, measured alternately
// in the same run (the ratio is what the threads give on this host; the
// counts are the same for both). Figures, not a test: docs/benchmarks.md
// records them.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "interpreter/search/search.h"
#include "interpreter/session/session.h"

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The process's CPU time: on a shared machine, wall time counts other
// people's builds; CPU time is what the cores spend on the search (with one
// worker, one core's).
double cpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double wallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void bench(const std::string& label, const std::string& path, const std::string& text, int repeats) {
  std::vector<double> cpu, wallOne, wallAll;
  ipu::search::PhaseResult last;
  for (int i = 0; i < repeats; ++i)
    for (int threads : {1, 0}) {
      ipu::session::Session s;
      ipu::base::FileId f = s.addSource(path, text);
      const ipu::check::CheckedProgram* program = s.check(f);
      if (program == nullptr || program->runs.empty()) {
        std::printf("%-40s does not check\n", label.c_str());
        return;
      }
      ipu::search::Options o;
      o.threads = threads;
      const double c0 = cpuSeconds(), w0 = wallSeconds();
      last = ipu::search::searchPhase(program->runs[0].phases[0], s.checker()->evaluator(), s.sources(), o);
      const double c1 = cpuSeconds(), w1 = wallSeconds();
      if (threads == 1) cpu.push_back(c1 - c0), wallOne.push_back(w1 - w0);
      else wallAll.push_back(w1 - w0);
    }
  const double t = median(cpu), one = median(wallOne), all = median(wallAll);
  const auto& c = last.counts;
  std::printf("%-40s %11lld %9lld %11lld %9lld %9lld %8.2f %12.0f %8.2f %8.2f\n", label.c_str(), c.space, c.evaluated, c.pruned,
              c.prunedMemory, c.rejectedMemory, t, static_cast<double>(c.space) / t, one, all);
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const fs::path root = IPU_SOURCE_DIR;
  std::printf("%-40s %11s %9s %11s %9s %9s %8s %12s %8s %8s\n", "search (whole space)", "candidates", "evaluated",
              "pruned", "pruned:m", "rejected", "cpu s", "candidates/s", "wall 1", "wall all");
  std::printf("(%u cores)\n", std::thread::hardware_concurrency());
  std::string bert = read(root / "tests/published/bert_large_pod64_mlperf_v11.ipu");
  const std::string ga = "gradient_accumulation: 96";
  if (bert.find(ga) != std::string::npos) bert.replace(bert.find(ga), ga.size(), "global_batch: 65536");
  bench("BERT-Large POD64, global batch 65,536", (root / "tests/published/bert_large_pod64_gb65536.ipu").string(), bert, 5);
  bench("GPT-3 175B POD256, global batch 1,536", (root / "examples/gpt3_175b_pod256.ipu").string(),
        read(root / "examples/gpt3_175b_pod256.ipu"), 3);
  for (const char* row : {"bert_large_pod16_mlperf_v11", "bert_large_pod64_mlperf_v11", "bert_large_bow_pod16_phase1",
                          "bert_large_bow_pod16_phase2", "resnet50_pod16_mlperf_v11", "resnet50_pod64_mlperf_v11",
                          "resnet50_bow_pod16"}) {
    const fs::path p = root / "tests/published" / (std::string(row) + ".ipu");
    bench(row, p.string(), read(p), 3);
  }
  return 0;
}
