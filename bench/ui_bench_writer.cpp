// The store side of bench/ui_bench.js (docs/benchmarks.md, "The dashboard"):
//
//   ipu_ui_bench_writer fill STORE RUNS POINTS
//     RUNS finished runs of POINTS loss points each, with a few parameters
//     that differ, tags and notes: the runs table of the page-load figure;
//   ipu_ui_bench_writer live STORE INTERVAL_MS STEPS
//     one running run that gets one loss point every INTERVAL_MS; prints
//     `run ID`, then `step S T` once the point of step S is committed (T:
//     seconds since the epoch), the times the live-update latency is
//     measured from.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <unistd.h>

#include "interpreter/store/run_store.h"

using namespace ipu::store;

namespace {

NewRun newRun(long long index) {
  NewRun nr;
  nr.training = "bench";
  nr.script = "// written by ipu_ui_bench_writer\n";
  nr.planHash = "h" + std::to_string(index % 7);
  nr.parameters = {{"index", std::to_string(index)},
                   {"mapping.replicas", std::to_string(1 << (index % 4))},
                   {"lr.peak", std::to_string(0.001 * static_cast<double>(1 + index % 5))},
                   {"micro_batch", std::to_string(2 + index % 3)}};
  nr.host = "bench";
  nr.pid = ::getpid();
  nr.startedAt = nowSeconds();
  return nr;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc != 5 || (mode != "fill" && mode != "live")) {
    std::cerr << "usage: ipu_ui_bench_writer fill STORE RUNS POINTS\n"
                 "       ipu_ui_bench_writer live STORE INTERVAL_MS STEPS\n";
    return 2;
  }
  try {
    auto store = openStore(argv[2], OpenMode::Create);
    if (mode == "fill") {
      const long long runs = std::atoll(argv[3]), points = std::atoll(argv[4]);
      for (long long r = 0; r < runs; ++r) {
        const long long id = store->createRun(newRun(r));
        if (r % 10 == 0) store->addTags(id, {"baseline"});
        if (r % 25 == 0) store->setNote(id, "note of run " + std::to_string(id));
        std::vector<MetricPoint> batch;
        for (long long s = 1; s <= points; ++s)
          batch.push_back({"loss", s, 8.0 * std::exp(-static_cast<double>(s) / 30.0) + 0.01 * static_cast<double>(r % 10), nowSeconds()});
        store->appendMetrics(id, batch);
        store->finishRun(id, RunStatus::Finished, "", nowSeconds());
      }
      return 0;
    }
    const long long interval = std::atoll(argv[3]), steps = std::atoll(argv[4]);
    const long long id = store->createRun(newRun(0));
    std::printf("run %lld\n", id);
    std::fflush(stdout);
    for (long long s = 1; s <= steps; ++s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(interval));
      store->appendMetrics(id, {{"loss", s, 8.0 * std::exp(-static_cast<double>(s) / 30.0), nowSeconds()}});
      std::printf("step %lld %.6f\n", s, nowSeconds());
      std::fflush(stdout);
    }
    store->finishRun(id, RunStatus::Finished, "", nowSeconds());
  } catch (const StoreError& e) {
    std::cerr << "ipu_ui_bench_writer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
