// The long-lived engine: the prelude (the standard library loaded once per
// process and shared by every session, also across threads), the user-module
// cache, and planning mapping variants as values (session/variant.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "interpreter/check/prelude.h"
#include "tests/unit/test_support.h"

using namespace ipu;

namespace {

std::string planJson(const test::Outcome& o) { return o.plan == nullptr ? std::string() : ir::toJson(*o.plan).dump(); }

}  // namespace

TEST(Prelude, SessionsShareTheStandardLibrary) {
  const check::Prelude& prelude = check::Prelude::get();
  ASSERT_NE(prelude.module("std/pods"), nullptr);
  ASSERT_NE(prelude.module("std/models/bert"), nullptr);
  test::Outcome a = test::runFile(test::sourceDir() + "/examples/bert_large_pod16.ipu");
  test::Outcome b = test::runFile(test::sourceDir() + "/examples/bert_large_pod64.ipu");
  ASSERT_NE(a.plan, nullptr);
  ASSERT_NE(b.plan, nullptr);
  // Both sessions' loaders hand out the prelude's module, not a parse of their own.
  EXPECT_EQ(a.session->checker()->loader().loadStandard("std/models/bert"), prelude.module("std/models/bert"));
  EXPECT_EQ(b.session->checker()->loader().loadStandard("std/models/bert"), prelude.module("std/models/bert"));
  // The standard files keep their ids in each session's source map.
  for (base::FileId id = 0; id < prelude.sources().size(); ++id)
    EXPECT_EQ(&a.session->sources().file(id), &prelude.sources().file(id));
}

TEST(Prelude, PlansAreTheSameFromManyThreads) {
  const std::string path = test::sourceDir() + "/examples/gpt3_175b_pod256.ipu";
  const std::string expected = planJson(test::runFile(path));
  ASSERT_FALSE(expected.empty());
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 3; ++k) got[i] = planJson(test::runFile(path));
    });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

TEST(ModuleCache, AnUnchangedModuleIsParsedOnceAndAChangedOneAgain) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ipu-module-cache-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [](const fs::path& p, const std::string& text) { std::ofstream(p) << text; };
  write(dir / "lib.ipu", "let width = 1024\n");
  write(dir / "main.ipu", "import \"lib\"\nlet twice = width * 2\n");
  session::Session s;
  auto root = s.readFile((dir / "main.ipu").string());
  ASSERT_TRUE(root);
  ASSERT_NE(s.check(*root), nullptr);
  const check::Module* first = nullptr;
  for (const auto& m : s.checker()->loader().modules())
    if (m->name.find("lib") != std::string::npos) first = m.get();
  ASSERT_NE(first, nullptr);
  auto program = first->program;
  std::size_t files = s.sources().size();
  ASSERT_NE(s.check(*root), nullptr);
  EXPECT_EQ(s.sources().size(), files);  // no new file: the parse was reused
  const check::Module* again = nullptr;
  for (const auto& m : s.checker()->loader().modules())
    if (m->name.find("lib") != std::string::npos) again = m.get();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->program, program);
  write(dir / "lib.ipu", "let width = oops\n");
  EXPECT_EQ(s.check(*root), nullptr);  // changed: parsed and checked again
  EXPECT_EQ(s.sources().size(), files + 1);
  fs::remove_all(dir);
}
