// The documentation is kept true by tests: every diagnostic code is documented
// in docs/diagnostics.md and triggered by a script in tests/diagnostics; every
// keyword and every field of every declaration kind appears in
// docs/language.md; every `ipu` code block in the docs parses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "interpreter/check/codes.h"
#include "interpreter/check/schema.h"
#include "interpreter/hooks/codes.h"
#include "interpreter/plan/codes.h"
#include "interpreter/syntax/parser.h"
#include "runtime/cost/codes.h"
#include "runtime/emulator/error.h"
#include "tests/unit/test_support.h"

namespace fs = std::filesystem;
using namespace ipu;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<base::CodeInfo> allCodes() {
  std::vector<base::CodeInfo> all;
  for (const auto* list : {&syntax::syntaxCodes(), &check::checkCodes(), &plan::planCodes(), &hooks::hookCodes()})
    all.insert(all.end(), list->begin(), list->end());
  for (const auto& c : cost::costCodes()) all.push_back(base::CodeInfo{c.code, c.title});
  for (const auto& c : emu::emulatorCodes()) all.push_back(base::CodeInfo{c.code, c.title});
  return all;
}

}  // namespace

TEST(Docs, CodesAreUniqueAndWellFormed) {
  std::set<std::string> seen;
  std::regex form("IPU[0-5]\\d{3}");
  for (const auto& c : allCodes()) {
    EXPECT_TRUE(std::regex_match(std::string(c.code), form)) << c.code;
    EXPECT_TRUE(seen.insert(c.code).second) << "duplicate code " << c.code;
  }
}

TEST(Docs, EveryDiagnosticIsDocumentedAndTriggeredByAScript) {
  fs::path root = test::sourceDir();
  std::string doc = read(root / "docs/diagnostics.md");
  std::string scripts;
  for (const auto& e : fs::recursive_directory_iterator(root / "tests/diagnostics"))
    if (e.path().extension() == ".ipu") scripts += read(e.path());
  // Codes about the file rather than its content, covered by tests/cli_test.sh.
  const std::set<std::string> cliOnly = {"IPU0010", "IPU0011", "IPU1216",
                                         // Emulator errors a script cannot trigger through `ipu run` (the
                                         // plan's check comes first, or the CLI supplies the missing
                                         // piece), or that need a run directory (tests/cli_test.sh), or
                                         // internal ones; the emulator's unit tests cover them.
                                         "IPU5001", "IPU5005", "IPU5007", "IPU5008", "IPU5009", "IPU5099",
                                         // needs mpirun: tests/mpi/instances_test.sh
                                         "IPU5012"};
  for (const auto& c : allCodes()) {
    EXPECT_NE(doc.find("## " + std::string(c.code)), std::string::npos) << c.code << " is not documented in docs/diagnostics.md";
    if (cliOnly.count(c.code)) continue;
    EXPECT_TRUE(scripts.find("expect-error: " + std::string(c.code)) != std::string::npos ||
                scripts.find("expect-warning: " + std::string(c.code)) != std::string::npos)
        << "no script in tests/diagnostics triggers " << c.code;
  }
}

TEST(Docs, LanguageReferenceCoversKeywordsAndFields) {
  std::string doc = read(fs::path(test::sourceDir()) / "docs/language.md");
  for (const auto& k : syntax::keywords()) EXPECT_NE(doc.find("`" + k), std::string::npos) << "keyword " << k;
  for (const check::Schema* s : check::allSchemas())
    for (const auto& f : s->fields)
      EXPECT_NE(doc.find("`" + f.name + "`"), std::string::npos) << s->kind << "." << f.name << " is not documented";
  for (const auto& v : check::contextVariables()) EXPECT_NE(doc.find("`" + v + "`"), std::string::npos) << v;
}

TEST(Docs, EveryIpuCodeBlockParses) {
  fs::path root = test::sourceDir();
  std::regex block("```ipu\\n([\\s\\S]*?)```");
  int blocks = 0;
  for (const auto& e : fs::directory_iterator(root / "docs")) {
    if (e.path().extension() != ".md") continue;
    std::string text = read(e.path());
    for (std::sregex_iterator it(text.begin(), text.end(), block), end; it != end; ++it) {
      base::SourceMap sources;
      base::Diagnostics diags;
      base::FileId f = sources.add(e.path().filename().string(), (*it)[1]);
      auto program = syntax::parse(sources, f, diags);
      EXPECT_TRUE(program != nullptr) << e.path().filename() << " has an `ipu` block that does not parse:\n" << (*it)[1];
      ++blocks;
    }
  }
  EXPECT_GT(blocks, 10);
}
