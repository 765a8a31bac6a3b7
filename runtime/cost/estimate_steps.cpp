#include "runtime/cost/estimate_steps.h"

#include <cmath>

#include "runtime/train/lr_schedule.h"

namespace ipu::cost {

SteppedRun stepThrough(const ir::RunPlan& run, const RunEstimate& estimate, train::Observer& observer,
                       const train::Policies& policies) {
  SteppedRun out;
  long long global = 0;
  const train::Source source = train::Source::Estimate;
  for (std::size_t k = 0; k < run.phases.size() && k < estimate.phases.size() && !out.stopped; ++k) {
    const ir::PhasePlan& ph = run.phases[k];
    const PhaseEstimate& e = estimate.phases[k];
    SteppedPhase sp;
    sp.name = ph.name;
    sp.steps = ph.steps;
    train::PhaseInfo info;
    info.run = run.name;
    info.phase = ph.name;
    info.index = static_cast<int>(k);
    info.steps = ph.steps;
    info.from = ph.from;
    train::PhaseDecision decision = observer.phaseStart(source, info);
    if (decision.stop.stop) {
      out.stopped = true;
      out.stopReason = decision.stop.reason + " (before phase `" + ph.name + "`)";
      out.phases.push_back(sp);
      break;
    }
    std::vector<double> memory;
    for (const auto& ipu : ph.ipus) memory.push_back(ipu.memory.total());
    for (long long s = 0; s < ph.steps; ++s) {
      train::StepInfo st;
      st.run = run.name;
      st.phase = ph.name;
      st.step = s + 1;
      st.globalStep = ++global;
      st.lr = policies.learningRate && !ph.lr.luaFunction.empty() ? policies.learningRate(s, ph.name)
                                                                  : train::learningRate(ph.lr, s, ph.steps);
      if (std::isnan(st.lr)) {  // the Lua schedule failed (reported)
        out.stopped = true;
        out.stopReason = "the learning-rate hook failed at step " + std::to_string(s + 1) + " of phase `" + ph.name + "`";
        break;
      }
      if (e.ok) {
        st.samplesPerSecond = e.samplesPerSecond;
        st.tokensPerSecond = e.tokensPerSecond > 0 ? e.tokensPerSecond : train::kNotMeasured;
        st.stepTimeSeconds = e.stepTime;
      }
      st.ipuMemoryBytes = memory;
      std::map<std::string, double> logged;
      train::StopRequest stop = observer.step(source, st, logged);
      for (const auto& [name, v] : logged) sp.logged[name] = v;
      sp.stepsRun = s + 1;
      if (stop.stop) {
        out.stopped = true;
        out.stopReason = stop.reason + " (at step " + std::to_string(s + 1) + " of phase `" + ph.name + "`)";
        break;
      }
    }
    sp.timeToTrain = e.ok ? static_cast<double>(sp.stepsRun) * e.stepTime : 0;
    info.stepsRun = sp.stepsRun;
    train::StopRequest end = observer.phaseEnd(source, info);
    if (end.stop && !out.stopped) {
      out.stopped = true;
      out.stopReason = end.reason + " (after phase `" + ph.name + "`)";
    }
    out.timeToTrain += sp.timeToTrain;
    out.phases.push_back(std::move(sp));
  }
  return out;
}

}  // namespace ipu::cost
