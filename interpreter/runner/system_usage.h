// What a run's process uses of its host (docs/tracking.md, "System
// metrics"): CPU time, resident memory and threads, read from getrusage and
// /proc/self/status, with no library beyond the C library. The run's
// recorder (store_recorder.h) records them as metrics `system.*`.
#pragma once

namespace ipu::runner {

struct SystemUsage {
  double cpuSeconds = 0;  // user + system CPU time of the process so far
  double rssMb = 0;       // resident set now (MiB)
  double peakRssMb = 0;   // the largest resident set so far (MiB)
  double threads = 0;     // threads of the process now
};

SystemUsage systemUsage();

}  // namespace ipu::runner
