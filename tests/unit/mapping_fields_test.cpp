// The table of mapping fields (runtime/ir/mapping_fields.h) is the one place
// a mapping setting is named, parsed, printed and written to JSON. Each
// field goes round every path that reads the table: script text -> checker
// -> value -> script text -> value; value -> plan JSON and run parameters
// under the same name -> `ipu runs --where` finds it; `--fix` takes it.
#include <gtest/gtest.h>

#include <set>

#include "interpreter/check/schema.h"
#include "interpreter/runner/run_parameters.h"
#include "interpreter/search/search.h"
#include "interpreter/store/filter.h"
#include "runtime/ir/mapping_fields.h"
#include "tests/unit/test_support.h"

namespace ipu {
namespace {

using ir::FieldForm;
using ir::FieldValue;
using ir::MappingField;

// Values of each field other than its default, as script text: the table's
// forms are all exercised (a list, `all`, a percentage).
std::vector<std::string> samplesOf(const ir::MappingFieldRow& row) {
  switch (row.field) {
    case MappingField::Shard: return {"2"};
    case MappingField::PipelineIpus: return {"2"};
    case MappingField::Replicas: return {"4", "2"};
    case MappingField::Phases: return {"2"};
    case MappingField::Pipeline: return {"balanced", "explicit"};
    case MappingField::Recompute: return {"every_layer", "stage_inputs"};
    case MappingField::OptimizerState: return {"streaming"};
    case MappingField::Weights: return {"streaming"};
    case MappingField::ReplicatedTensorSharding: return {"weights", "optimizer_state", "[weights, optimizer_state]"};
    case MappingField::AvailableMemoryProportion: return {"0.3", "45%", "0.125"};
    case MappingField::BatchNormReplicas: return {"2", "all"};
  }
  return {};
}

TEST(MappingFields, EveryFieldHasOneRowWithAUniqueName) {
  std::set<std::string> names;
  std::set<MappingField> fields;
  for (const auto& row : ir::mappingFields()) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    EXPECT_TRUE(fields.insert(row.field).second) << row.name;
    EXPECT_EQ(&ir::mappingField(row.field), &row);
    EXPECT_EQ(ir::mappingFieldNamed(row.name), &row);
    EXPECT_FALSE(samplesOf(row).empty()) << row.name;
  }
  EXPECT_EQ(fields.size(), static_cast<std::size_t>(MappingField::BatchNormReplicas) + 1);
  EXPECT_EQ(ir::mappingFieldNamed("rts"), nullptr);
}

TEST(MappingFields, DefaultsAreAFreshMappingsSettings) {
  ir::Mapping fresh;
  fresh.availableMemoryProportion = {0.6};  // the resolver's default; a bare ir::Mapping has none
  for (const auto& row : ir::mappingFields()) EXPECT_EQ(row.get(fresh), row.defaultValue) << row.name;
}

TEST(MappingFields, TextParsesPrintsAndSetsBackToTheSameValue) {
  for (const auto& row : ir::mappingFields())
    for (const auto& text : samplesOf(row)) {
      std::string problem;
      auto v = ir::parseField(row, text, problem);
      ASSERT_TRUE(v) << row.name << ": " << text << ": " << problem;
      EXPECT_NE(*v, row.defaultValue) << row.name << ": " << text;
      const std::string printed = ir::fieldText(row, *v);
      auto again = ir::parseField(row, printed, problem);
      ASSERT_TRUE(again) << printed;
      EXPECT_EQ(*again, *v) << row.name << ": " << text << " printed as " << printed;
      ir::Mapping m;
      row.set(m, *v);
      EXPECT_EQ(row.get(m), *v) << row.name;
    }
}

TEST(MappingFields, WrongTextIsRefusedSayingWhatTheFieldTakes) {
  const std::vector<std::pair<MappingField, std::string>> wrong = {
      {MappingField::Shard, "0"},          {MappingField::Shard, "two"},
      {MappingField::Replicas, "1048577"}, {MappingField::Recompute, "always"},
      {MappingField::Weights, "on-chip"},  {MappingField::ReplicatedTensorSharding, "[weights, weights]"},
      {MappingField::ReplicatedTensorSharding, "[weights, bias]"},
      {MappingField::AvailableMemoryProportion, "0"}, {MappingField::AvailableMemoryProportion, "1.5"},
      {MappingField::AvailableMemoryProportion, "[0.5,]"}, {MappingField::BatchNormReplicas, "some"}};
  for (const auto& [field, text] : wrong) {
    const auto& row = ir::mappingField(field);
    std::string problem;
    EXPECT_FALSE(ir::parseField(row, text, problem)) << row.name << ": " << text;
    EXPECT_NE(problem.find(std::string("`") + row.name + "` takes"), std::string::npos) << problem;
    EXPECT_NE(problem.find(text), std::string::npos) << problem;
  }
}

// The schema's mapping fields are the table's user-written rows, with its docs.
TEST(MappingFields, TheSchemaReadsTheTable) {
  const check::Schema* schema = check::schemaFor("mapping");
  ASSERT_NE(schema, nullptr);
  for (const auto& row : ir::mappingFields()) {
    const check::Field* f = schema->find(row.name);
    if (row.written == ir::FieldWritten::ByPlacement && row.field != MappingField::Pipeline) {
      EXPECT_EQ(f, nullptr) << row.name << " is set by the placement, not written";
      continue;
    }
    ASSERT_NE(f, nullptr) << row.name;
    EXPECT_EQ(f->doc, row.doc);
  }
}

// A script with a mapping whose settings are written by settingLines: the
// checker reads back exactly the value written, field by field, into the plan.
const char* kScript = R"(import "std/pods"
import "std/models/bert"
chip small_chip = GC200 with { tiles: 16, memory: 64 MB, code_base: 1 MB }
machine small_machine = M2000 with { chip: small_chip, ipus: 4, streaming_memory: 1 GB }
pod small_pod {
  machine: small_machine
  machines: 4
}
model tiny = bert(layers: 4, hidden: 64, heads: 2, ffn: 256, vocab: 1000, positions: 128)
mapping p for tiny on small_pod {
  pipeline: balanced(2)
SETTINGS}
precision full {
  compute: fp32
}
training t {
  mapping: p
  precision: full
  optimizer: lamb(weight_decay: 0.01)
  phase only {
    seq_len: 32
    masked_tokens: 5
    micro_batch: 2
    global_batch: 64
    steps: 10
    lr: 0.001
  }
}
)";

