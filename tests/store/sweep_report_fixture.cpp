// Makes the sweeps tests/store/sweep_report_test.py reports on, through the
// store's API (as agents would write them), in the SQLite or PostgreSQL
// store STORE:
//
//   - `NAME` (the test passes a name with <script> in it): a random sweep of
//     four parameters (a log-scaled learning rate that drives the metric, an
//     integer, a list of names, a list of texts one of which is
//     "<script>alert(1)</script>"), minimize eval.loss with a target, 24
//     trials: finished ones with recorded runs, two stopped early, two failed,
//     one still running; trials end in an order other than their index;
//   - `empty_sweep`: no trial yet.
//
//   ipu_sweep_report_fixture STORE NAME
#include <algorithm>
#include <cmath>
#include <iostream>

#include "interpreter/store/sweep_store.h"
#include "interpreter/sweep/rng.h"

int main(int argc, char** argv) {
  using namespace ipu;
  using sweep::ParamValue;
  if (argc != 3) {
    std::cerr << "usage: ipu_sweep_report_fixture STORE NAME\n";
    return 2;
  }
  try {
    auto sweeps = store::openSweepStore(argv[1], store::OpenMode::Create);
    auto runs = store::openStore(argv[1], store::OpenMode::Existing);
    sweep::SweepSpec spec;
    spec.name = argv[2];
    spec.training = "tiny<b>trial</b>";
    spec.method = sweep::Method::Random;
    spec.metric = {"eval.loss", sweep::Goal::Minimize, 0.9};
    spec.runCap = 24;
    sweep::ParamSpec lr;
    lr.path = "lr";
    lr.distribution = sweep::Distribution::LogUniform;
    lr.min = 1e-4;
    lr.max = 1e-1;
    sweep::ParamSpec micro;
    micro.path = "micro_batch";
    micro.distribution = sweep::Distribution::IntUniform;
    micro.min = 1;
    micro.max = 16;
    sweep::ParamSpec opt;
    opt.path = "optimizer";
    opt.values = {ParamValue::ofName("adam"), ParamValue::ofName("lamb")};
    sweep::ParamSpec tag;
    tag.path = "tag";
    tag.values = {ParamValue::ofText("<script>alert(1)</script>"), ParamValue::ofText("plain")};
    spec.parameters = {lr, micro, opt, tag};  // sorted by path
    spec.seed = 42;
    const double base = 1.7e9;
    const auto made = sweeps->createOrResumeSweep(spec, "// made by ipu_sweep_report_fixture\n", base);

    sweep::SplitMix64 rng(7);
    std::vector<sweep::Assignment> cells;
    for (int i = 0; i < 24; ++i) {
      const double l = std::exp(std::log(1e-4) + rng.uniform() * (std::log(1e-1) - std::log(1e-4)));
      cells.push_back({{"lr", ParamValue::ofNumber(l)},
                       {"micro_batch", ParamValue::ofInteger(1 + static_cast<long long>(rng.below(16)))},
                       {"optimizer", ParamValue::ofName(rng.below(2) ? "lamb" : "adam")},
                       {"tag", ParamValue::ofText(i % 3 == 0 ? "<script>alert(1)</script>" : "plain")}});
    }
    std::size_t next = 0;
    store::Proposer propose = [&](const store::SweepRecord&, const std::vector<store::TrialRecord>&) {
      return next < cells.size() ? std::optional<sweep::Assignment>(cells[next++]) : std::nullopt;
    };
    store::ClaimOptions options;
    options.agent = "fixture";
    options.staleAfter = 1e9;
    std::vector<store::Claim> claims;
    for (int i = 0; i < 24; ++i) {
      store::Claim c = sweeps->claimTrial(made.sweep.id, options, propose, base + i);
      if (c.outcome != store::ClaimOutcome::Trial) throw store::StoreError("no trial to claim");
      claims.push_back(c);
    }
    for (int i = 0; i < 23; ++i) {  // the last stays running
      // They end in the order 22, 21, ..., 12, then 0, 1, ..., 11.
      const int k = i < 11 ? 22 - i : i - 11;
      const store::Claim& c = claims[static_cast<std::size_t>(k)];
      const double l = c.trial.assignment[0].second.number;
      const double loss = 1 + std::pow(std::log10(l) + 2.5, 2) + 0.02 * rng.normal();
      store::TrialOutcome out;
      long long steps = 200;
      if (k == 3 || k == 15) {
        out.state = store::TrialState::Stopped;
        out.reason = "hyperband: below the best 1/3 at step 60";
        steps = 60;
      } else if (k == 5 || k == 18) {
        out.state = store::TrialState::Failed;
        out.reason = "the loss diverged <at step 7>";
      }
      if (out.state != store::TrialState::Failed) {
        store::NewRun run;
        run.training = "tiny_trial";
        run.startedAt = base + k;
        const long long id = runs->createRun(run);
        runs->appendMetrics(id, {{"eval.loss", steps / 2, loss + 0.5, base + k + 1}, {"eval.loss", steps, loss, base + k + 2}});
        runs->finishRun(id, store::RunStatus::Finished, "", base + 50);
        out.runId = id;
        out.metric = loss;
      }
      if (!sweeps->endTrial(c.lease, out, base + 100 + i)) throw store::StoreError("lost a lease");
    }
    sweep::SweepSpec empty = spec;
    empty.name = "empty_sweep";
    sweeps->createOrResumeSweep(empty, "// an empty sweep\n", base);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
