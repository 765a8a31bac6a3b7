// A small JSON value with ordered objects, for the documented `--json` outputs
// (plans, diagnostics, estimates, run records). Ordered because humans read
// these files and diff them; a key's position is part of the contract's
// readability, not its meaning. Writing is all the tool needs here; parsing
// arrives with the components that read JSON (run stores, the language server).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace ipu::ir {

class Json {
 public:
  enum class Kind { Null, Bool, Number, Integer, String, Array, Object };

  Json() = default;                       // null
  Json(std::nullptr_t) {}
  Json(bool b) : kind_(Kind::Bool), bool_(b) {}
  Json(int v) : kind_(Kind::Integer), int_(v) {}
  Json(long v) : kind_(Kind::Integer), int_(v) {}
  Json(long long v) : kind_(Kind::Integer), int_(v) {}
  Json(unsigned v) : kind_(Kind::Integer), int_(v) {}
  Json(unsigned long v) : kind_(Kind::Integer), int_(static_cast<long long>(v)) {}
  Json(unsigned long long v) : kind_(Kind::Integer), int_(static_cast<long long>(v)) {}
  Json(double v) : kind_(Kind::Number), num_(v) {}
  Json(const char* s) : kind_(Kind::String), str_(s) {}
  Json(std::string s) : kind_(Kind::String), str_(std::move(s)) {}

  static Json array() { Json j; j.kind_ = Kind::Array; return j; }
  static Json object() { Json j; j.kind_ = Kind::Object; return j; }

  Kind kind() const { return kind_; }
  // Object access: inserts (keeping insertion order) when the key is new.
  Json& operator[](const std::string& key);
  const Json* find(const std::string& key) const;
  void push(Json value);                  // array append
  std::size_t size() const;

  bool asBool() const { return bool_; }
  double asNumber() const { return kind_ == Kind::Integer ? static_cast<double>(int_) : num_; }
  long long asInteger() const { return kind_ == Kind::Integer ? int_ : static_cast<long long>(num_); }
  const std::string& asString() const { return str_; }
  const std::vector<Json>& items() const { return items_; }
  const std::vector<std::pair<std::string, Json>>& members() const { return members_; }

  // indent < 0: compact single line (JSONL); otherwise pretty with that indent.
  std::string dump(int indent = 2) const;
  void write(std::ostream& os, int indent = 2) const;

 private:
  void writeImpl(std::ostream& os, int indent, int depth) const;
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  long long int_ = 0;
  double num_ = 0;
  std::string str_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

std::string jsonEscape(const std::string& s);

}  // namespace ipu::ir
