#include "interpreter/session/session.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "interpreter/check/codes.h"
#include "interpreter/check/resolver.h"
#include "interpreter/hooks/hook_set.h"
#include "interpreter/hooks/lua_placement.h"
#include "interpreter/hooks/run_hooks.h"
#include "interpreter/plan/codes.h"
#include "interpreter/plan/expand_layers.h"
#include "interpreter/plan/planner.h"
#include "interpreter/session/declarations.h"
#include "interpreter/search/result_cache.h"
#include "interpreter/search/search.h"
#include "interpreter/syntax/codes.h"
#include "interpreter/syntax/parser.h"

namespace ipu::session {

Session::Session()
    : prelude_(&check::Prelude::get()), sources_(prelude_->sources()), searchCache_(search::cacheDirectoryFromEnvironment()) {}
Session::~Session() = default;

std::optional<base::FileId> Session::readFile(const std::string& path) {
  base::FileText file = base::readSourceFile(path);
  switch (file.status) {
    case base::FileText::Status::Ok: return sources_.add(path, std::move(file.text));
    case base::FileText::Status::Missing:
      diags_.error(syntax::code::kUnreadable, {}, "cannot read `" + path + "`: " + file.problem,
                   "check the path; scripts end in `.ipu`");
      break;
    case base::FileText::Status::NotAFile:
      diags_.error(syntax::code::kUnreadable, {}, "`" + path + "` is " + file.problem + ", not a script");
      break;
    case base::FileText::Status::TooLarge: {
      char size[32];
      std::snprintf(size, sizeof size, "%.1f", static_cast<double>(file.bytes) / (1 << 20));
      diags_.error(syntax::code::kFileTooLarge, {},
                   "`" + path + "` is " + size + " MiB (" + std::to_string(file.bytes) + " bytes); the limit is 8 MiB",
                   "split it into modules and `import` them");
      break;
    }
    case base::FileText::Status::Unreadable:
      diags_.error(syntax::code::kUnreadable, {}, "cannot read `" + path + "`: " + file.problem);
      break;
  }
  return std::nullopt;
}

namespace {
std::string canonicalPath(const std::string& path) {
  std::error_code ec;
  std::string c = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec).string();
  return ec ? path : c;
}
}  // namespace

void Session::update(const std::string& path, std::string text) { texts_[canonicalPath(path)] = std::move(text); }
void Session::forget(const std::string& path) { texts_.erase(canonicalPath(path)); }

std::shared_ptr<const Snapshot> Session::snapshot(const std::string& path) {
  base::FileId root = base::kNoFile;
  if (auto it = texts_.find(canonicalPath(path)); it != texts_.end()) {
    // The file as last given, under the same id while its text is the same.
    for (base::FileId id = static_cast<base::FileId>(sources_.size()); id-- > 0;)
      if (sources_.file(id).path() == path) {
        if (sources_.file(id).text() == it->second) root = id;
        break;
      }
    if (root == base::kNoFile) root = sources_.add(path, it->second);
  } else if (auto id = readFile(path)) {
    root = *id;
  } else {
    return nullptr;
  }
  return checkSnapshot(sources_, moduleCache_, texts_, root);
}

base::FileId Session::addSource(std::string name, std::string text) { return sources_.add(std::move(name), std::move(text)); }

std::optional<check::WrittenOverride> Session::readOverride(const std::string& path, const std::string& value) {
  const base::FileId id = sources_.add("--set " + path, value);
  const std::size_t before = diags_.errorCount();
  syntax::ExprPtr e = syntax::parseValue(sources_, id, diags_);
  if (e == nullptr || diags_.errorCount() != before) return std::nullopt;
  check::WrittenOverride w;
  w.path = path;
  w.pathAt = base::Span{id, 0, static_cast<std::uint32_t>(value.size())};
  w.value = std::shared_ptr<const syntax::Expr>(std::move(e));
  return w;
}

