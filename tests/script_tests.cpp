// Data-driven script tests. Every `.ipu` file under tests/scripts,
// tests/diagnostics and examples is a test case: it is checked and planned,
// and its diagnostics must be exactly those its comments expect:
//
//   x: 1   // expect-error: IPU1005                  an error on this line
//   // expect-error: IPU1203 @12:5                   at line 12 (column optional)
//   // expect-warning: IPU1108 "uses 4 of"          with part of the message
//   -- expect-error: IPU4002                        (in Lua code, a Lua comment)
//   // expect-json: runs.0.phases.0.gradient_accumulation == 2048
//   // expect-json: estimate.runs.0.phases.0.step_time_s < 0.5   (the cost model's JSON)
//
// Scripts with `estimate.` expectations or expecting an IPU3xxx code are also
// estimated, as `ipu estimate` does.
//
// A file that expects nothing must produce no diagnostic at all. Every file
// that parses is also a round-trip case: the printed program parses back to
// the same tree, and printing is idempotent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "interpreter/base/render.h"
#include "interpreter/syntax/parser.h"
#include "interpreter/syntax/printer.h"
#include "tests/unit/test_support.h"

namespace fs = std::filesystem;
using namespace ipu;

namespace {

struct Expectation {
  bool error = true;
  std::string code;
  std::uint32_t line = 0, column = 0;
  std::string substring;
  bool matched = false;
};

struct JsonExpectation {
  std::string path, op, value;
  std::uint32_t line = 0;
};

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void parseExpectations(const std::string& text, std::vector<Expectation>& diags, std::vector<JsonExpectation>& json) {
  static const std::regex diag(R"((?://|--)\s*expect-(error|warning):\s*(IPU\d{4})(?:\s+@(\d+)(?::(\d+))?)?(?:\s+\"([^\"]*)\")?)");
  static const std::regex js(R"(//\s*expect-json:\s*(\S+)\s*(==|!=|<=|>=|<|>)\s*(.+?)\s*$)");
  std::istringstream in(text);
  std::string line;
  std::uint32_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::smatch m;
    if (std::regex_search(line, m, diag)) {
      Expectation e;
      e.error = m[1] == "error";
      e.code = m[2];
      e.line = m[3].matched ? static_cast<std::uint32_t>(std::stoul(m[3])) : n;
      e.column = m[4].matched ? static_cast<std::uint32_t>(std::stoul(m[4])) : 0;
      e.substring = m[5].matched ? std::string(m[5]) : "";
      diags.push_back(e);
    }
    if (std::regex_search(line, m, js)) json.push_back(JsonExpectation{m[1], m[2], m[3], n});
  }
}

bool compareJson(const nlohmann::ordered_json& actual, const std::string& op, const std::string& value) {
  if (value == "true" || value == "false") {
    bool want = value == "true";
    bool got = actual.is_boolean() && actual.get<bool>() == want;
    return op == "==" ? got : op == "!=" ? !got : false;
  }
  if (!value.empty() && value.front() == '"') {
    std::string want = value.substr(1, value.size() - 2);
    bool eq = actual.is_string() && actual.get<std::string>() == want;
    return op == "==" ? eq : op == "!=" ? !eq : false;
  }
  if (!actual.is_number()) return false;
  double a = actual.get<double>(), b = std::stod(value);
  if (op == "==") return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b));
  if (op == "!=") return a != b;
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == ">") return a > b;
  return a >= b;
}

