// Models as layer stacks. A model value is a closure; expanding it walks its
// body (`layer`, `repeat`, nested models) and yields the leaves: layers named
// by path (`encoder[3].attention`). Expanding in a phase's context evaluates
// each leaf's definition into numbers: parameters, FLOPs by kind of work,
// activation sizes, code. The model's shape (names, repeat counts) may not
// depend on the phase; its costs do.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "interpreter/check/evaluator.h"
#include "interpreter/check/value.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::check {

struct ModelStructure {
  struct Leaf {
    std::vector<PathPart> parts;
    std::string path;
    Value layer;  // ValueKind::Layer
    Span span;    // the `layer`/`repeat` member that made it
  };
  struct Group {
    std::vector<PathPart> parts;
    long long count = -1;  // elements of a `repeat`, or -1 for a named nested model
  };
  std::string name;
  std::vector<Leaf> leaves;
  std::vector<Group> groups;
  std::vector<std::pair<std::string, Value>> fields;  // model-level fields (`family`, `doc`)

  // Leaves under a path prefix; a prefix part without index matches any index.
  std::vector<int> leavesUnder(const std::vector<PathPart>& prefix) const;
  // Indexes the leaves by their first path part, for leavesUnder (a stage
  // names tens of prefixes of a model of hundreds of leaves).
  void index();
  const Group* group(const std::vector<PathPart>& parts) const;
  std::vector<std::string> childNames(const std::vector<PathPart>& prefix) const;
  int leafIndex(const std::string& path) const;
  // Compact names for a set of leaves: "embedding, encoder[0..3], mlm_head".
  std::string describe(const std::vector<int>& leafIndices) const;

 private:
  // The leaves whose first part is (name, index), [first, last); leaves of a
  // member are contiguous. Empty until index().
  struct Run {
    std::string name;
    long long index;
    int first, last;
  };
  std::vector<Run> runs_;
  std::map<std::string, std::pair<std::size_t, std::size_t>> runsOf_;  // name -> its runs [first, last)
};

struct LayerFacts {
  std::string path;
  std::vector<PathPart> parts;
  std::string op;
  std::string definition;
  Span span;          // the member in the model body
  Span definitionSpan;
  double params = 0;
  bool paramsUnknown = false;  // `params` did not evaluate (it used an unset phase variable)
  std::string tiedTo;
  double tiedParams = 0;
  bool shardable = true;
  ir::Flops forward, backward;
  double activations = 0, input = 0, output = 0, workspace = 0, codeBytes = 0, ops = 1;
  std::vector<ir::Attribute> attributes;
};

// Expand a model's structure in `ctx` (errors reported through `ev`).
std::shared_ptr<ModelStructure> expandModel(Evaluator& ev, const ModelValue& model, const PhaseContext& ctx);
// Leaves that call the same layer definition, from the same scope, with the
// same scalar arguments, evaluate to the same facts in one phase context
// (BERT-Large's 24 encoders are two distinct layers): a memo, valid for one
// `ctx`, keeps the first evaluation. A leaf whose evaluation reported
// anything is never kept, so every leaf still reports its own diagnostics.
class LayerFactsMemo {
 public:
  const LayerFacts* find(const LayerValue& layer) const;
  void keep(const LayerValue& layer, const LayerFacts& facts);

 private:
  struct Entry {
    const LayerValue* layer;  // kept alive by the structure being evaluated
    LayerFacts facts;
  };
  std::vector<Entry> entries_;
};

// Evaluate one leaf in `ctx` (with `memo`, one kept for this `ctx` only).
LayerFacts layerFacts(Evaluator& ev, const ModelStructure::Leaf& leaf, const PhaseContext& ctx,
                      LayerFactsMemo* memo = nullptr);

// Upper bound on leaves per model; far above GPT-3's 195.
inline constexpr std::size_t kMaxLayers = 20000;

}  // namespace ipu::check
