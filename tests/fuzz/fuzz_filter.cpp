// Fuzz target for the filter language of `ipu runs --where` and `ipu report
// --where` (interpreter/store/filter.h): the bytes are a filter. It is parsed
// against a fixed set of runs (built-in names, parameters, metrics, tags,
// times); a filter that parses is evaluated on every run, and one that does
// not must point its caret inside the text and render. The promise: no
// filter crashes, throws or points outside itself.
//
// Run by ctest as `ipu_fuzz_filter_mutate` (tests/fuzz/mutate_main.cpp) for a
// few seconds on tests/fuzz/corpus_filter. See docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>
#include <vector>

#include "interpreter/store/filter.h"

extern const char* const kFuzzTokens[] = {
    " AND ", " OR ", " NOT ", " IN (", " NOT IN (", "(", ")", ",", "=", "==", "!=", "<>", "<", "<=", ">", ">=", "'", "\"",
    "`", "id", "name", "kind", "status", "tag", "started", "ended", "duration", "loss", "loss.min", "loss.count",
    "mapping.replicas", "phases.short.lr.peak", "phase.", "params.", "metrics.", "'2026-11-21'", "-2h", "10m", "finished",
    "run", "estimate", nullptr};

namespace {

using namespace ipu::store;

std::vector<RunRecord> runs() {
  std::vector<RunRecord> out;
  for (int i = 1; i <= 3; ++i) {
    RunRecord r;
    r.id = i;
    r.name = "tiny-" + std::to_string(i);
    r.kind = i == 3 ? RunKind::Estimate : RunKind::Run;
    r.training = "tiny";
    r.status = i == 2 ? RunStatus::Killed : RunStatus::Finished;
    r.startedAt = 1.7e9 + i * 3600;
    r.endedAt = i == 2 ? kNoTime : r.startedAt + 60 * i;
    r.host = "h" + std::to_string(i);
    r.note = i == 1 ? "a note, with 'quotes'" : "";
    r.parameters = {{"mapping.replicas", std::to_string(1 << i)}, {"phases.short.lr.peak", "0.0" + std::to_string(i)},
                    {"phases.long.lr.peak", "0.001"}, {"optimizer.kind", "lamb"}, {"loss", "param named loss"}};
    r.metrics["loss"] = MetricSummary{6.0 - i, 5.0 - i, 7.0, 100, 100};
    if (i != 3) r.metrics["eval.mlm_accuracy"] = MetricSummary{0.1 * i, 0.1, 0.1 * i, 4, 2};
    if (i == 1) r.tags = {"baseline", "quick"};
    out.push_back(r);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<RunRecord> all = runs();
  static const FieldResolver names(all);
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = Filter::parse(text, names);
  if (auto* filter = std::get_if<Filter>(&parsed)) {
    for (const auto& r : all) (void)filter->matches(r);
    return 0;
  }
  const FilterError& e = std::get<FilterError>(parsed);
  // The caret is on the text, or just past its end (a filter that stops short).
  if (e.message.empty() || e.offset > text.size() || e.length == 0 || e.offset + e.length > text.size() + 1) {
    std::fprintf(stderr, "ipu fuzz: the filter error `%s` points at %zu+%zu in a filter of %zu bytes\n", e.message.c_str(),
                 e.offset, e.length, text.size());
    std::abort();
  }
  (void)renderFilterError(text, e, "  ");
  return 0;
}