const check::CheckedProgram* Session::check(base::FileId file) {
  placement_.reset();
  hooks_.reset();
  layerCosts_.reset();  // keyed by the old checker's model values
  layerExpansions_.reset();
  root_ = file;
  checker_ = std::make_unique<check::Checker>(sources_, diags_, prelude_, &moduleCache_);
  checker_->loader().setTexts(&texts_);
  program_ = checker_->checkFile(file, overrides_ ? &*overrides_ : nullptr);
  if (program_) {
    // Loading runs each hook's top level (in its sandbox) and resolves the
    // program's `lua NAME` functions.
    hooks_ = std::make_unique<hooks::HookSet>(*program_, sources_, diags_, hookPrint_);
    placement_ = std::make_unique<hooks::LuaPlacement>(*hooks_);
  }
  if (diags_.hasErrors()) return nullptr;
  if (searches_ == Searches::Run) resolveSearches();
  if (diags_.hasErrors()) return nullptr;
  return program_.get();
}

// Mappings declared with `search { ... }` become, for each phase that uses
// them, the fastest mapping that fits that phase (interpreter/search); what
// was chosen is reported as a note.
void Session::resolveSearches() {
  for (auto& run : program_->runs)
    for (auto& phase : run.phases) {
      if (phase.mapping == nullptr || !phase.mapping->search) continue;
      const check::MappingSpec& m = *phase.mapping;
      const check::SearchSpec& spec = *m.search;
      const base::Span at = spec.span;
      if (phase.batch.derived == ir::DerivedBatch::GlobalBatch) {
        diags_.error(plan::code::kSearchNeedsGlobalBatch, phase.span,
                     "phase `" + phase.name + "` uses `" + m.name + "`, whose mapping is searched, but does not give its `global_batch`",
                     "give `global_batch` and `micro_batch` (a starting point): the search keeps the global batch and "
                     "chooses micro batch, accumulation and replicas");
        continue;
      }
      search::Options o = search::optionsOf(m);
      o.top = 1;
      // Searched again only when something it depends on changed (result_cache.h).
      search::PhaseResult r = search::searchPhaseCached(phase, checker_->evaluator(), sources_, o, searchCache_);
      if (!r.error.empty()) {
        diags_.error(plan::code::kSearchNothingFits, at, "the search of `" + m.name + "` for phase `" + phase.name + "` cannot run: " + r.error);
        continue;
      }
      if (r.top.empty()) {
        std::string why;
        if (r.leastMemory) {
          const auto& c = *r.leastMemory;
          char buf[300];
          if (c.streamingOver() && !c.inProcessorOver)
            std::snprintf(buf, sizeof buf,
                          "; Streaming Memory binds: the closest mapping found keeps %.1f MiB in Streaming Memory on IPU %d, "
                          "more than its share %.1f MiB",
                          c.streamingBytes / (1 << 20), c.streamingIpu, c.streamingCapacityBytes / (1 << 20));
          else
            std::snprintf(buf, sizeof buf, "; the closest mapping found needs %.1f MiB of %.1f MiB on IPU %d (%s: %.1f MiB)",
                          c.peakMemoryBytes / (1 << 20), c.capacityBytes / (1 << 20), c.peakIpu, c.peakComponent.c_str(),
                          c.peakComponentBytes / (1 << 20));
          why = buf;
          if (c.streamingOver() && c.inProcessorOver) {
            std::snprintf(buf, sizeof buf, ", and %.1f MiB of its %.1f MiB share of Streaming Memory",
                          c.streamingBytes / (1 << 20), c.streamingCapacityBytes / (1 << 20));
            why += buf;
          }
        }
        std::string relax;
        if (r.maxIpus < r.podIpus) relax = "raise `max_ipus` (`" + m.pod.name + "` has " + std::to_string(r.podIpus) + " IPUs); or ";
        if (spec.headroom > 0) relax += "lower `headroom`; or ";
        if (o.fixed.any())
          relax += "remove the settings written beside `search` (they stay fixed); or ";
        relax += "use a pod with more IPUs";
        diags_.error(plan::code::kSearchNothingFits, at,
                     "no mapping of `" + m.model->name + "` on `" + m.pod.name + "` fits phase `" + phase.name + "` (" +
                         std::to_string(r.counts.space) + " candidates)" + why,
                     relax);
        continue;
      }
      const search::Candidate& best = r.top.front();
      if (!search::applyCandidate(phase, checker_->evaluator(), best)) continue;
      char buf[400];
      std::snprintf(buf, sizeof buf,
                    "for phase `%s`, `%s` is t %d x p %d x r %d, micro batch %lld x accumulation %lld%s%s%s%s%s: "
                    "%.0f samples/s predicted (best by %s of %lld candidates)",
                    phase.name.c_str(), m.name.c_str(), best.shard, best.pipeline, best.replicas, best.microBatch,
                    best.gradientAccumulation,
                    best.recompute != ir::Recompute::None ? (std::string(", recompute ") + ir::name(best.recompute)).c_str() : "",
                    best.optimizerStateStreaming ? ", optimizer state streaming" : "",
                    best.phases > 1 ? (", " + std::to_string(best.phases) + " phases").c_str() : "",
                    best.weightsStreaming ? ", weights streaming" : "",
                    best.rtsOptimizerState && best.rtsWeights ? ", RTS of weights and optimizer state"
                    : best.rtsOptimizerState                  ? ", RTS of optimizer state"
                    : best.rtsWeights                         ? ", RTS of weights"
                                                              : "",
                    best.samplesPerSecond, search::name(o.objective),
                    r.counts.space);
      base::Diagnostic note;
      note.severity = base::Severity::Note;
      note.code = plan::code::kSearchChose;
      note.span = at;
      note.message = buf;
      note.help = "`ipu search` shows the runners-up; `ipu search --apply` writes the answer into the script";
      diags_.add(std::move(note));
    }
}