ir::Mapping checkedMapping(const ir::Mapping& settings, std::string* rendered) {
  std::string lines;
  for (const auto& l : ir::settingLines(settings, /*all=*/true)) lines += "  " + l + "\n";
  std::string text = kScript;
  text.replace(text.find("SETTINGS"), 8, lines);
  auto out = test::runText(text);
  *rendered = out.rendered() + "\n" + text;
  if (out.plan == nullptr || out.plan->runs.empty() || out.plan->runs[0].phases.empty()) {
    ADD_FAILURE() << "not planned: " << *rendered;
    return {};
  }
  return out.plan->runs[0].phases[0].mapping;
}

TEST(MappingFields, ScriptToValueToScriptTextToTheSameValue) {
  for (const auto& row : ir::mappingFields()) {
    if (row.written != ir::FieldWritten::ByUser) continue;
    for (const auto& text : samplesOf(row)) {
      ir::Mapping m;
      m.replicas = 4;  // room for RTS and batch-norm groups
      m.availableMemoryProportion = {0.6};
      std::string problem;
      auto v = ir::parseField(row, text, problem);
      ASSERT_TRUE(v) << problem;
      row.set(m, *v);
      std::string rendered;
      ir::Mapping back = checkedMapping(m, &rendered);
      for (const auto& other : ir::mappingFields()) {
        if (other.written != ir::FieldWritten::ByUser) continue;
        EXPECT_EQ(other.get(back), other.get(m)) << row.name << " = " << text << ": " << other.name << "\n" << rendered;
      }
    }
  }
}

