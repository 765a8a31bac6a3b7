// Unit tests of the base layer: locations, suggestions, rendering, colour policy.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>
#include <cstdlib>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/render.h"
#include "interpreter/base/source.h"
#include "interpreter/base/terminal.h"

using namespace ipu::base;

TEST(Source, LineAndColumnCountCodePoints) {
  SourceFile f("a.ipu", "ab\nλx = 1\n\nlast");
  EXPECT_EQ(f.lineCol(0).line, 1u);
  EXPECT_EQ(f.lineCol(1).column, 2u);
  // "λ" is two bytes; `x` is the second character of line 2.
  EXPECT_EQ(f.lineCol(5).line, 2u);
  EXPECT_EQ(f.lineCol(5).column, 2u);
  EXPECT_EQ(f.lineText(2), "λx = 1");
  EXPECT_EQ(f.lineText(3), "");
  EXPECT_EQ(f.lineText(4), "last");
  EXPECT_EQ(f.lineCount(), 4u);
  EXPECT_EQ(f.lineCol(1000).line, 4u);  // offsets past the end clamp
}

TEST(Suggestions, FindTyposAndTranspositions) {
  std::vector<std::string> names = {"bert_large", "bert_base", "gpt3_175b", "POD16"};
  EXPECT_EQ(closestMatches("bert_lrage", names).front(), "bert_large");
  EXPECT_EQ(closestMatches("pod16", names).front(), "POD16");
  EXPECT_TRUE(closestMatches("completely_different", names).empty());
  EXPECT_EQ(didYouMean("bert_bsae", names), "did you mean `bert_base`?");
  EXPECT_EQ(didYouMean("zzzzzz", names), "");
}

// The language server's fixes read didYouMean's sentence back.
TEST(Suggestions, ReadBackFromAHelp) {
  std::vector<std::string> names = {"bert_base", "bert_large", "gpt3"};
  EXPECT_EQ(didYouMeanCandidates(didYouMean("bert_bsae", names)), (std::vector<std::string>{"bert_base"}));
  EXPECT_EQ(didYouMeanCandidates("rename it; " + didYouMean("bert_lrage", names)),
            (std::vector<std::string>{"bert_large", "bert_base"}));
  EXPECT_TRUE(didYouMeanCandidates("add `import \"std/pods\"`").empty());
  EXPECT_TRUE(didYouMeanCandidates("did you mean `unclosed").empty());
}

TEST(Diagnostics, CountAndDeduplicate) {
  Diagnostics d;
  Span s{0, 1, 2};
  d.error("IPU1001", s, "unknown name `x`");
  d.error("IPU1001", s, "unknown name `x`");  // the same mistake reached twice
  d.warning("IPU1108", s, "idle IPUs");
  EXPECT_EQ(d.errorCount(), 1u);
  EXPECT_EQ(d.warningCount(), 1u);
  EXPECT_EQ(d.all().size(), 2u);
}

