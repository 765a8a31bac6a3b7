// The one table of a mapping's settings (ir::Mapping): for each field, its
// name (the same in the language, in plan, estimate and search JSON, in
// `--fix`, and after `mapping.` in run parameters and `ipu runs --where`),
// how its values are written, its default and doc, and how it is read from
// and written to the Mapping. The schema, the resolver, `ipu search --fix`,
// the printer that writes a mapping back as script text, plan JSON and the
// run parameters all read it, so a new knob is one row here plus its physics.
//
// Rows are in plan-JSON order. Two rows are facts of the plan rather than
// settings written as such: `pipeline` (the placement's kind; the language's
// `pipeline:` field is the placement itself, resolved by the checker) and
// `pipeline_ipus` (how many IPUs that placement uses).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/ir/execution_plan.h"
#include "runtime/ir/json.h"

namespace ipu::ir {

enum class MappingField {
  Shard,
  PipelineIpus,
  Replicas,
  Phases,
  Pipeline,
  Recompute,
  OptimizerState,
  Weights,
  ReplicatedTensorSharding,
  AvailableMemoryProportion,
  BatchNormReplicas,
};

// How a field's values are written.
enum class FieldForm {
  Count,         // a whole number from 1 (`replicas: 8`)
  CountOrAll,    // a whole number from 1, or `all` (`batch_norm_replicas: all`)
  Choice,        // one of `symbols` (`recompute: every_layer`)
  Choices,       // `none`, one of `symbols`, or a list of them (`replicated_tensor_sharding: [weights, optimizer_state]`)
  Fractions,     // a share in (0, 1], or a list of them (`available_memory_proportion: [0.3, 0.6]`)
};

// A value of one field, in the terms its form uses.
struct FieldValue {
  long long count = 0;                 // Count, CountOrAll (kAll for `all`)
  std::vector<std::string> symbols;    // Choice: one; Choices: the chosen ones, in the row's symbol order
  std::vector<double> fractions;       // Fractions: one, or one per pipeline IPU
  static constexpr long long kAll = Mapping::kAllReplicas;
  bool operator==(const FieldValue& o) const { return count == o.count && symbols == o.symbols && fractions == o.fractions; }
  bool operator!=(const FieldValue& o) const { return !(*this == o); }
};

// Where a row appears besides the plan.
enum class FieldWritten {
  ByUser,      // a field of the language's `mapping` record
  ByPlacement, // set from the `pipeline:` placement (pipeline_ipus)
};

struct MappingFieldRow {
  MappingField field;
  const char* name;                  // language, JSON, --fix and run-parameter name
  FieldForm form;
  std::vector<std::string> symbols;  // Choice / Choices
  long long maxCount;                // Count / CountOrAll: upper bound
  FieldValue defaultValue;
  const char* doc;                   // one line, for the schema and docs/language.md
  FieldWritten written;
  bool jsonOnlyWhenSet;              // omitted from plan JSON at its default (keeps older plans' hashes)
  FieldValue (*get)(const Mapping&);
  void (*set)(Mapping&, const FieldValue&);
};

// Every row, in plan-JSON order.
const std::vector<MappingFieldRow>& mappingFields();
const MappingFieldRow& mappingField(MappingField f);
const MappingFieldRow* mappingFieldNamed(const std::string& name);
// The field's name (for spans and messages that name it).
inline const char* nameOf(MappingField f) { return mappingField(f).name; }

// Parses script text as written after `name:` (`8`, `all`, `streaming`,
// `[weights, optimizer_state]`, `0.6`, `[0.3, 0.6]`, `none`). On failure,
// `problem` says what the field takes.
std::optional<FieldValue> parseField(const MappingFieldRow& row, const std::string& text, std::string& problem);

// The value as script text, which parseField reads back to the same value.
std::string fieldText(const MappingFieldRow& row, const FieldValue& value);

// The value as plan JSON (a number, a string, an array).
Json fieldJson(const MappingFieldRow& row, const FieldValue& value);

// The accepted values, for messages ("a whole number from 1", "`on_chip` or `streaming`").
std::string fieldTakes(const MappingFieldRow& row);

// The settings a user writes, as `name: text` lines of a `mapping { }`
// block, in the table's order: those that differ from their defaults (all
// of them with `all = true`). The checker reads them back to `m`'s settings.
std::vector<std::string> settingLines(const Mapping& m, bool all = false);

// The mapping's settings as a JSON object, in the rows' order (the plan's
// `mapping` object after its `name`).
void writeMappingJson(const Mapping& m, Json& into);

}  // namespace ipu::ir
