// Reading the files the tool is given, safely: scripts, modules, Lua hooks,
// calibration tables, checkpoints, plan records and metrics. A path may name
// anything: a FIFO (opening it would block until a writer comes), a device
// (`/dev/zero` never ends, `/dev/tty` waits for a person), a directory. So
// every read goes through one function that opens without blocking, checks
// with fstat on the opened descriptor (no window between a check and the
// open), refuses what is not a regular file with a message saying what it
// is, and reads at most a given number of bytes.
#pragma once

#include <cstdint>
#include <string>

namespace ipu::files {

struct ReadResult {
  enum class Status { Ok, Missing, NotAFile, TooLarge, Unreadable } status = Status::Ok;
  std::string text;
  std::string problem;      // why not, for a message: "a directory", "a pipe (FIFO)", "Permission denied", ...
  std::uint64_t bytes = 0;  // the file's size (TooLarge)
  bool ok() const { return status == Status::Ok; }
  // "`path` is a pipe (FIFO), not a file", "`path` does not exist", ...
  std::string describe(const std::string& path) const;
};

// The whole file at `path`, if it is a regular file of at most `maxBytes`.
ReadResult readRegularFile(const std::string& path, std::uint64_t maxBytes);

// What `path` is when it is not a regular file ("a directory", "a pipe
// (FIFO)", "a device", ...), "" when it is one or does not exist. Does not
// follow a final symlink's target into blocking: it only stats.
std::string notARegularFile(const std::string& path);

}  // namespace ipu::files
