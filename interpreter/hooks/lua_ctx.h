// The `ctx` a hook function receives: a read-only table of the event's
// values with methods (`ctx:log`, `ctx:stop`, `ctx:start_from`). Reading a
// value this kind of run does not have raises IPU4006 with the reason, and
// reading a field that does not exist is an error too, so a typo or a missing
// metric is never a silent nil. A ctx works only during the call it was
// passed to.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/train/events.h"

struct lua_State;

namespace ipu::hooks {

// What the ctx methods act on during one call (the registry points at it).
struct CtxCall {
  long long serial = 0;
  train::Source source = train::Source::Estimate;
  std::map<std::string, double>* logged = nullptr;     // ctx:log (on_step only)
  train::StopRequest* stop = nullptr;                  // ctx:stop
  std::string* startFrom = nullptr;                    // ctx:start_from (on_phase_start only)
  const std::vector<std::string>* checkpoints = nullptr;
};

// A value of a table in the ctx (ctx.sweep, ctx.trial).
struct CtxValue {
  enum class Kind { Number, Integer, Boolean, String } kind = Kind::Number;
  double number = 0;  // Number, Integer (integral), Boolean (0 or 1)
  std::string text;   // String
  static CtxValue ofNumber(double v) { return {Kind::Number, v, {}}; }
  static CtxValue ofInteger(long long v) { return {Kind::Integer, static_cast<double>(v), {}}; }
  static CtxValue ofBoolean(bool v) { return {Kind::Boolean, v ? 1.0 : 0.0, {}}; }
  static CtxValue ofString(std::string t) { return {Kind::String, 0, std::move(t)}; }
};
using CtxFields = std::vector<std::pair<std::string, CtxValue>>;

class CtxBuilder {
 public:
  explicit CtxBuilder(lua_State* L);  // pushes the data table
  void number(const char* key, double value);
  void integer(const char* key, long long value);
  void string(const char* key, const std::string& value);
  void boolean(const char* key, bool value);
  void numbers(const char* key, const std::vector<double>& values);   // a 1-based array
  void strings(const char* key, const std::vector<std::string>& values);
  void table(const char* key, const std::map<std::string, double>& values);
  // A table of `values`, with tables of values in it (`tables`, one level).
  void fields(const char* key, const CtxFields& values, const std::map<std::string, CtxFields>& tables = {});
  void unavailable(const char* key, const std::string& reason);      // reading it is IPU4006
  void optional(const char* key);                                     // absent: reads as nil
  // Pushes the ctx proxy (leaves only it on the stack). `methods` lists which
  // of "log", "stop", "start_from" it has.
  void finish(long long serial, const std::vector<const char*>& methods);

 private:
  lua_State* L_;
  int data_, reasons_, optional_;
};

}  // namespace ipu::hooks
