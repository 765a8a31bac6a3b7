#include "interpreter/runner/system_usage.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ipu::runner {

SystemUsage systemUsage() {
  SystemUsage u;
  rusage r{};
  if (::getrusage(RUSAGE_SELF, &r) == 0) {
    u.cpuSeconds = static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
                   static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
    u.peakRssMb = static_cast<double>(r.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  }
  // VmRSS and Threads: the lines of /proc/self/status ("VmRSS:   12345 kB").
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "VmRSS:", 6) == 0) u.rssMb = std::strtod(line + 6, nullptr) / 1024.0;
      else if (std::strncmp(line, "VmHWM:", 6) == 0 && u.peakRssMb <= 0) u.peakRssMb = std::strtod(line + 6, nullptr) / 1024.0;
      else if (std::strncmp(line, "Threads:", 8) == 0) u.threads = std::strtod(line + 8, nullptr);
    }
    std::fclose(f);
  }
  return u;
}

}  // namespace ipu::runner