class ScriptTest : public ::testing::Test {
 public:
  explicit ScriptTest(fs::path p) : path_(std::move(p)) {}
  void TestBody() override {
    std::string text = readAll(path_);
    std::vector<Expectation> expected;
    std::vector<JsonExpectation> json;
    parseExpectations(text, expected, json);
    // Scripts that expect a cost-model result or error are estimated too.
    const bool estimate = std::any_of(json.begin(), json.end(), [](const JsonExpectation& j) {
                            return j.path.rfind("estimate.", 0) == 0;
                          }) ||
                          std::any_of(expected.begin(), expected.end(),
                                      [](const Expectation& e) {
                                        // Cost-model errors, and hooks failing while they run (hooks run under estimate).
                                        return e.code.rfind("IPU3", 0) == 0 || (e.code.rfind("IPU4", 0) == 0 && e.code != "IPU4001");
                                      });
    // Scripts expecting an emulator error (IPU5xxx) are trained, as `ipu run`
    // does; an emulator warning is what checking reports of what a run refuses.
    const bool train = std::any_of(expected.begin(), expected.end(),
                                   [](const Expectation& e) { return e.error && e.code.rfind("IPU5", 0) == 0; });
    test::Outcome o = train ? test::trainFile(path_.string()) : test::runFile(path_.string(), estimate);
    const auto& sources = o.session->sources();
    std::string rendered = o.rendered();
    for (const auto& d : o.session->diagnostics().all()) {
      base::LineCol lc;
      bool here = false;
      if (const base::SourceFile* f = sources.find(d.span.file)) {
        lc = f->lineCol(d.span.begin);
        here = fs::path(f->path()) == path_;
      }
      auto it = std::find_if(expected.begin(), expected.end(), [&](const Expectation& e) {
        return !e.matched && e.code == d.code && e.error == (d.severity == base::Severity::Error) &&
               (!here || e.line == lc.line) && (e.column == 0 || e.column == lc.column) &&
               (e.substring.empty() || d.message.find(e.substring) != std::string::npos);
      });
      if (it != expected.end()) it->matched = true;
      else ADD_FAILURE() << "unexpected diagnostic:\n" << base::renderHuman(d, sources, false);
    }
    for (const auto& e : expected)
      if (!e.matched)
        ADD_FAILURE() << "expected " << (e.error ? "error " : "warning ") << e.code << " at line " << e.line
                      << (e.substring.empty() ? "" : " containing \"" + e.substring + "\"") << "; got:\n"
                      << (rendered.empty() ? "(no diagnostics)\n" : rendered);
    if (!json.empty()) {
      ASSERT_NE(o.plan, nullptr) << "expect-json needs a plan; diagnostics:\n" << rendered;
      ir::Json doc = ir::toJson(*o.plan);
      ir::Json estimateDoc = o.estimate != nullptr ? cost::toJson(*o.estimate) : ir::Json();
      for (const auto& j : json) {
        const bool inEstimate = j.path.rfind("estimate.", 0) == 0;
        const nlohmann::ordered_json* v = inEstimate ? test::jsonAt(estimateDoc, j.path.substr(9)) : test::jsonAt(doc, j.path);
        if (v == nullptr) {
          ADD_FAILURE() << "line " << j.line << ": no `" << j.path << "` in the " << (inEstimate ? "estimate" : "plan")
                        << " JSON";
          continue;
        }
        EXPECT_TRUE(compareJson(*v, j.op, j.value))
            << "line " << j.line << ": " << j.path << " is " << v->dump(-1) << ", expected " << j.op << " " << j.value;
      }
    }
  }

 private:
  fs::path path_;
};

class RoundTripTest : public ::testing::Test {
 public:
  explicit RoundTripTest(fs::path p) : path_(std::move(p)) {}
  void TestBody() override {
    base::SourceMap sources;
    base::Diagnostics diags;
    base::FileId f = sources.add(path_.string(), readAll(path_));
    auto program = syntax::parse(sources, f, diags);
    if (!program) GTEST_SKIP() << "does not parse (a syntax-error case)";
    std::string printed = syntax::print(*program, &sources);
    base::FileId g = sources.add("printed.ipu", printed);
    auto again = syntax::parse(sources, g, diags);
    ASSERT_TRUE(again) << "printed program does not parse:\n" << printed;
    EXPECT_EQ(syntax::toSExpr(*program), syntax::toSExpr(*again)) << "printing changed the tree:\n" << printed;
    EXPECT_EQ(program->comments.size(), again->comments.size()) << "printing lost comments:\n" << printed;
    EXPECT_EQ(printed, syntax::print(*again, &sources)) << "printing is not idempotent";
  }

 private:
  fs::path path_;
};

std::string testName(const fs::path& root, const fs::path& p) {
  std::string rel = fs::relative(p, root).replace_extension().string();
  for (char& c : rel)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return rel;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  fs::path root = test::sourceDir();
  std::vector<fs::path> files;
  for (const char* dir : {"tests/scripts", "tests/diagnostics", "tests/published", "examples"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / dir))
      if (entry.is_regular_file() && entry.path().extension() == ".ipu") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    std::string name = testName(root, p);
    ::testing::RegisterTest("Script", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [p]() -> ::testing::Test* { return new ScriptTest(p); });
    ::testing::RegisterTest("RoundTrip", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [p]() -> ::testing::Test* { return new RoundTripTest(p); });
  }
  return RUN_ALL_TESTS();
}