const ir::ExecutionPlan* Session::plan(base::FileId file, bool requireRuns) {
  const check::CheckedProgram* program = check(file);
  if (program == nullptr) return nullptr;
  if (requireRuns && program->runs.empty()) {
    diags_.error(check::code::kNothingToRun, {}, "nothing to plan: `" + sources_.file(file).path() + "` declares no training",
                 "declare `training NAME { mapping: ..., phase ... }`; `run NAME` picks which ones to plan");
    return nullptr;
  }
  plan_ = std::make_unique<ir::ExecutionPlan>(plan::planProgram(*program, sources_, diags_, placement_.get()));
  // What `ipu run` would refuse about the declarations: an error for a run,
  // else a warning unless estimation cannot do without it (declarations.h).
  declarationErrors_ = reportDeclarationProblems(*plan_, purpose_, diags_, [this](const ir::SourceRef& r) { return spanOf(r); });
  return plan_.get();
}

}  // namespace ipu::session

namespace ipu::session {

base::Span Session::spanOf(const ir::SourceRef& ref) const {
  for (base::FileId id = 0; id < sources_.size(); ++id) {
    const base::SourceFile& f = sources_.file(id);
    if (f.path() != ref.file || ref.line == 0) continue;
    std::uint32_t begin = f.lineStart(ref.line);
    std::string_view line = f.lineText(ref.line);
    std::uint32_t off = begin, col = 1;
    while (col < ref.column && off < begin + line.size()) {
      ++off;
      while (off < begin + line.size() && (static_cast<unsigned char>(f.text()[off]) & 0xC0) == 0x80) ++off;
      ++col;
    }
    std::uint32_t end = off;
    while (end < begin + line.size() && (std::isalnum(static_cast<unsigned char>(f.text()[end])) || f.text()[end] == '_')) ++end;
    return base::Span{id, off, std::max(end, off + 1)};
  }
  return {};
}

const cost::Estimate* Session::estimate(base::FileId file) {
  const ir::ExecutionPlan* p = plan(file, /*requireRuns=*/true);
  // No figures for what cannot be priced (a model without layers has no step time).
  if (p == nullptr || declarationErrors_ > 0) return nullptr;
  return estimatePlan(*p);
}

const cost::Estimate* Session::estimatePlan(const ir::ExecutionPlan& plan) {
  const ir::ExecutionPlan* p = &plan;
  estimate_ = std::make_unique<cost::Estimate>(cost::estimate(*p, hosting_));
  // One diagnostic per problem and place (several phases may hit the same one).
  for (const auto& pr : estimate_->problems) diags_.error(pr.code, spanOf(pr.where), pr.message, pr.help);
  // Hooks run under the estimate too, on its timing (runtime/cost/estimate_steps.h).
  for (std::size_t i = 0; i < p->runs.size() && hooks_ != nullptr && !diags_.hasErrors(); ++i) {
    hooks::RunHooks runHooks(*hooks_, p->runs[i], train::Source::Estimate);
    train::Policies policies = runHooks.policies();
    if (!runHooks.wantsEvents() && !policies.learningRate) continue;
    estimate_->runs[i].hooks = cost::stepThrough(p->runs[i], estimate_->runs[i], runHooks, policies);
  }
  return estimate_.get();
}

}  // namespace ipu::session
