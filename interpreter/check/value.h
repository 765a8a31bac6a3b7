// Values of the `.ipu` language as the evaluator computes them.
//
// The language is declarative and small, so a value is one tagged struct
// rather than a class hierarchy: numbers carry a unit dimension; records are
// typed by their declaration kind (`chip`, `mapping`, ...) and validated
// against the schemas in schema.h; models and layers are closures (their
// definition plus the scope their arguments were bound in), because what a
// layer costs depends on the phase's micro batch and sequence length, which
// are only known when a training phase expands the model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "interpreter/base/source.h"
#include "interpreter/check/units.h"
#include "interpreter/syntax/ast.h"
#include "runtime/ir/kinds.h"

namespace ipu::check {

using base::Span;
class Scope;
using ScopePtr = std::shared_ptr<Scope>;

enum class ValueKind {
  Unknown,    // an error already reported, or a phase variable outside a phase
  Number, Bool, String,
  Symbol,     // an enumeration member written as a bare name: `fp16`, `streaming`
  List, Range,
  Record,     // a chip, pod, mapping, precision, optimizer, dataset, training, hook, ...
  Template,   // a parameterised declaration, or a `layer` definition
  Builtin,    // a built-in function: min, balanced, lamb, ...
  Module,     // `import "x" as m`
  Model,      // a model: a layer stack, closed over its arguments
  Layer,      // a layer definition applied to its arguments (a leaf of a model)
  LayerRef,   // a reference to a layer or group of a model, by path (ties)
  Selection,  // layers picked out of a mapping's model (`encoder[0..3]`)
  Pipeline,   // a mapping's pipeline: explicit stages, balanced(p)
  Lua,        // a Lua hook body, file or function reference
  Schedule,   // a learning-rate schedule
};

const char* describe(ValueKind k);

struct Value;
struct Record;
struct Template;
struct ModelValue;
struct LayerValue;
struct Selection;
struct PipelineValue;
struct ScheduleValue;
struct ModuleValue;

struct Value {
  ValueKind kind = ValueKind::Unknown;
  double number = 0;
  Dim dim;
  bool percent = false;   // written with `%` (warmup 10% means a fraction of the phase)
  bool integer = false;   // written as an integer literal, or integral arithmetic of those
  bool boolean = false;
  std::string text;       // String, Symbol, Builtin name, LayerRef path, Lua text
  long long lo = 0, hi = 0;  // Range
  std::shared_ptr<const std::vector<Value>> list;
  std::shared_ptr<const Record> record;
  std::shared_ptr<const Template> tmpl;
  std::shared_ptr<const ModelValue> model;
  std::shared_ptr<const LayerValue> layer;
  std::shared_ptr<const Selection> selection;
  std::shared_ptr<const PipelineValue> pipeline;
  std::shared_ptr<const ScheduleValue> schedule;
  std::shared_ptr<const ModuleValue> module;
  const syntax::LuaExpr* lua = nullptr;
  Span span;              // where it was written

  static Value unknown(Span s = {}) { Value v; v.span = s; return v; }
  static Value num(double n, Dim d = Dim::none(), Span s = {});
  static Value integral(long long n, Span s = {});
  static Value boolean_(bool b, Span s = {});
  static Value str(std::string t, Span s = {});
  static Value symbol(std::string t, Span s = {});
  static Value ofList(std::vector<Value> items, Span s = {});

  bool isUnknown() const { return kind == ValueKind::Unknown; }
  bool isNumber() const { return kind == ValueKind::Number; }
  bool isWhole() const;  // a dimensionless integral number
  // "number `8`", "mapping `pod16`", "string \"x\"" — for messages.
  std::string describe() const;
  // The value as a user would write it (for the REPL and messages).
  std::string show() const;
};

struct RecordField {
  std::string name;
  Value value;
  Span nameSpan;
  bool inherited = false;  // copied from the base of a `with` variant
};

struct PhaseEntry;

struct Record {
  std::string kind;   // declaration kind or schema name
  std::string name;   // declared name, or "" for anonymous
  Span span;
  std::vector<RecordField> fields;
  std::vector<PhaseEntry> phases;  // trainings only
  bool hadErrors = false;          // building it reported errors (later warnings about it would be noise)

  const RecordField* field(const std::string& n) const;
  const Value* get(const std::string& n) const {
    const RecordField* f = field(n);
    return f != nullptr ? &f->value : nullptr;
  }
  void set(const std::string& n, Value v, Span nameSpan);
};

struct PhaseEntry {
  std::string name;
  Span span, nameSpan;
  std::string from;
  Span fromSpan;
  std::shared_ptr<const Record> fields;
};

struct Template {
  const syntax::Declaration* decl = nullptr;
  ScopePtr scope;       // where it was declared
};

struct ModelValue {
  std::string name;     // declared name, or the template's name
  const syntax::Block* body = nullptr;
  const syntax::Declaration* decl = nullptr;
  ScopePtr scope;       // arguments bound; parent is the declaring module
  Span span;
  std::shared_ptr<const Template> tmpl;        // when made by a call (for `with`)
  std::vector<std::pair<std::string, Value>> args;  // explicit arguments of that call
};

struct LayerValue {
  const syntax::Declaration* decl = nullptr;   // the `layer` definition
  ScopePtr scope;                              // arguments bound
  std::vector<std::pair<std::string, Value>> args;  // every parameter's value
  std::vector<std::pair<std::string, Value>> explicitArgs;
  std::shared_ptr<const Template> tmpl;
  Span span;                                   // where it was applied
};

struct PathPart {
  std::string name;
  long long index = -1;  // element of a `repeat`, or -1
  bool operator==(const PathPart& o) const { return name == o.name && index == o.index; }
};
std::string pathString(const std::vector<PathPart>& parts);

struct ModelStructure;
struct Selection {
  std::shared_ptr<const ModelStructure> model;
  std::vector<std::vector<PathPart>> prefixes;  // every leaf under any prefix is selected
};

struct StageEntry {
  long long ipu = 0;
  Span span, indexSpan;
  std::vector<const syntax::Expr*> layers;
};

struct PipelineValue {
  enum class Kind { Explicit, Balanced, Lua } kind = Kind::Explicit;
  long long ipus = 0;                 // balanced(p)
  std::vector<StageEntry> stages;     // explicit
  ScopePtr scope;                     // to evaluate stage selectors (indices may use lets)
  const syntax::LuaExpr* lua = nullptr;
  Span span;
};

struct ScheduleValue {
  Value base;
  Value per;      // Unknown when absent
  Value warmup;   // Unknown when absent
  ir::LrDecay decay = ir::LrDecay::Constant;
  Span decaySpan;
  std::vector<std::pair<std::string, Value>> decayArgs;
  Value end;      // Unknown when absent
  bool hasPer = false, hasWarmup = false, hasEnd = false;
};

struct ModuleValue {
  std::string path;
  ScopePtr scope;
};

}  // namespace ipu::check
