// libFuzzer target for the front end: the bytes are a `.ipu` script. It runs
// everything `ipu plan` runs (parse, import resolution, check, Lua hook
// validation, planning) and checks the formatter: whatever parses must print
// to text that parses back to the same tree. The promise under test is that no
// input crashes, hangs or exhausts memory; every problem is a diagnostic.
//
// Built two ways (tests/CMakeLists.txt): with clang and -fsanitize=fuzzer as
// `ipu_fuzz_frontend` (IPU_FUZZ=ON), and with any compiler as
// `ipu_fuzz_replay`, which adds tests/fuzz/replay_main.cpp and replays the
// corpus in the normal test suite. See docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <sstream>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/render.h"
#include "interpreter/base/terminal.h"
#include "interpreter/report/plan_report.h"
#include "interpreter/session/session.h"
#include "interpreter/syntax/parser.h"
#include "interpreter/syntax/printer.h"

namespace {

// The script's name. Relative imports and `lua file` hooks resolve against its
// directory, which does not normally exist, so they fail with a diagnostic
// instead of reading whatever happens to be on the fuzzing machine.
constexpr const char* kScriptPath = "/tmp/fuzz/input.ipu";

[[noreturn]] void formatterBug(const char* what, const std::string& original, const std::string& formatted,
                               const std::string& before, const std::string& after) {
  std::fprintf(stderr,
               "ipu fuzz: FORMATTER BUG: %s\n"
               "--- input ---\n%s\n--- formatted ---\n%s\n--- sexpr(input) ---\n%s\n--- sexpr(formatted) ---\n%s\n",
               what, original.c_str(), formatted.c_str(), before.c_str(), after.c_str());
  std::abort();
}

// print -> parse must succeed and give the same tree.
void checkRoundTrip(const ipu::syntax::Program& program, const ipu::base::SourceMap* sources,
                    const std::string& original) {
  const std::string formatted = ipu::syntax::print(program, sources);
  const std::string before = ipu::syntax::toSExpr(program);
  ipu::base::SourceMap again;
  ipu::base::FileId id = again.add(kScriptPath, formatted);
  ipu::base::Diagnostics diags;
  std::unique_ptr<ipu::syntax::Program> reparsed = ipu::syntax::parse(again, id, diags);
  if (!reparsed) {
    std::string messages;
    for (const auto& d : diags.all()) messages += d.code + ": " + d.message + "\n";
    formatterBug(sources != nullptr ? "formatted text (with comments) does not parse"
                                    : "formatted text (without comments) does not parse",
                 original, formatted, before, messages);
  }
  const std::string after = ipu::syntax::toSExpr(*reparsed);
  if (after != before)
    formatterBug(sources != nullptr ? "formatting (with comments) changes the tree"
                                    : "formatting (without comments) changes the tree",
                 original, formatted, before, after);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  // The whole pipeline, as `ipu plan` runs it, including what it prints: the
  // diagnostics (human and JSON) and the plan (report and JSON).
  {
    ipu::session::Session session;
    ipu::base::FileId file = session.addSource(kScriptPath, text);
    const ipu::ir::ExecutionPlan* plan = session.plan(file, /*requireRuns=*/false);
    std::ostringstream sink;
    for (const auto& d : session.diagnostics().all())
      ipu::base::renderHuman(sink, d, session.sources(), ipu::base::Painter(false));
    sink << ipu::base::summaryLine(session.diagnostics(), ipu::base::Painter(false));
    sink << ipu::base::toJson(session.diagnostics(), session.sources()).dump();
    if (plan != nullptr) {
      ipu::report::printPlanReport(sink, *plan, ipu::base::Painter(false));
      sink << ipu::ir::toJson(*plan).dump();
    }
  }

  // The formatter, as `ipu fmt` runs it: with the source map (comments and
  // blank lines kept) and without (the REPL's echo).
  {
    ipu::base::SourceMap sources;
    ipu::base::FileId file = sources.add(kScriptPath, text);
    ipu::base::Diagnostics diags;
    std::unique_ptr<ipu::syntax::Program> program = ipu::syntax::parse(sources, file, diags);
    if (program) {
      checkRoundTrip(*program, &sources, text);
      checkRoundTrip(*program, nullptr, text);
    }
  }
  return 0;
}
