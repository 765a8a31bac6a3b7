#include "interpreter/store/run_store.h"

#include <chrono>

namespace ipu::store {

const char* name(RunKind k) { return k == RunKind::Run ? "run" : "estimate"; }

const char* name(RunStatus s) {
  switch (s) {
    case RunStatus::Running: return "running";
    case RunStatus::Finished: return "finished";
    case RunStatus::Failed: return "failed";
    case RunStatus::Stopped: return "stopped";
    case RunStatus::Cancelled: return "cancelled";
    case RunStatus::Killed: return "killed";
  }
  return "failed";
}

std::optional<RunKind> parseRunKind(const std::string& text) {
  if (text == "run") return RunKind::Run;
  if (text == "estimate") return RunKind::Estimate;
  return std::nullopt;
}

std::optional<RunStatus> parseRunStatus(const std::string& text) {
  for (RunStatus s : {RunStatus::Running, RunStatus::Finished, RunStatus::Failed, RunStatus::Stopped,
                      RunStatus::Cancelled, RunStatus::Killed})
    if (text == name(s)) return s;
  return std::nullopt;
}

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace ipu::store
