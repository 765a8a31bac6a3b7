// What a sweep is, as data: the search space, the metric, the method and the
// early-termination rule of one `sweep` declaration. The checker produces a
// SweepSpec from the script (check/), the proposers read it (sweep/propose.h),
// the run store keeps it (store/), agents turn an Assignment into a trial by
// overriding values of the checked program (never by writing script text).
//
// The concepts are W&B's (method, metric with goal and target, parameters with
// values or distributions, run_cap, early_terminate with hyperband) so that a
// user who knows W&B sweeps knows these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "interpreter/base/source.h"

namespace ipu::sweep {

enum class Method { Grid, Random, Bayes };
enum class Goal { Minimize, Maximize };

// How a parameter is drawn. `Values` is a plain list (grid cells; uniform
// choice for random and bayes); `Categorical` is a list with probabilities.
// The q* forms round to a multiple of `q`; the log forms are uniform (or
// normal) in the logarithm of the value.
enum class Distribution {
  Values,
  Categorical,
  Uniform,
  IntUniform,
  LogUniform,
  QUniform,
  QLogUniform,
  Normal,
  QNormal,
  LogNormal,
  QLogNormal,
};

const char* methodName(Method m);
const char* goalName(Goal g);
const char* distributionName(Distribution d);
std::optional<Method> methodFromName(const std::string& name);
std::optional<Goal> goalFromName(const std::string& name);
std::optional<Distribution> distributionFromName(const std::string& name);

// One value a parameter takes. Numbers are in the unit the field is stored
// in (a learning rate, a count, bytes); names are the script's identifiers
// (`every_layer`, `fp16`); text is a string literal.
struct ParamValue {
  enum class Kind { Number, Integer, Boolean, Name, Text };
  Kind kind = Kind::Number;
  double number = 0;   // Number, Integer (integral), Boolean (0 or 1)
  std::string text;    // Name, Text

  static ParamValue ofNumber(double v) { return {Kind::Number, v, {}}; }
  static ParamValue ofInteger(long long v) { return {Kind::Integer, static_cast<double>(v), {}}; }
  static ParamValue ofBoolean(bool v) { return {Kind::Boolean, v ? 1.0 : 0.0, {}}; }
  static ParamValue ofName(std::string n) { return {Kind::Name, 0, std::move(n)}; }
  static ParamValue ofText(std::string t) { return {Kind::Text, 0, std::move(t)}; }
  bool isNumeric() const { return kind == Kind::Number || kind == Kind::Integer || kind == Kind::Boolean; }
  // Exact, locale-independent text: the identity of a value, as it is stored
  // and shown. Numbers: the fewest significant digits that read back as the
  // same double, in %g notation (0.1, not 0.10000000000000001; 0.0001, 1e-05);
  // integers in full; booleans
  // true/false; names as written; text double-quoted with `"`, `\` and
  // control characters escaped.
  std::string canonical() const;
  // For people (terminal lines, tables): numbers to 6 significant digits,
  // whole ones in full (0.001, not 0.0010000000000000002; 400, not 4e+02);
  // the rest as canonical(). Not an identity: two values may show alike.
  std::string shown() const;
  bool operator==(const ParamValue& o) const { return kind == o.kind && number == o.number && text == o.text; }
};

struct ParamSpec {
  // The value it replaces, as a dotted path from the training, e.g.
  // "lr", "optimizer.weight_decay", "phase.finetune.micro_batch",
  // "mapping.replicas", "model.hidden", "precision.compute".
  std::string path;
  Distribution distribution = Distribution::Values;
  std::vector<ParamValue> values;     // Values, Categorical
  std::vector<double> probabilities;  // Categorical; empty means equal
  double min = 0, max = 0;            // the uniform forms (inclusive)
  double mu = 0, sigma = 1;           // the normal forms
  double q = 0;                       // the q forms: the step
  base::Span span;                    // the declaration of this parameter
};

struct Metric {
  std::string name;                 // a metric a trial reports, e.g. "loss", "eval.mlm_accuracy", "throughput"
  Goal goal = Goal::Minimize;
  std::optional<double> target;     // stop the sweep when a trial reaches it
};

// Hyperband (Li et al. 2017) as W&B runs it: brackets at min_iter * eta^k
// steps of the trial's step counter; a trial below the top 1/eta of the
// trials that reached a bracket is stopped there.
struct EarlyTerminate {
  bool enabled = false;
  long long minIter = 1;
  int eta = 3;
  long long maxIter = 0;  // 0: the trial's own length
};

// The run a sweep's trials start from: a checkpoint of a recorded run, or the
// best trial of another sweep (phase-two sweeps start from phase one's best).
struct StartFrom {
  enum class Kind { Run, SweepBest };
  Kind kind = Kind::Run;
  std::string name;  // the run id or the sweep name
};

struct SweepSpec {
  std::string name;
  std::string training;  // the training declaration it varies
  Method method = Method::Grid;
  Metric metric;
  std::vector<ParamSpec> parameters;  // sorted by path
  long long runCap = 0;               // 0: the grid's size (grid), required otherwise
  EarlyTerminate earlyTerminate;
  std::optional<StartFrom> from;
  std::uint64_t seed = 0;
  base::Span span;
};

// A trial's parameters: one value per ParamSpec, in the spec's order.
using Assignment = std::vector<std::pair<std::string, ParamValue>>;

// The identity of an assignment (a grid cell): canonical text of the sorted
// (path, value) pairs, `path=value` separated by single spaces, e.g.
// `lr=0.001 micro_batch=4 precision.compute=fp16`. Two trials with the same
// key are the same cell.
std::string assignmentKey(const Assignment& a);
// The same pairs for people, values as ParamValue::shown() (not an identity).
std::string assignmentShown(const Assignment& a);

}  // namespace ipu::sweep
