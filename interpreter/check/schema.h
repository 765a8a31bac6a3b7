// What each kind of declaration may contain: its fields, their types, units,
// defaults and one-line docs. The checker validates records against these
// tables, so "unknown field, did you mean", unit errors and missing fields come
// from data, and docs/language.md's field tables are checked against them by a
// test. Adding a field to the language is adding a row here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "interpreter/check/units.h"
#include "interpreter/check/value.h"

namespace ipu::check {

struct Schema;

enum class TypeKind {
  Any,
  Number,     // with a dimension; dimensionless counts accept a unit of steps/epochs/samples too
  Whole,      // a dimensionless integer (or an integer count of `dim`)
  Fraction,   // a number in (0, 1], written 0.25 or 25%
  Bool,
  String,
  Enum,       // one of `symbols`, written as a bare name
  List,       // of `element`
  Record,     // a record of `recordKind`
  Struct,     // an anonymous record validated against `schema` (`flops: { matmul: ... }`)
  Model,
  LayerRef,
  Schedule,   // a learning rate: a number, a schedule, or `lua f`
  Pipeline,   // explicit stages, balanced(p), or `lua f`
  Lua,
  LossScale,  // a number, `none`, `dynamic`, or dynamic(initial: ..., ...)
};

struct Type {
  TypeKind kind = TypeKind::Any;
  Dim dim;
  bool positive = false;        // must be > 0
  bool mayBeNegative = false;   // a signed number (an error, a difference)
  double max = 0;               // an upper bound when > 0 (counts that size arrays or multiply)
  std::vector<std::string> symbols;   // Enum: its members; Whole: symbols accepted besides a number (`all`)
  std::shared_ptr<Type> element;
  std::string recordKind;
  const Schema* schema = nullptr;
  bool orList = false;          // T or [T]
  std::string name() const;     // "a whole number", "bytes", "one of `fp16`, `fp32`", "a precision"
};

struct Field {
  std::string name;
  Type type;
  bool required = false;
  Value dflt;                   // Unknown: no default, or computed from other fields (doc says how)
  std::string doc;
  std::string defaultDoc;       // how the default is shown in docs ("same as `machines`")
};

struct Schema {
  std::string kind;
  std::vector<Field> fields;
  const Field* find(const std::string& name) const;
  std::vector<std::string> names() const;
};

// Schemas by kind: chip, machine, pod, layer, flops, mapping, precision,
// loss_scale, optimizer, dataset, training, phase, hook, sweep, metric.
const Schema* schemaFor(const std::string& kind);
const std::vector<const Schema*>& allSchemas();

// Integers beyond this lose precision as doubles; every whole-number field and
// index is checked against it before it becomes an integer.
inline constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

// Context variables: defined inside model and layer definitions, bound by each
// training phase when it expands the model.
const std::vector<std::string>& contextVariables();

}  // namespace ipu::check
