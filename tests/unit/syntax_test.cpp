// Unit tests of the syntax layer: the AST we build, friendly syntax errors,
// the safety pre-scan, incompleteness for the REPL, and the printer.
#include <gtest/gtest.h>

#include <sstream>

#include "interpreter/base/render.h"
#include "interpreter/syntax/parser.h"
#include "interpreter/syntax/printer.h"

using namespace ipu;

namespace {

struct Parsed {
  base::SourceMap sources;
  base::Diagnostics diags;
  std::unique_ptr<syntax::Program> program;
  std::string firstError() const {
    for (const auto& d : diags.all())
      if (d.severity == base::Severity::Error) return d.code + " " + d.message + (d.help.empty() ? "" : " | " + d.help);
    return "";
  }
};

std::unique_ptr<Parsed> parse(const std::string& text) {
  auto p = std::make_unique<Parsed>();
  base::FileId f = p->sources.add("t.ipu", text);
  p->program = syntax::parse(p->sources, f, p->diags);
  return p;
}

std::string exprRoundTrip(const std::string& expr) {
  auto p = parse("let x = " + expr + "\n");
  if (!p->program) return "PARSE ERROR: " + p->firstError();
  return syntax::print(*p->program->items[0]->as<syntax::LetItem>().value);
}

}  // namespace

TEST(Parser, BuildsDeclarationsWithSpans) {
  auto p = parse("import \"std/pods\"\nmapping m for bert_large on POD16 {\n  replicas: 4\n  pipeline {\n    ipu 0: embedding, encoder[0..3]\n  }\n}\nrun t\n");
  ASSERT_TRUE(p->program) << p->firstError();
  ASSERT_EQ(p->program->items.size(), 3u);
  const auto& d = p->program->items[1]->as<syntax::Declaration>();
  EXPECT_EQ(d.declKind, syntax::DeclKind::Mapping);
  EXPECT_EQ(d.name, "m");
  ASSERT_TRUE(d.forExpr && d.onExpr && d.body);
  ASSERT_EQ(d.body->members.size(), 2u);
  const auto& stages = d.body->members[1]->as<syntax::BlockMember>();
  EXPECT_EQ(stages.name, "pipeline");
  const auto& stage = stages.block->members[0]->as<syntax::StageMember>();
  EXPECT_EQ(stage.index, 0);
  EXPECT_EQ(stage.layers.size(), 2u);
  EXPECT_EQ(stage.layers[1]->kind, syntax::ExprKind::Index);
  base::LineCol lc = p->sources.file(0).lineCol(d.nameSpan.begin);
  EXPECT_EQ(lc.line, 2u);
  EXPECT_EQ(lc.column, 9u);
}

TEST(Parser, NumbersCarryUnitsAndFieldsNeedNoSeparators) {
  auto p = parse("chip c { memory: 900 MB clock: 1.33 GHz bw: 64 GB/s share: 25% }\n"
                 "training t { phase a { micro_batch: 8\n steps: 7038; lr: 0.006 warmup 2000 steps then linear to 0 } }\n");
  ASSERT_TRUE(p->program) << p->firstError();
  const auto& chip = p->program->items[0]->as<syntax::Declaration>();
  const auto& mem = chip.body->members[0]->as<syntax::FieldMember>();
  EXPECT_EQ(mem.value->as<syntax::NumberExpr>().unit, "MB");
  EXPECT_EQ(chip.body->members[2]->as<syntax::FieldMember>().value->as<syntax::NumberExpr>().unit, "GB/s");
  EXPECT_EQ(chip.body->members[3]->as<syntax::FieldMember>().value->as<syntax::NumberExpr>().unit, "%");
  const auto& phase = p->program->items[1]->as<syntax::Declaration>().body->members[0]->as<syntax::PhaseMember>();
  ASSERT_EQ(phase.block->members.size(), 3u) << "`8` then `steps:` is two fields, not `8 steps`";
  const auto& lr = phase.block->members[2]->as<syntax::FieldMember>().value->as<syntax::ScheduleExpr>();
  EXPECT_EQ(lr.warmup->as<syntax::NumberExpr>().unit, "steps");
  EXPECT_EQ(lr.decay->kind, "linear");
}

