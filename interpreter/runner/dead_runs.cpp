#include "interpreter/runner/dead_runs.h"

#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/store_recorder.h"

namespace ipu::runner {

std::vector<long long> markDeadLocalRuns(store::RunStore& st, const std::vector<store::RunRecord>* listed) {
  const std::string here = hostName();
  const double now = store::nowSeconds(), grace = 2 * kHeartbeatSeconds;
  auto alive = [&](const std::string& host, long long pid) { return host != here || processAlive(host, pid); };
  if (listed) {
    bool any = false;
    for (const auto& r : *listed)
      if (r.status == store::RunStatus::Running && r.heartbeatAt < now - grace && !alive(r.host, r.pid)) any = true;
    if (!any) return {};
  }
  try {
    return st.markStale(now, grace, alive);
  } catch (const store::StoreError&) {
    return {};
  }
}

}  // namespace ipu::runner
