// IPU_INVARIANT(condition, "what must hold"): an internal invariant, checked
// in every build (Release too, unlike `assert`). A broken invariant is a bug
// in ipu, never a user error: the script and its mapping were accepted, so
// what follows from them must hold. Continuing would index past a vector or
// train on garbage, so the check prints what broke and where, asks for a bug
// report, and ends the process with exit code 70 (EX_SOFTWARE) from whichever
// thread it runs on.
//
// Why not an exception: the emulator's worker threads and the commands' many
// `catch (...)` blocks (which turn a failure into a user-facing error) would
// swallow or misreport it. Why not `abort`: a user should see an exit code
// the documentation names (docs/diagnostics.md, "Exit codes"), not a core dump.
//
// Checks belong where a plan's data is trusted as an index or a count, at the
// entry of a pass, not inside the inner loops of kernels.
//
// A header with one out-of-line function (ipu_invariant), below both the
// runtime and the interpreter, so every layer can use it.
#pragma once

namespace ipu {

// The exit code of a broken invariant (sysexits.h's EX_SOFTWARE).
constexpr int kInternalErrorExit = 70;

// Prints the report to standard error and exits with kInternalErrorExit.
[[noreturn]] void invariantFailed(const char* what, const char* condition, const char* file, int line) noexcept;

}  // namespace ipu

#define IPU_INVARIANT(condition, what)                                           \
  do {                                                                           \
    if (__builtin_expect(!static_cast<bool>(condition), 0))                      \
      ::ipu::invariantFailed((what), #condition, __FILE__, __LINE__);            \
  } while (false)
