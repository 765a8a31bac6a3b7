#include "tests/emulator/emulator_test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "tests/emulator/crosscheck_support.h"
#include "interpreter/session/session.h"
#include "runtime/emulator/data.h"
#include "runtime/emulator/emulator.h"

namespace ipu::emutest {

std::string sourceDir() { return IPU_SOURCE_DIR; }

ir::ExecutionPlan planOfExample(const std::string& name) {
  std::ifstream in(sourceDir() + "/examples/" + name);
  EXPECT_TRUE(in) << "examples/" << name;
  std::stringstream text;
  text << in.rdbuf();
  return planOf(text.str());
}

ir::ExecutionPlan planOf(const std::string& script) {
  session::Session s;
  std::string rendered;
  const ir::ExecutionPlan* plan = crosscheck::planScript(s, sourceDir() + "/tests/emulator/test.ipu", script, &rendered);
  EXPECT_TRUE(plan != nullptr) << rendered;
  if (plan == nullptr) return {};
  return *plan;
}

std::string TinyBert::script() const {
  return "import \"std/pods\"\nimport \"std/models/bert\"\n"
         "chip small_chip = GC200 with { tiles: 16, memory: 256 MB, code_base: 1 MB }\n"
         "machine small_machine = M2000 with { chip: small_chip, ipus: 8, streaming_memory: 1 GB }\n"
         "pod small_pod { machine: small_machine, machines: 1 }\n"
         "model tiny = " + model + "\n"
         "mapping m for tiny on small_pod {\n" + mapping + "\n}\n"
         "precision p {\n" + precision + "\n}\n" + extra +
         "training t {\n mapping: m\n precision: p\n optimizer: " + optimizer + "\n seed: 3\n phase one {\n" + phase + "\n }\n}\n"
         "run t\n";
}

ir::PhasePlan phaseOf(const std::string& script) {
  ir::ExecutionPlan plan = planOf(script);
  if (plan.runs.empty() || plan.runs[0].phases.empty()) {
    ADD_FAILURE() << "no phase planned";
    return {};
  }
  return plan.runs[0].phases[0];
}

std::unique_ptr<emu::PhaseTrainer> trainerFor(const ir::PhasePlan& phase, int threads, long long seed) {
  std::shared_ptr<const emu::TextCorpus> corpus;
  if (phase.layers.empty() || (phase.layers.front().op != ir::LayerOp::Dense && phase.layers.front().op != ir::LayerOp::ConvStem)) {
    int vocab = 0;
    for (const auto& a : phase.layers.front().attributes)
      if (a.name == "vocab") vocab = static_cast<int>(a.number);
    auto c = emu::loadCorpus(emu::defaultCorpusPath(), vocab);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
    if (!c.ok()) return nullptr;
    corpus = c.value();
  }
  emu::TrainerSettings ts;
  ts.seed = seed;
  ts.hostThreads = threads;
  ts.runName = "t";
  auto t = emu::PhaseTrainer::create(phase, ts, corpus);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().code + " " + t.error().message);
  if (!t.ok()) return nullptr;
  return std::move(t.value());
}

TrainedSteps runSteps(const ir::PhasePlan& phase, int steps, int threads) {
  TrainedSteps out;
  out.trainer = trainerFor(phase, threads);
  if (!out.trainer) return out;
  for (int i = 0; i < steps; ++i) {
    auto s = out.trainer->step();
    EXPECT_TRUE(s.ok()) << "step " << i << ": " << (s.ok() ? "" : s.error().message);
    if (!s.ok()) return out;
    out.steps.push_back(*s);
  }
  out.completed = true;
  return out;
}

std::vector<double> TrainedSteps::losses() const {
  std::vector<double> l;
  for (const auto& s : steps) l.push_back(s.loss);
  return l;
}

double maxRelativeDifference(const emu::NamedTensors& a, const emu::NamedTensors& b) {
  double worst = 0;
  EXPECT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    const auto& x = a[i].second;
    const auto& y = b[i].second;
    if (x.rows() != y.rows() || x.cols() != y.cols()) {
      ADD_FAILURE() << "shape of " << a[i].first;
      return 1e30;
    }
    for (Eigen::Index k = 0; k < x.size(); ++k) {
      const double d = std::abs(static_cast<double>(x.data()[k]) - y.data()[k]) / std::max(1.0, std::abs(static_cast<double>(y.data()[k])));
      if (!(d <= worst)) worst = std::isnan(d) ? 1e30 : d;
    }
  }
  return worst;
}

}  // namespace ipu::emutest
