// The checked program: what `ipu check` proves and `ipu plan` consumes.
// Everything here is resolved and typed: models expanded into layers with
// their costs for each phase, mappings with their placement resolved to layer
// indices, hardware as plain data, batch figures derived. The plan layer never
// evaluates an expression; it only reads these specs.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/base/source.h"
#include "interpreter/check/model.h"
#include "interpreter/sweep/space.h"
#include "runtime/ir/execution_plan.h"
#include "runtime/model/hardware.h"

namespace ipu::check {

struct ModelSpec {
  std::string name;
  Span span;
  std::shared_ptr<const ModelStructure> structure;  // layer names, groups
  std::vector<LayerFacts> layers;                   // structural facts (parameters; no phase costs)
  double parameters = 0;                            // unique: tied weights counted once
  std::string family;
};

struct StageSpec {
  long long ipu = 0;
  Span span;
  std::vector<int> leaves;  // indices into the model's layers
};

// What the mapping search optimises (docs/search.md, "The objectives").
enum class SearchObjective { Throughput, TimeToTrain, ThroughputPerIpu };
inline constexpr SearchObjective kSearchObjectives[] = {SearchObjective::Throughput, SearchObjective::TimeToTrain,
                                                        SearchObjective::ThroughputPerIpu};
// Its name in scripts, options and JSON.
inline const char* nameOf(SearchObjective o) {
  switch (o) {
    case SearchObjective::Throughput: return "throughput";
    case SearchObjective::TimeToTrain: return "time_to_train";
    case SearchObjective::ThroughputPerIpu: return "throughput_per_ipu";
  }
  return "throughput";
}

// `search { ... }` in a mapping: the mapping is chosen by the mapping search
// for each phase that uses it (the session runs it after checking).
struct SearchSpec {
  SearchObjective objective = SearchObjective::Throughput;
  int maxIpus = 0;                       // 0: the pod's
  double headroom = 0;
  Span span;
};

struct MappingSpec {
  std::string name;
  Span span;
  std::map<std::string, Span> fieldSpans;  // where each field was written (for plan diagnostics)
  std::shared_ptr<const ModelSpec> model;
  hw::Pod pod;
  using PipelineKind = ir::PipelineKind;
  PipelineKind pipelineKind = PipelineKind::Single;  // as written; mapping.pipelineKind is the same
  std::vector<StageSpec> stages;  // Explicit: in the order written
  int pipelineIpus = 1;           // p
  Span pipelineSpan;              // where the `pipeline:` value was written (none when not written)
  std::string luaFunction;
  bool placementErrors = false;   // the pipeline had errors: checks that build on it are skipped
  ir::Mapping mapping;            // t, r, phases, recompute, offload, RTS, AMP
  std::optional<SearchSpec> search;  // chosen by a search (the fields written beside it stay fixed)
  Span spanOf(const std::string& field) const;
};

struct HookSpec {
  std::string name;
  Span span;
  bool file = false;        // `lua file "x.lua"`
  std::string path;         // resolved path for file hooks
  std::string source;       // Lua source text (inline, or the file's contents)
  Span sourceSpan;          // where inline source starts, for line mapping
};

// A Lua function named by `lua NAME` where the language expects a function:
// which hook defines it is known only once the hooks' code has run (the
// hooks layer resolves it).
struct LuaFunctionRef {
  enum class Role { Placement, LearningRate, LossScale } role = Role::Placement;
  std::string name;
  Span span;
};

struct PhaseSpec {
  std::string name;
  Span span;
  std::string from;
  Span fromSpan;
  std::shared_ptr<const ModelSpec> model;
  std::shared_ptr<const MappingSpec> mapping;
  ir::Precision precision;
  ir::Optimizer optimizer;
  ir::LrSchedule lr;
  ir::Dataset dataset;
  ir::Batch batch;
  long long seqLen = 0, maskedTokens = 0, imageSize = 0, steps = 0;
  double labelSmoothing = 0;
  double epochs = 0;
  std::string software;            // the framework and SDK it runs on ("" when unstated)
  long long deviceIterations = 1;  // optimizer steps per round trip to the host
  // The model's layers costed for this phase (shared: variants with the same
  // micro batch and shapes reuse them, see LayerCostCache).
  std::shared_ptr<const std::vector<LayerFacts>> layers = std::make_shared<std::vector<LayerFacts>>();
  // What re-deriving the phase for a mapping variant needs (Resolver::rederive):
  // the model's closure and the learning rate as written.
  std::shared_ptr<const ModelValue> modelValue;
  Value lrValue;
  Span lrSpan;                     // where `lr` was written (its `lua NAME` for a Lua schedule)
  Span lossScaleSpan;              // where the precision's `loss_scale` was written
};

struct TrainingSpec {
  std::string name;
  Span span;
  long long seed = 0;
  std::vector<PhaseSpec> phases;
  std::vector<std::string> hooks;
};

struct CheckedProgram {
  std::vector<LuaFunctionRef> luaFunctions;  // every `lua NAME` of the runs and mappings, once per name and role
  std::vector<std::string> hooksInTrainings; // hooks some training of the script lists in `hooks:`
  std::vector<TrainingSpec> runs;     // `run` statements in order (or every training when there are none)
  bool implicitRuns = false;          // true when there were no `run` statements
  std::vector<std::shared_ptr<const MappingSpec>> mappings;  // every mapping of the script, checked
  std::vector<HookSpec> hooks;        // every hook of the script
  std::vector<sweep::SweepSpec> sweeps;  // the script's `sweep` declarations, checked (sweeps.h)
};

}  // namespace ipu::check
