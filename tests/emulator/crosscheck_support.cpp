#include "tests/emulator/crosscheck_support.h"

#include <cstdio>
#include <sstream>

#include "interpreter/base/render.h"

namespace ipu::crosscheck {

emu::Mat row(const std::vector<int>& v) {
  emu::Mat m(1, static_cast<Eigen::Index>(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) m(0, static_cast<Eigen::Index>(i)) = static_cast<float>(v[i]);
  return m;
}

std::string exact(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

int fail(const std::string& tool, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", tool.c_str(), what.c_str());
  return 1;
}

const ir::ExecutionPlan* planScript(session::Session& session, const std::string& name, const std::string& script, std::string* diagnostics) {
  const auto file = session.addSource(name, script);
  const ir::ExecutionPlan* plan = session.plan(file);
  bool errors = false;
  for (const auto& d : session.diagnostics().all()) {
    *diagnostics += base::renderHuman(d, session.sources(), false);
    errors |= d.severity == base::Severity::Error;
  }
  return errors ? nullptr : plan;
}

const ir::PhasePlan* planFirstPhase(session::Session& session, const std::string& name, const std::string& script, std::string* error) {
  std::string diagnostics;
  const ir::ExecutionPlan* plan = planScript(session, name, script, &diagnostics);
  if (plan == nullptr || plan->runs.empty() || plan->runs[0].phases.empty()) {
    *error = "the script did not plan:\n" + diagnostics;
    return nullptr;
  }
  return &plan->runs[0].phases[0];
}

void addStep(emu::TensorFile& file, const emu::StepResult& step, emu::PhaseTrainer& trainer) {
  file.set("loss", exact(step.loss));
  file.set("lr", exact(step.lr));
  for (auto& [name, g] : trainer.gradients()) file.tensors.emplace_back("grad/" + name, g);
  for (auto& [name, w] : trainer.weights()) file.tensors.emplace_back("after/" + name, w);
}

}  // namespace ipu::crosscheck
