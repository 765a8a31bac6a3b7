#include "interpreter/runner/estimate_record.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <limits>

#include "interpreter/runner/run_parameters.h"

namespace ipu::runner {

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

bool processAlive(const std::string& host, long long pid) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max() || host != hostName()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::vector<long long> recordEstimate(store::RunStore& store, const ir::ExecutionPlan& plan,
                                      const cost::Estimate& estimate, const std::string& scriptText,
                                      const std::map<std::string, std::string>& parameters) {
  std::vector<long long> ids;
  for (std::size_t i = 0; i < plan.runs.size() && i < estimate.runs.size(); ++i) {
    const ir::RunPlan& run = plan.runs[i];
    const cost::RunEstimate& est = estimate.runs[i];
    const double now = store::nowSeconds();
    store::NewRun nr;
    nr.kind = store::RunKind::Estimate;
    nr.training = run.name;
    nr.script = scriptText;
    nr.planHash = planHash(run);
    nr.parameters = runParameters(run);
    for (const auto& [k, v] : parameters) nr.parameters[k] = v;
    nr.host = hostName();
    nr.pid = static_cast<long long>(::getpid());
    nr.startedAt = now;
    long long id = store.createRun(nr);
    ids.push_back(id);

    std::vector<store::MetricPoint> points;
    std::string problem;
    long long first = 1;
    double total = 0;
    for (const auto& p : est.phases) {
      if (!p.ok || p.steps <= 0) {
        if (problem.empty()) problem = "phase `" + p.name + "` could not be estimated";
        continue;
      }
      const long long last = first + p.steps - 1;
      total += p.timeToTrain;
      for (long long step : {first, last}) {
        points.push_back({"samples_per_s", step, p.samplesPerSecond, now});
        if (p.tokensPerSecond > 0) points.push_back({"tokens_per_s", step, p.tokensPerSecond, now});
        points.push_back({"step_time_s", step, p.stepTime, now});
        points.push_back({"pipeline_utilisation", step, p.pipelineUtilisation, now});
        points.push_back({"peak_memory_bytes", step, p.peakMemoryBytes, now});
        if (step == last) points.push_back({"time_to_train_s", step, total, now});
        if (first == last) break;
      }
      first = last + 1;
    }
    store.appendMetrics(id, points);
    if (est.hooks && est.hooks->stopped)
      store.finishRun(id, store::RunStatus::Stopped, est.hooks->stopReason, store::nowSeconds());
    else
      store.finishRun(id, problem.empty() ? store::RunStatus::Finished : store::RunStatus::Failed, problem,
                      store::nowSeconds());
  }
  return ids;
}

}  // namespace ipu::runner
