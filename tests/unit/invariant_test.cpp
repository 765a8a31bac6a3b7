// IPU_INVARIANT (runtime/base/invariant.h): checked in every build (these
// tests run on the Release build), and a broken one ends the process with
// exit code 70 and a report that names the invariant, the check and where it
// is, and asks for a bug report.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/base/invariant.h"

namespace {

// A function the compiler cannot see through at the call: the check must
// run on a value known only at run time, as in the code it guards.
int at(const std::vector<int>& v, int i) {
  IPU_INVARIANT(i >= 0 && static_cast<std::size_t>(i) < v.size(), "the index lies within the vector");
  return v[static_cast<std::size_t>(i)];
}

TEST(Invariant, HoldingInvariantsCostNothingVisible) {
  const std::vector<int> v{3, 5, 7};
  EXPECT_EQ(at(v, 0), 3);
  EXPECT_EQ(at(v, 2), 7);
}

TEST(InvariantDeathTest, BrokenInvariantReportsABugAndExits70) {
  // Threads elsewhere in the process (the emulator's pools) must not matter.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<int> v{3, 5, 7};
  EXPECT_EXIT(at(v, 3), ::testing::ExitedWithCode(ipu::kInternalErrorExit),
              "internal error: invariant broken: the index lies within the vector");
  EXPECT_EXIT(at(v, -1), ::testing::ExitedWithCode(70), "check `i >= 0 && static_cast<std::size_t>\\(i\\) < v.size\\(\\)` failed");
  EXPECT_EXIT(at(v, 9), ::testing::ExitedWithCode(70), "invariant_test\\.cpp:[0-9]+");
  EXPECT_EXIT(at(v, 9), ::testing::ExitedWithCode(70),
              "this is a bug in ipu; please report it \\(with the script and command\\)");
}

}  // namespace