TEST(Parser, FriendlyErrors) {
  EXPECT_EQ(parse("mapping m { replicas = 4 }")->firstError().substr(0, 7), "IPU0001");
  EXPECT_NE(parse("mapping m { replicas = 4 }")->firstError().find("fields are written `name: value`"), std::string::npos);
  EXPECT_NE(parse("let s = \"abc\n")->firstError().find("IPU0003 unterminated string"), std::string::npos);
  EXPECT_NE(parse("hook h = lua \"\"\" abc \n")->firstError().find("unterminated `\"\"\"` string"), std::string::npos);
  EXPECT_NE(parse("model m {\n layer x = f(\n")->firstError().find("IPU0004"), std::string::npos);
  EXPECT_NE(parse("let x = (1 + 2]\n")->firstError().find("IPU0005"), std::string::npos);
  EXPECT_NE(parse("let x = 1 }\n")->firstError().find("IPU0005"), std::string::npos);
  EXPECT_NE(parse("let x = 1 # comment\n")->firstError().find("comments start with `//`"), std::string::npos);
  EXPECT_NE(parse("/* never closed\nlet x = 1\n")->firstError().find("IPU0008"), std::string::npos);
  EXPECT_NE(parse("let x = 1e999\n")->firstError().find("IPU0009"), std::string::npos);
  EXPECT_NE(parse("let x = \xff\n")->firstError().find("IPU0006"), std::string::npos);
  EXPECT_NE(parse("let x = \"a\\qb\"\n")->firstError().find("IPU0012 invalid escape `\\q`"), std::string::npos);
  EXPECT_NE(parse("let x = \"\\u12\"\n")->firstError().find("IPU0012"), std::string::npos);
}

TEST(Parser, ReportsSeveralErrorsPerRun) {
  auto p = parse("model a = \nlet = 3\nrun\n");
  EXPECT_GE(p->diags.errorCount(), 2u);
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "let x = " + std::string(100000, '(') + "1" + std::string(100000, ')') + "\n";
  EXPECT_NE(parse(deep)->firstError().find("IPU0007"), std::string::npos);
  std::string chain = "let x = 1";
  for (int i = 0; i < 100000; ++i) chain += " ^ 1";
  EXPECT_NE(parse(chain + "\n")->firstError().find("IPU0007"), std::string::npos);
  std::string negs = "let x = " + std::string(50000, '-') + "1\n";
  EXPECT_NE(parse(negs)->firstError().find("IPU0007"), std::string::npos);
}

TEST(Parser, IncompleteInputForTheRepl) {
  EXPECT_TRUE(syntax::isIncomplete("mapping m {"));
  EXPECT_TRUE(syntax::isIncomplete("hook h = lua \"\"\" x"));
  EXPECT_TRUE(syntax::isIncomplete("let x = f(1,"));
  EXPECT_FALSE(syntax::isIncomplete("let x = 1"));
  EXPECT_FALSE(syntax::isIncomplete("let x = \"{\""));
  EXPECT_FALSE(syntax::isIncomplete("let x = 1 // {"));
  EXPECT_FALSE(syntax::isIncomplete("let x = 1 }"));
}

TEST(Parser, KeywordsComeFromTheLexer) {
  const auto& k = syntax::keywords();
  for (const char* w : {"model", "mapping", "training", "phase", "repeat", "warmup", "lua", "with"})
    EXPECT_NE(std::find(k.begin(), k.end(), w), k.end()) << w;
  EXPECT_EQ(std::find(k.begin(), k.end(), "steps"), k.end()) << "`steps` is a unit, not a keyword";
}

// Only `/ s` continues a unit (rates); any other division after a unit is a
// division, and the printer never turns one into the other.
TEST(Parser, OnlySecondsMakeARate) {
  auto sexpr = [](const std::string& e) {
    auto p = parse("let x = " + e + "\n");
    return p->program ? syntax::toSExpr(*p->program->items[0]->as<syntax::LetItem>().value) : "PARSE ERROR " + p->firstError();
  };
  EXPECT_EQ(sexpr("64 GB/s"), sexpr("64 GB/s"));
  EXPECT_NE(sexpr("64 GB/s").find("GB/s"), std::string::npos);
  EXPECT_EQ(sexpr("900 MB / max(2, n)"), sexpr("(900 MB) / (max(2, n))"));
  EXPECT_EQ(sexpr("1 GB / t[0]"), sexpr("(1 GB) / (t[0])"));
  EXPECT_EQ(sexpr("100 MB / n"), sexpr("(100 MB) / n"));
  for (const char* e : {"(100 MB) / s", "2 * 3 MB / (s)", "-3 MB / (s)", "3 MB / (s.x)", "3 MB / (s[0])", "3 MB / (s ^ 2)",
                        "3 MB / (s with { a: 1 })", "1 GB / (s(2))", "(1..2 MB) / s"}) {
    std::string printed = exprRoundTrip(e);
    EXPECT_EQ(sexpr(printed), sexpr(e)) << e << " printed as " << printed;
  }
  EXPECT_EQ(exprRoundTrip("(100 MB) / s"), "100 MB / (s)");
}

