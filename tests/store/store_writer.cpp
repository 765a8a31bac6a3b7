// A writer for the store's concurrency and scale tests (tests/store/*.sh,
// bench/store_bench.cpp): records RUNS runs of POINTS metric points each, in
// batches of BATCH points (one transaction each, as a training's recorder
// does), then finishes them. Any store error is printed and exits 1, so a
// test sees every "database is locked" a writer met.
//
//   ipu_store_writer STORE RUNS POINTS BATCH TAG
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <unistd.h>

#include "interpreter/store/run_store.h"

int main(int argc, char** argv) {
  using namespace ipu::store;
  if (argc != 6) {
    std::cerr << "usage: ipu_store_writer STORE RUNS POINTS BATCH TAG\n";
    return 2;
  }
  const std::string location = argv[1], tag = argv[5];
  const long long runs = std::atoll(argv[2]), points = std::atoll(argv[3]), batch = std::max(1LL, std::atoll(argv[4]));
  try {
    auto store = openStore(location, OpenMode::Create);
    for (long long r = 0; r < runs; ++r) {
      NewRun nr;
      nr.training = "writer";
      nr.script = "// written by ipu_store_writer\n";
      nr.planHash = "h" + std::to_string(r % 7);
      nr.parameters = {{"writer", tag}, {"index", std::to_string(r)}, {"mapping.replicas", std::to_string(1 << (r % 4))},
                       {"lr.peak", std::to_string(0.001 * static_cast<double>(1 + r % 5))}};
      nr.host = "test";
      nr.pid = ::getpid();
      nr.startedAt = nowSeconds();
      long long id = store->createRun(nr);
      store->addTags(id, {tag});
      std::vector<MetricPoint> buffer;
      for (long long s = 1; s <= points; ++s) {
        const double t = nowSeconds();
        buffer.push_back({"loss", s, 8.0 * std::exp(-static_cast<double>(s) / 3000.0) + 0.01 * static_cast<double>(r % 10), t});
        if (static_cast<long long>(buffer.size()) >= batch) {
          store->appendMetrics(id, buffer);
          buffer.clear();
        }
      }
      store->appendMetrics(id, buffer);
      store->finishRun(id, RunStatus::Finished, "", nowSeconds());
    }
  } catch (const StoreError& e) {
    std::cerr << "ipu_store_writer " << tag << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
