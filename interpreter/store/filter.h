// The names a run answers to and the filter language of `ipu runs --where`
// and `ipu report --where` (docs/tracking.md has the grammar):
//
//   mapping.replicas IN (2, 4) AND (mlm_accuracy > 0.18 OR tag = 'baseline')
//   NOT status = failed AND started >= '2026-11-20' AND duration < 600
//
// AND, OR, NOT, IN, NOT IN, = != < <= > >=, parentheses. A name is a built-in
// column (id, name, kind, status, training, host, note, plan_hash, started,
// ended, duration, tag), a parameter (`mapping.replicas`), or a metric (its
// latest value: `loss`; or `loss.min`, `loss.max`, `loss.count`); `params.X`
// and `metrics.X` say which when a name is both. Names are resolved against
// the runs in the store, so a misspelt one is an error listing near names,
// never a filter that silently matches nothing.
//
// The filter is evaluated over the runs the store lists, in C++, so it means
// the same on SQLite and PostgreSQL.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "interpreter/store/run_store.h"

namespace ipu::store {

enum class FieldKind { Id, Name, Kind, Status, Training, Host, Note, PlanHash, Started, Ended, Duration, Tag,
                       Parameter, Metric };
enum class MetricPart { Latest, Min, Max, Count };

struct Field {
  FieldKind kind = FieldKind::Id;
  std::string key;  // Parameter, Metric: the key
  MetricPart part = MetricPart::Latest;
  std::string label;  // as the user wrote it (column headers)
};

struct FieldValue {
  bool present = false;
  bool numeric = false;
  double number = 0;
  std::string text;
};

// Resolves names against the runs at hand.
class FieldResolver {
 public:
  explicit FieldResolver(const std::vector<RunRecord>& runs);
  std::optional<Field> resolve(const std::string& name) const;
  // Every name that resolves (built-ins, parameters, metrics), for hints.
  std::vector<std::string> names() const;
  // "did you mean `x`?" and a few known names, for a name that does not resolve.
  std::string unknownNameHelp(const std::string& name) const;

  static FieldValue value(const RunRecord& run, const Field& field);
  static std::string format(const RunRecord& run, const Field& field);  // for tables

 private:
  std::vector<std::string> parameters_, metrics_;
};

struct FilterError {
  std::string message;
  std::size_t offset = 0;  // into the filter text: where the caret goes
  std::size_t length = 1;
  std::string help;
};

class Filter {
 public:
  struct Node;
  static std::variant<Filter, FilterError> parse(const std::string& text, const FieldResolver& names);
  bool matches(const RunRecord& run) const;

  Filter(const Filter&) = delete;
  Filter(Filter&&) noexcept;
  Filter& operator=(Filter&&) noexcept;
  ~Filter();

 private:
  explicit Filter(std::unique_ptr<Node> root);
  std::unique_ptr<Node> root_;
};

// The filter text with a caret line under the error, indented by `indent`.
std::string renderFilterError(const std::string& text, const FilterError& error, const std::string& indent);

// "2026-11-21 08:53:40" in local time ("" for no time).
std::string formatTime(double seconds);
// "1:02:03", "12.3s"
std::string formatDuration(double seconds);

}  // namespace ipu::store
