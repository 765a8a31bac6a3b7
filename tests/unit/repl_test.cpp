// Unit tests of the REPL's workspace: what accumulates, what replaces what,
// what is refused (and then leaves the workspace as it was), and that the
// workspace is always a script that checks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "interpreter/repl/workspace.h"

using namespace ipu;

namespace {

const base::Painter kPlain(false);

struct Ws {
  repl::Workspace w{IPU_SOURCE_DIR "/examples"};
  repl::Reply in(const std::string& text) { return w.submit(text, kPlain); }
};

}  // namespace

// An expression that does not parse gets its own error, the one `ipu check`
// gives the same text in a `let`, not "expected a declaration".
TEST(ReplWorkspace, AnExpressionThatDoesNotParseGetsItsOwnError) {
  Ws ws;
  auto r = ws.in("\"\\uD800\"");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.errors.find("error[IPU0012]"), std::string::npos) << r.errors;
  EXPECT_EQ(r.errors.find("IPU0001"), std::string::npos) << r.errors;
  // Text that is neither stays a declaration error.
  r = ws.in("mapping {");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(ws.w.size(), 0u);
}

TEST(ReplWorkspace, ExpressionsPrintTheirValueAndLeaveNoTrace) {
  Ws ws;
  auto r = ws.in("2 GB / 4");
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_EQ(r.out, "500.0 MB\n");
  EXPECT_EQ(ws.w.size(), 0u);
}

TEST(ReplWorkspace, ARedefinitionReplacesAndDependentsSeeIt) {
  Ws ws;
  ASSERT_TRUE(ws.in("let a = 2\nlet b = a * 10").ok);
  EXPECT_EQ(ws.in("b").out, "20\n");
  auto r = ws.in("let a = 5");
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_NE(r.out.find("replaced let a"), std::string::npos) << r.out;
  EXPECT_EQ(ws.in("b").out, "50\n");
  EXPECT_EQ(ws.w.size(), 2u);
}

TEST(ReplWorkspace, ARefusedChangeLeavesTheWorkspaceAsItWas) {
  Ws ws;
  ASSERT_TRUE(ws.in("let a = 2\nlet b = a * 10").ok);
  const std::string before = ws.w.text();
  // `b` would become text * number: the whole change is refused.
  auto r = ws.in("let a = \"two\"");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.errors.find("error["), std::string::npos) << r.errors;
  EXPECT_EQ(ws.w.text(), before);
  EXPECT_EQ(ws.in("a").out, "2\n");
}

TEST(ReplWorkspace, DiagnosticsPointIntoTheTypedInput) {
  Ws ws;
  ASSERT_TRUE(ws.in("let a = 1").ok);
  auto r = ws.in("let c = a + nope");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.errors.find("<input>:1:13"), std::string::npos) << r.errors;
  EXPECT_NE(r.errors.find("unknown name `nope`"), std::string::npos) << r.errors;
}

TEST(ReplWorkspace, TypesOfExpressions) {
  Ws ws;
  EXPECT_EQ(ws.w.typeOf("3 s", kPlain).out, "time (s)\n");
  EXPECT_EQ(ws.w.typeOf("[1, 2, 3]", kPlain).out, "list of number, 3 items\n");
  EXPECT_EQ(ws.w.typeOf("[1 MB, \"a\"]", kPlain).out, "list of bytes or string, 2 items\n");
  EXPECT_FALSE(ws.w.typeOf("", kPlain).ok);
  auto decl = ws.w.typeOf("let x = 1", kPlain);
  EXPECT_FALSE(decl.ok);
  EXPECT_NE(decl.errors.find("takes an expression, not a declaration; declare it, then `:type x`"), std::string::npos)
      << decl.errors;
}

TEST(ReplWorkspace, AModelShowsItsSizeAsTheParamsPropertyCountsIt) {
  Ws ws;
  ASSERT_TRUE(ws.in("import \"std/models/bert\"").ok);
  auto params = ws.in("bert_base.params");
  ASSERT_TRUE(params.ok) << params.errors;
  auto shown = ws.in("bert_base");
  ASSERT_TRUE(shown.ok) << shown.errors;
  // "model bert_base: N layers, 110,106,428 (110.1M) parameters"
  std::string digits;
  for (char ch : shown.out.substr(shown.out.find(", ") + 2))
    if (ch >= '0' && ch <= '9') digits += ch;
    else if (ch != ',') break;
  EXPECT_EQ(digits + "\n", params.out) << shown.out;
}

TEST(ReplWorkspace, PlanningAMappingUsesTheLastTraining) {
  Ws ws;
  ASSERT_TRUE(ws.w.load(IPU_SOURCE_DIR "/examples/bert_large_pod16.ipu", kPlain).ok);
  // No variant needed: planning the training's own mapping plans the training.
  auto own = ws.w.report("pod16", repl::Workspace::Report::Memory, kPlain);
  ASSERT_TRUE(own.ok) << own.errors;
  EXPECT_NE(own.out.find("its own mapping `pod16`"), std::string::npos) << own.out;
  ASSERT_TRUE(ws.in("mapping two = pod16 with { replicas: 2 }").ok);
  auto variant = ws.w.report("two", repl::Workspace::Report::Estimate, kPlain);
  ASSERT_TRUE(variant.ok) << variant.errors;
  EXPECT_NE(variant.out.find("with mapping `two`"), std::string::npos) << variant.out;
  EXPECT_NE(variant.out.find("samples/s"), std::string::npos) << variant.out;
  // Neither request added anything to the workspace.
  EXPECT_EQ(ws.w.text().find("_with_"), std::string::npos);
  auto wrong = ws.w.report("bert_large", repl::Workspace::Report::Plan, kPlain);
  EXPECT_FALSE(wrong.ok);
  EXPECT_NE(wrong.errors.find("name a training or a mapping"), std::string::npos) << wrong.errors;
}

TEST(ReplWorkspace, TheSavedWorkspaceIsAScriptThatLoadsBack) {
  Ws ws;
  ASSERT_TRUE(ws.w.load(IPU_SOURCE_DIR "/examples/tiny_bert.ipu", kPlain).ok);
  ASSERT_TRUE(ws.in("let steps = 10").ok);
  const std::string path = (std::filesystem::temp_directory_path() / "ipu_repl_unit_saved.ipu").string();
  {
    std::ofstream f(path);
    f << ws.w.text();
  }
  repl::Workspace again(IPU_SOURCE_DIR "/examples");
  auto r = again.load(path, kPlain);
  std::filesystem::remove(path);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_EQ(again.size(), ws.w.size());
  EXPECT_EQ(again.text(), ws.w.text());
}

TEST(ReplWorkspace, DocExplainsKindsFieldsAndDeclarations) {
  Ws ws;
  EXPECT_NE(ws.w.doc("mapping.replicas", kPlain).out.find("data-parallel"), std::string::npos);
  ASSERT_TRUE(ws.in("// how many\nlet n = 3").ok);
  auto d = ws.w.doc("n", kPlain);
  ASSERT_TRUE(d.ok) << d.errors;
  EXPECT_NE(d.out.find("let n = 3"), std::string::npos) << d.out;
  auto missing = ws.w.doc("m", kPlain);
  EXPECT_FALSE(missing.ok);
  EXPECT_NE(missing.errors.find("did you mean `n`"), std::string::npos) << missing.errors;
}