// Plan JSON and run parameters name every field as the table does, and the
// filter of `ipu runs --where` accepts that name with the printed value.
TEST(MappingFields, PlanJsonRunParametersAndFiltersUseTheTablesNames) {
  ir::Mapping m;
  m.replicas = 4;
  m.availableMemoryProportion = {0.6};
  m.recompute = ir::Recompute::EveryLayer;
  m.optimizerStateStreaming = true;
  m.rtsOptimizerState = true;
  m.batchNormReplicas = 2;
  std::string rendered;
  (void)checkedMapping(m, &rendered);
  std::string text = kScript;
  std::string lines;
  for (const auto& l : ir::settingLines(m)) lines += "  " + l + "\n";
  text.replace(text.find("SETTINGS"), 8, lines);
  auto out = test::runText(text);
  ASSERT_NE(out.plan, nullptr) << out.rendered();
  const ir::PhasePlan& phase = out.plan->runs.at(0).phases.at(0);
  const ir::Json plan = ir::toJson(*out.plan);
  auto params = runner::runParameters(out.plan->runs.at(0));
  store::RunRecord run;
  run.parameters = params;
  store::FieldResolver names({run});
  for (const auto& row : ir::mappingFields()) {
    const FieldValue v = row.get(phase.mapping);
    const auto* j = test::jsonAt(plan, std::string("runs.0.phases.0.mapping.") + row.name);
    if (!row.jsonOnlyWhenSet || v != row.defaultValue) {
      ASSERT_NE(j, nullptr) << row.name;
      EXPECT_EQ(*j, static_cast<const nlohmann::ordered_json&>(ir::fieldJson(row, v))) << row.name;
    }
    const std::string key = std::string("mapping.") + row.name;
    ASSERT_EQ(params.count(key), 1u) << key;
    EXPECT_EQ(params.at(key), ir::fieldText(row, v)) << key;
    auto filter = store::Filter::parse(key + " = '" + ir::fieldText(row, v) + "'", names);
    ASSERT_TRUE(std::holds_alternative<store::Filter>(filter)) << key;
    EXPECT_TRUE(std::get<store::Filter>(filter).matches(run)) << key;
  }
  EXPECT_EQ(params.at("mapping.optimizer_state"), "streaming");
  EXPECT_EQ(params.at("mapping.replicated_tensor_sharding"), "optimizer_state");
  EXPECT_EQ(params.count("mapping.optimizer_state_streaming"), 0u);
}

TEST(MappingFields, FixTakesEveryWrittenFieldThroughTheTable) {
  for (const auto& row : ir::mappingFields()) {
    if (row.written != ir::FieldWritten::ByUser) continue;
    search::Fixed f;
    const std::string text = samplesOf(row).front();
    EXPECT_EQ(search::applyFix(f, std::string(row.name) + "=" + text), std::nullopt) << row.name;
    EXPECT_TRUE(f.has(row.field));
    std::string problem;
    EXPECT_EQ(row.get(f.values), *ir::parseField(row, text, problem)) << row.name;
  }
  search::Fixed f;
  EXPECT_EQ(search::applyFix(f, "pipeline=4"), std::nullopt);
  EXPECT_EQ(f.values.pipelineIpus, 4);
  EXPECT_EQ(search::applyFix(f, "rts=both"), std::nullopt);
  EXPECT_TRUE(f.values.rtsWeights && f.values.rtsOptimizerState);
  // The same value twice is harmless; another value is a contradiction.
  EXPECT_EQ(search::applyFix(f, "replicas=8"), std::nullopt);
  EXPECT_EQ(search::applyFix(f, "replicas=8"), std::nullopt);
  auto twice = search::applyFix(f, "replicas=4");
  ASSERT_TRUE(twice);
  EXPECT_NE(twice->find("fixed twice, to 8 and to 4"), std::string::npos) << *twice;
  auto wrong = search::applyFix(f, "recompute=sometimes");
  ASSERT_TRUE(wrong);
  EXPECT_NE(wrong->find("`recompute` takes `none`, `every_layer` or `stage_inputs`"), std::string::npos) << *wrong;
  auto unknown = search::applyFix(f, "sharding=2");
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->find("available_memory_proportion"), std::string::npos) << *unknown;
}

// A value of `--where` that is shared by no phase is named per phase; the
// help says so instead of suggesting an unrelated near name.
TEST(MappingFields, FilterHelpNamesPerPhaseParameters) {
  store::RunRecord run;
  run.parameters = {{"phases.short.lr.peak", "0.02"}, {"phases.long.lr.peak", "0.001"}, {"lr.decay", "linear"},
                    {"phases.short.lr.base", "0"}};
  store::FieldResolver names({run});
  EXPECT_NE(names.unknownNameHelp("lr.peak").find("`phases.long.lr.peak`, `phases.short.lr.peak`"), std::string::npos)
      << names.unknownNameHelp("lr.peak");
  EXPECT_NE(names.unknownNameHelp("phase.short.lr").find("`phases.short.lr` is a group"), std::string::npos)
      << names.unknownNameHelp("phase.short.lr");
  EXPECT_NE(names.unknownNameHelp("phase.short.lr.peak").find("did you mean `phases.short.lr.peak`?"), std::string::npos);
}

}  // namespace
}  // namespace ipu