TEST(Printer, ParenthesesWhereNeededOrWritten) {
  EXPECT_EQ(exprRoundTrip("(a + b) * c"), "(a + b) * c");
  EXPECT_EQ(exprRoundTrip("a + (b * c)"), "a + (b * c)") << "parentheses the author wrote are kept";
  EXPECT_EQ(exprRoundTrip("a - (b - c)"), "a - (b - c)");
  EXPECT_EQ(exprRoundTrip("((x))"), "x") << "around a name they say nothing";
  EXPECT_EQ(exprRoundTrip("-2 ^ 2"), "-2 ^ 2");
  EXPECT_EQ(exprRoundTrip("(-2) ^ 2"), "(-2) ^ 2");
  EXPECT_EQ(exprRoundTrip("2 ^ (3 ^ 2)"), "2 ^ (3 ^ 2)");
  EXPECT_EQ(exprRoundTrip("(2 ^ 3) ^ 2"), "(2 ^ 3) ^ 2");
  // Built without parentheses (as a formatter round trip sees them): the
  // minimal ones are added where precedence needs them.
  auto p = parse("let x = a - b - c\nlet y = 2 ^ 3 ^ 2\n");
  ASSERT_TRUE(p->program);
  EXPECT_EQ(syntax::print(*p->program->items[0]->as<syntax::LetItem>().value), "a - b - c");
  EXPECT_EQ(syntax::print(*p->program->items[1]->as<syntax::LetItem>().value), "2 ^ 3 ^ 2");
  EXPECT_EQ(exprRoundTrip("x with {a: 1,b:2}"), "x with { a: 1, b: 2 }");
  EXPECT_EQ(exprRoundTrip("[1,2,3][0]"), "[1, 2, 3][0]");
  EXPECT_EQ(exprRoundTrip("if a then 1 else 2"), "if a then 1 else 2");
  EXPECT_EQ(exprRoundTrip("900MB"), "900 MB");
  EXPECT_EQ(exprRoundTrip("15 %"), "15%");
  EXPECT_EQ(exprRoundTrip("0.1 per 256 warmup 5 epochs then cosine to 0"), "0.1 per 256 warmup 5 epochs then cosine to 0");
  EXPECT_EQ(exprRoundTrip("\"a\\\"b\\n\""), "\"a\\\"b\\n\"");
}

TEST(Printer, CommentsStayWithWhatTheyDescribe) {
  auto p = parse("let a = 1\n\n// about b\nlet b = 2\ntraining t { phase p { seq_len: 128; masked_tokens: 20  // twenty\n x: 1 } }\n");
  ASSERT_TRUE(p->program);
  EXPECT_EQ(syntax::print(*p->program, &p->sources),
            "let a = 1\n\n// about b\nlet b = 2\n\ntraining t {\n  phase p {\n    seq_len: 128\n    masked_tokens: 20  // twenty\n"
            "    x: 1\n  }\n}\n");
}

TEST(Printer, WrapsLongSumsAtTheirOperators) {
  std::string longSum = "layer l(a: int) {\n  params: ";
  for (int i = 0; i < 12; ++i) longSum += std::string(i ? " + " : "") + "a * 1000" + std::to_string(i);
  longSum += "\n  op: \"x\"\n  output: 1\n}\n";
  auto p = parse(longSum);
  ASSERT_TRUE(p->program);
  std::string printed = syntax::print(*p->program, &p->sources);
  std::istringstream lines(printed);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 100u) << line;
    ++count;
  }
  EXPECT_EQ(count, 6) << printed;
  EXPECT_NE(printed.find("\n          + a * 1000"), std::string::npos) << "continuation lines hang under the value:\n" << printed;
  auto q = parse(printed);
  ASSERT_TRUE(q->program) << printed;
  EXPECT_EQ(syntax::toSExpr(*p->program), syntax::toSExpr(*q->program));
}

TEST(Printer, KeepsCommentsAndIsIdempotent) {
  std::string src =
      "// header\nimport \"std/pods\"\n\nmapping m for x on POD16 {   // trailing\n  replicas:4  // four\n\n  // own line\n  shard: 1\n}\n";
  auto p = parse(src);
  ASSERT_TRUE(p->program);
  std::string once = syntax::print(*p->program, &p->sources);
  EXPECT_EQ(once,
            "// header\nimport \"std/pods\"\n\nmapping m for x on POD16 {  // trailing\n  replicas: 4  // four\n\n  // own line\n  shard: 1\n}\n");
  auto q = parse(once);
  ASSERT_TRUE(q->program);
  EXPECT_EQ(syntax::print(*q->program, &q->sources), once);
}