TEST(Render, GnuFirstLineCaretAndHelp) {
  SourceMap sources;
  FileId f = sources.add("s.ipu", "let a = 1\nmodel m = bert_lrage\n");
  Diagnostic d{"IPU1001", Severity::Error, Span{f, 20, 30}, "unknown name `bert_lrage`", "did you mean `bert_large`?", {}};
  std::string out = renderHuman(d, sources, false);
  EXPECT_NE(out.find("s.ipu:2:11: error[IPU1001]: unknown name `bert_lrage`"), std::string::npos) << out;
  EXPECT_NE(out.find("2 | model m = bert_lrage"), std::string::npos) << out;
  EXPECT_NE(out.find("  |           ^^^^^^^^^^"), std::string::npos) << out;
  EXPECT_NE(out.find("= help: did you mean `bert_large`?"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no escape codes without colour";
  EXPECT_NE(renderHuman(d, sources, true).find('\x1b'), std::string::npos);
}

TEST(Render, TabsKeepCaretsAligned) {
  SourceMap sources;
  FileId f = sources.add("t.ipu", "\tx: oops\n");
  Diagnostic d{"IPU1005", Severity::Error, Span{f, 1, 2}, "m", "", {}};
  std::string out = renderHuman(d, sources, false);
  EXPECT_NE(out.find("1 |     x: oops"), std::string::npos) << out;
  EXPECT_NE(out.find("  |     ^"), std::string::npos) << out;
}

TEST(Render, JsonHasLocationsAndRenderedText) {
  SourceMap sources;
  FileId f = sources.add("j.ipu", "abc def\n");
  Diagnostic d{"IPU0001", Severity::Warning, Span{f, 4, 7}, "msg", "", {{Span{f, 0, 3}, "first here"}}};
  ipu::ir::Json j = toJson(d, sources);
  EXPECT_EQ(j.at("code"), "IPU0001");
  EXPECT_EQ(j.at("severity"), "warning");
  EXPECT_EQ(j.at("line"), 1);
  EXPECT_EQ(j.at("column"), 5);
  EXPECT_EQ(j.at("end_column"), 8);
  EXPECT_TRUE(j.at("help").is_null());
  EXPECT_EQ(j.at("notes").size(), 1u);
  EXPECT_NE(j.at("rendered").get<std::string>().find("j.ipu:1:5"), std::string::npos);
}

TEST(Colour, NoColorWinsAndAlwaysForces) {
  ::unsetenv("CLICOLOR_FORCE");
  ::unsetenv("FORCE_COLOR");
  ::setenv("NO_COLOR", "1", 1);
  EXPECT_FALSE(shouldColor(ColorMode::Always, 1));
  ::unsetenv("NO_COLOR");
  EXPECT_TRUE(shouldColor(ColorMode::Always, 1));
  EXPECT_FALSE(shouldColor(ColorMode::Never, 1));
  ::setenv("NO_COLOR", "", 1);  // empty NO_COLOR does not count (no-color.org)
  ::setenv("FORCE_COLOR", "1", 1);
  EXPECT_TRUE(shouldColor(ColorMode::Auto, 1));
  ::unsetenv("FORCE_COLOR");
  ::unsetenv("NO_COLOR");
  // Under ctest stdout is not a terminal.
  EXPECT_FALSE(shouldColor(ColorMode::Auto, 1));
}

TEST(Json, EscapesAndKeepsOrder) {
  ipu::ir::Json j = ipu::ir::Json::object();
  j["z"] = 1;
  j["a"] = "q\"\n\x01";
  j["n"] = 0.5;
  j["big"] = 1e20;
  j["nan"] = std::nan("");
  EXPECT_EQ(j.dump(-1), "{\"z\":1,\"a\":\"q\\\"\\n\\u0001\",\"n\":0.5,\"big\":1e+20,\"nan\":null}");
  EXPECT_EQ(j.dump(2).substr(0, 11), "{\n  \"z\": 1,");
}

// The number contract of the documented outputs (runtime/ir/json.h).
TEST(Json, WholeNumbersWithoutFractionOthersToTenDigits) {
  EXPECT_EQ(ipu::ir::dumpJson(nlohmann::ordered_json(3.0)), "3");
  EXPECT_EQ(ipu::ir::dumpJson(nlohmann::ordered_json(-0.0)), "0");
  EXPECT_EQ(ipu::ir::dumpJson(nlohmann::ordered_json(123456789012345.0)), "123456789012345");
  EXPECT_EQ(ipu::ir::dumpJson(nlohmann::ordered_json(0.1 + 0.2)), "0.3");
  EXPECT_EQ(ipu::ir::dumpJson(nlohmann::ordered_json(2.99999999999)), "3");
  EXPECT_EQ(ipu::ir::dumpJson(nlohmann::ordered_json(1.0 / 3)), "0.3333333333");
  EXPECT_EQ(ipu::ir::dumpJson(nlohmann::ordered_json(1.5e-7)), "1.5e-07");
  EXPECT_EQ(ipu::ir::dumpJson(nlohmann::ordered_json(-std::numeric_limits<double>::infinity())), "null");
  // Not UTF-8 (a file in another encoding): replaced, the document stays valid.
  const std::string written = ipu::ir::dumpJson(nlohmann::ordered_json("caf\xe9"));
  EXPECT_EQ(written, "\"caf\xef\xbf\xbd\"");
  EXPECT_EQ(nlohmann::json::parse(written), "caf\xef\xbf\xbd");
}

// An ir::Json put inside another is copied as JSON (not taken for a string).
TEST(Json, NestsAsJson) {
  ipu::ir::Json inner = ipu::ir::Json::array();
  inner.push(1);
  inner.push("two");
  ipu::ir::Json outer = ipu::ir::Json::object();
  outer["list"] = inner;
  outer["moved"] = std::move(inner);
  ipu::ir::Json copy = outer;
  EXPECT_EQ(copy.dump(-1), "{\"list\":[1,\"two\"],\"moved\":[1,\"two\"]}");
}

// Bytes from a script never reach the terminal as control sequences.
TEST(Render, ControlBytesAreEscapedInEveryPart) {
  EXPECT_EQ(printable("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");          // UTF-8 is kept
  EXPECT_EQ(printable("x\xc2\x9by"), "x\\xc2\\x9by");           // a C1 control (CSI) is not
  EXPECT_EQ(printable("\xff"), "\\xff");
  SourceMap sources;
  FileId f = sources.add("evil\x1b]0;t\x07.ipu", "let x = 1\n");
  Diagnostic d;
  d.code = "IPU0002";
  d.span = Span{f, 0, 3};
  d.message = "unexpected character `\x1b`";
  d.help = "bell\x07";
  d.notes.push_back(Note{Span{}, "note \x9b"});
  const std::string out = renderHuman(d, sources, false);
  for (char c : out) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << out;
  EXPECT_NE(out.find("\\x1b"), std::string::npos) << out;
}
