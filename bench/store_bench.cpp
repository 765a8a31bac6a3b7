// The run store at scale (docs/benchmarks.md, "Run store"): 1,000 runs of
// 10,000 metric points each in one SQLite store, written the way a training
// records them (batches of 1,000 points, one transaction each), then
//   - listing: open the store, read every run with its parameters and metric
//     summaries, apply a filter, format the table (what `ipu runs` does), and
//     the `ipu runs` command itself;
//   - the `ipu report` command for the newest 20 runs and for all 1,000.
// Prints the figures; not a test.
//
//   ipu_store_bench IPU [DIR]   (DIR: where the store goes; default a temporary one)
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <variant>

#include "interpreter/store/filter.h"
#include "interpreter/store/run_store.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double timeCommand(const std::string& command) {
  auto t0 = Clock::now();
  int rc = std::system((command + " >/dev/null 2>&1").c_str());
  double s = since(t0);
  if (rc != 0) std::cerr << "failed (" << rc << "): " << command << "\n";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ipu::store;
  if (argc < 2) {
    std::cerr << "usage: ipu_store_bench IPU [DIR]\n";
    return 2;
  }
  const std::string ipu = argv[1];
  namespace fs = std::filesystem;
  const fs::path dir = argc > 2 ? fs::path(argv[2]) : fs::temp_directory_path() / ("ipu-store-bench-" + std::to_string(::getpid()));
  const std::string db = (dir / "ipu.db").string();
  constexpr int kRuns = 1000, kPoints = 10000, kBatch = 1000;
  // A DIR that already holds the store is reused (for timing the reads again).
  const bool reuse = argc > 2 && fs::exists(db);
  if (!reuse) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }

  auto t0 = Clock::now();
  if (!reuse) {
    auto store = openStore(db, OpenMode::Create);
    for (int r = 0; r < kRuns; ++r) {
      NewRun nr;
      nr.training = "bench";
      nr.script = "// bench\n";
      nr.planHash = std::to_string(r % 10);
      for (int p = 0; p < 60; ++p) nr.parameters["phases.one.p" + std::to_string(p)] = std::to_string(p * r % 17);
      nr.parameters["mapping.replicas"] = std::to_string(1 << (r % 5));
      nr.parameters["lr.peak"] = std::to_string(0.0001 * (1 + r % 10));
      nr.host = "bench";
      nr.startedAt = 1.7e9 + r;
      long long id = store->createRun(nr);
      std::vector<MetricPoint> batch;
      for (int s = 1; s <= kPoints; ++s) {
        batch.push_back({"loss", s, 8 * std::exp(-s / 2000.0) + 0.001 * (r % 50), 1.7e9 + r + s * 0.01});
        if (static_cast<int>(batch.size()) == kBatch) {
          store->appendMetrics(id, batch);
          batch.clear();
        }
      }
      store->finishRun(id, RunStatus::Finished, "", 1.7e9 + r + 100);
    }
  }
  const double write = since(t0);
  if (reuse) std::printf("write: reused the store in %s\n", dir.c_str());
  else std::printf("write: %d runs x %d points in batches of %d: %.1f s (%.0f points/s), store %.0f MB\n", kRuns, kPoints,
              kBatch, write, kRuns * 1.0 * kPoints / write, fs::file_size(db) / 1e6);

  // In process: what `ipu runs --where` does before printing.
  double best = 1e9;
  std::size_t matched = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t1 = Clock::now();
    auto store = openStore(db, OpenMode::Existing);
    auto runs = store->listRuns();
    FieldResolver names(runs);
    auto parsed = Filter::parse("mapping.replicas IN (2, 4) AND (loss < 0.5 OR tag = 'baseline')", names);
    const Filter& f = std::get<Filter>(parsed);
    matched = 0;
    for (const auto& r : runs) matched += f.matches(r) ? 1 : 0;
    best = std::min(best, since(t1));
  }
  std::printf("list 1,000 runs with a filter, in process (best of 5): %.3f s (%zu match)\n", best, matched);

  const std::string store = " --store " + db;
  double list = 1e9, where = 1e9, report20 = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    list = std::min(list, timeCommand(ipu + " runs" + store));
    where = std::min(where, timeCommand(ipu + " runs" + store + " --where \"mapping.replicas IN (2,4) AND loss < 0.5\" --sort -loss"));
    report20 = std::min(report20, timeCommand(ipu + " report" + store + " -o " + (dir / "r20.html").string()));
  }
  std::printf("ipu runs (all 1,000, best of 3): %.3f s\n", list);
  std::printf("ipu runs --where ... --sort (best of 3): %.3f s\n", where);
  std::printf("ipu report, newest 20 runs (200,000 points; best of 3): %.2f s, %.1f MB\n", report20,
              fs::file_size(dir / "r20.html") / 1e6);
  double report1000 = timeCommand(ipu + " report" + store + " --limit 1000 -o " + (dir / "r1000.html").string());
  std::printf("ipu report, all 1,000 runs (10,000,000 points): %.2f s, %.1f MB\n", report1000,
              fs::file_size(dir / "r1000.html") / 1e6);
  if (argc <= 2) fs::remove_all(dir);
  return 0;
}
