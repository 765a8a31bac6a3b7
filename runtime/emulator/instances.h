// The instances of one emulated pod (docs/run.md, "Across processes and
// hosts"): `mpirun -n N ipu run` runs the mapping's replicas as N processes,
// instance k driving replicas [k R/N, (k+1) R/N). The trainer and the run
// loop talk to the other instances only through this interface, so the
// emulator's headers and the build without MPI know nothing of MPI; the
// MPI implementation is runtime/mpi/mpi_instances.h.
//
// Every operation is collective over the instances that take part and is
// entered in the same order by each of them, except `exchange`, which
// threads call concurrently (distributed batch norm), matched by its tag.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ipu::emu {

class Instances {
 public:
  virtual ~Instances() = default;
  virtual int rank() const = 0;
  virtual int count() const = 0;

  // Every instance passes n floats; `all` receives count() * n, instance k's at k * n.
  virtual void allGather(const float* mine, std::size_t n, float* all) = 0;
  // Every instance passes a byte string of any length; returns them in rank order.
  virtual std::vector<std::string> allGatherBytes(const std::string& mine) = 0;
  // Instance 0's `value` on every instance.
  virtual std::string broadcast(const std::string& value) = 0;
  // Whether `mine` is true on any instance.
  virtual bool any(bool mine) = 0;
  // Exchanges `mine` with each of `peers` (other instances, each calling
  // exchange with this instance among its peers and the same tag): theirs[k]
  // is what peers[k] passed. Thread-safe; tags of concurrent calls differ.
  virtual void exchange(long long tag, const std::vector<int>& peers, const std::vector<double>& mine,
                        std::vector<std::vector<double>>& theirs) = 0;
  // Prints "instance k of N failed: message" and stops every instance (MPI_Abort): for a
  // failure the other instances cannot see, which would otherwise leave them waiting forever.
  [[noreturn]] virtual void fail(const std::string& message) = 0;

  // The payload bytes of the gradient all-gathers and the batch-norm
  // exchanges: what this instance's data had to reach other instances, and
  // what reached it, whatever algorithm the library uses underneath (the
  // small messages that keep the instances in step are not counted; the plan
  // predicts these: runtime/ir/instance_traffic.h).
  virtual double bytesSent() const = 0;
  virtual double bytesReceived() const = 0;
};

}  // namespace ipu::emu
