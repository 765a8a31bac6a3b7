#include "runtime/base/invariant.h"

#include <cstdio>
#include <cstdlib>

namespace ipu {

void invariantFailed(const char* what, const char* condition, const char* file, int line) noexcept {
  // stdio, not iostreams: usable from any thread and during static
  // initialisation, and std::fprintf to stderr is unbuffered.
  std::fflush(stdout);   // what the command printed before the failure stays readable
  std::fprintf(stderr,
               "ipu: internal error: invariant broken: %s\n"
               "  check `%s` failed at %s:%d\n"
               "this is a bug in ipu; please report it (with the script and command)\n",
               what, condition, file, line);
  std::fflush(stderr);
  // _Exit: no destructors or atexit handlers, which could run on the state
  // the broken invariant describes, or deadlock on the other threads.
  std::_Exit(kInternalErrorExit);
}

}  // namespace ipu
