// Records the runs tests/store/report_page_test.js reports on, through the
// store's API as `ipu run` would, into the SQLite or PostgreSQL store STORE:
// RUNS runs of STEPS steps of a training `tiny_pretrain`, a grid of four peak
// learning rates (set with the base one, as a phase's schedule is), two
// replica counts, and seeds 1, 2, ... over them, so that RUNS = 200 makes 25
// runs per grid point. Each records the metrics a training does: loss (which
// falls faster with a larger learning rate, with noise from its seed), lr,
// loss_scale (1024 throughout) and skipped (0 throughout), throughput, and a
// held-out eval.loss and eval.mlm_accuracy at its last step. The runs of
// peak 0.02 are tagged `baseline`; the first is named `warm-start` (as with
// `ipu run --name`) and has a note holding markup.
//
//   ipu_runs_report_fixture STORE RUNS STEPS
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include "interpreter/store/run_store.h"

int main(int argc, char** argv) {
  using namespace ipu::store;
  if (argc != 4) {
    std::cerr << "usage: ipu_runs_report_fixture STORE RUNS STEPS\n";
    return 2;
  }
  const long long runs = std::atoll(argv[2]), steps = std::atoll(argv[3]);
  static const char* kPeaks[] = {"0.005", "0.01", "0.02", "0.04"};
  try {
    auto store = openStore(argv[1], OpenMode::Create);
    for (long long r = 0; r < runs; ++r) {
      const std::string peak = kPeaks[r % 4];
      const long long replicas = 1 + (r / 4) % 2, seed = 1 + r / 8;
      NewRun nr;
      nr.training = "tiny_pretrain";
      nr.name = r == 0 ? "warm-start" : "";
      nr.script = "// written by ipu_runs_report_fixture\n";
      nr.planHash = "fixture" + std::to_string(replicas);
      nr.parameters = {{"phases.short.lr.peak", peak},       {"phases.short.lr.base", peak},
                       {"mapping.replicas", std::to_string(replicas)}, {"seed", std::to_string(seed)},
                       {"model.layers", "2"},                {"phases.short.steps", std::to_string(steps)}};
      nr.host = "test";
      nr.pid = 1;
      nr.startedAt = nowSeconds();
      const long long id = store->createRun(nr);
      if (peak == "0.02") store->addTags(id, {"baseline"});
      if (r == 0) store->setNote(id, "first try <b>with markup</b> & a long note that goes on past what a table cell shows");
      const double rate = std::atof(peak.c_str()) * 40;
      std::vector<MetricPoint> points;
      double loss = 0;
      for (long long s = 1; s <= steps; ++s) {
        const double t = nowSeconds();
        const double noise = 0.15 * std::sin(static_cast<double>(s * (seed + 3)) * 0.7 + static_cast<double>(seed));
        loss = 2.0 + 6.0 * std::exp(-rate * static_cast<double>(s) / static_cast<double>(steps) * 10) + noise;
        const double sps = 500.0 * static_cast<double>(replicas) + 20 * std::cos(static_cast<double>(s + seed));
        points.push_back({"loss", s, loss, t});
        points.push_back({"lr", s, std::atof(peak.c_str()) * std::min(1.0, static_cast<double>(s) / 10.0), t});
        points.push_back({"loss_scale", s, 1024, t});
        points.push_back({"skipped", s, 0, t});
        points.push_back({"samples_per_s", s, sps, t});
        points.push_back({"tokens_per_s", s, sps * 64, t});
        points.push_back({"step_time_s", s, 32.0 / sps, t});
      }
      points.push_back({"eval.loss", steps, loss + 0.1, nowSeconds()});
      points.push_back({"eval.mlm_accuracy", steps, 0.3 - loss / 40, nowSeconds()});
      store->appendMetrics(id, points);
      store->finishRun(id, RunStatus::Finished, "", nowSeconds());
    }
  } catch (const StoreError& e) {
    std::cerr << "ipu_runs_report_fixture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
