#include "interpreter/hooks/lua_ctx.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "interpreter/hooks/sandbox.h"

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

// The lua_CFunctions here may raise Lua errors (longjmp): they keep no C++
// object with a destructor alive at those points (messages go through char
// buffers).

namespace ipu::hooks {

namespace {

using Kind = LuaFailure::Kind;

// The call in progress if `serial` (the ctx's) is that call's; else raises.
CtxCall* activeCall(lua_State* L, int serialUpvalue) {
  auto* call = static_cast<CtxCall*>(LuaSandbox::currentCall(L));
  const long long serial = static_cast<long long>(lua_tointeger(L, lua_upvalueindex(serialUpvalue)));
  if (call == nullptr || call->serial != serial)
    LuaSandbox::fail(L, Kind::Forbidden, "this ctx belongs to a call that has returned; use the ctx of the current call");
  return call;
}

int ctxIndex(lua_State* L) {
  // upvalues: data, reasons, optional, serial
  activeCall(L, 4);  // a ctx kept past its call reads nothing (docs/hooks.md: IPU4005)
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  const char* key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
  char buf[512];
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(2));
  if (lua_type(L, -1) == LUA_TSTRING) {
    std::snprintf(buf, sizeof buf, "`ctx.%s` is not available: %s", key, lua_tostring(L, -1));
    return LuaSandbox::fail(L, Kind::Unavailable, buf);
  }
  lua_pop(L, 1);
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(3));
  if (!lua_isnil(L, -1)) {
    lua_pushnil(L);
    return 1;
  }
  lua_pop(L, 1);
  // Say which fields there are, sorted (the keys stay alive in their tables).
  const char* names[64];
  std::size_t count = 0;
  for (int t = 1; t <= 2; ++t) {
    lua_pushnil(L);
    while (lua_next(L, lua_upvalueindex(t)) != 0) {
      if (lua_type(L, -2) == LUA_TSTRING && count < 64) names[count++] = lua_tostring(L, -2);
      lua_pop(L, 1);
    }
  }
  std::sort(names, names + count, [](const char* a, const char* b) { return std::strcmp(a, b) < 0; });
  std::snprintf(buf, sizeof buf, "ctx has no field `%s`; it has:", key);
  std::size_t used = std::strlen(buf);
  for (std::size_t i = 0; i < count && used + 40 < sizeof buf; ++i) {
    int n = std::snprintf(buf + used, sizeof buf - used, " %s", names[i]);
    if (n > 0) used += static_cast<std::size_t>(n);
  }
  return LuaSandbox::fail(L, Kind::Runtime, buf);
}

int ctxNewIndex(lua_State* L) { return LuaSandbox::fail(L, Kind::Forbidden, "ctx is read-only"); }

int ctxPairs(lua_State* L) {
  activeCall(L, 2);
  lua_getglobal(L, "next");
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushnil(L);
  return 3;
}

int ctxLog(lua_State* L) {
  CtxCall* call = activeCall(L, 1);
  if (call->logged == nullptr) return LuaSandbox::fail(L, Kind::Forbidden, "ctx:log is available in on_step only");
  std::size_t len = 0;
  const char* name = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &len) : nullptr;
  bool goodName = name != nullptr && len > 0 && len <= 64;
  for (std::size_t i = 0; goodName && i < len; ++i) {
    char c = name[i];
    goodName = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '/';
  }
  if (!goodName)
    return LuaSandbox::fail(L, Kind::BadValue,
                            "ctx:log(name, value) needs a name of 1 to 64 letters, digits, `_`, `.`, `-` or `/`");
  int isNumber = 0;
  double value = lua_tonumberx(L, 3, &isNumber);
  if (lua_type(L, 3) != LUA_TNUMBER || !isNumber || !std::isfinite(value))
    return LuaSandbox::fail(L, Kind::BadValue, "ctx:log(name, value) needs a finite number as its value");
  (*call->logged)[std::string(name, len)] = value;
  return 0;
}

int ctxStop(lua_State* L) {
  CtxCall* call = activeCall(L, 1);
  if (call->stop == nullptr) return LuaSandbox::fail(L, Kind::Forbidden, "ctx:stop is not available here");
  // The reason is shown to people: text (or a number), never a table's address.
  if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TSTRING && lua_type(L, 2) != LUA_TNUMBER) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "ctx:stop(reason) needs a string as its reason, not a %s", luaL_typename(L, 2));
    return LuaSandbox::fail(L, Kind::BadValue, buf);
  }
  std::size_t len = 0;
  const char* reason = lua_isnoneornil(L, 2) ? "stopped by a hook" : lua_tolstring(L, 2, &len);
  if (lua_isnoneornil(L, 2)) len = std::strlen(reason);
  call->stop->stop = true;
  call->stop->reason.assign(reason, std::min<std::size_t>(len, 200));
  return 0;
}

int ctxStartFrom(lua_State* L) {
  CtxCall* call = activeCall(L, 1);
  if (call->source == train::Source::Estimate)
    return LuaSandbox::fail(L, Kind::Unavailable,
                            "ctx:start_from needs checkpoints, which exist only when the run trains (`ipu run`)");
  if (call->startFrom == nullptr || call->checkpoints == nullptr)
    return LuaSandbox::fail(L, Kind::Forbidden, "ctx:start_from is available in on_phase_start only");
  const char* name = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : nullptr;
  bool known = false;
  for (const auto& c : *call->checkpoints)
    if (name != nullptr && c == name) known = true;
  if (!known) {
    char buf[300];
    std::snprintf(buf, sizeof buf, "ctx:start_from(%s): not one of ctx.checkpoints", name != nullptr ? name : "?");
    return LuaSandbox::fail(L, Kind::BadValue, buf);
  }
  call->startFrom->assign(name);
  return 0;
}

}  // namespace

CtxBuilder::CtxBuilder(lua_State* L) : L_(L) {
  lua_newtable(L_);
  data_ = lua_gettop(L_);
  lua_newtable(L_);
  reasons_ = lua_gettop(L_);
  lua_newtable(L_);
  optional_ = lua_gettop(L_);
}

void CtxBuilder::number(const char* key, double value) {
  lua_pushnumber(L_, value);
  lua_setfield(L_, data_, key);
}

void CtxBuilder::integer(const char* key, long long value) {
  lua_pushinteger(L_, static_cast<lua_Integer>(value));
  lua_setfield(L_, data_, key);
}

void CtxBuilder::string(const char* key, const std::string& value) {
  lua_pushlstring(L_, value.data(), value.size());
  lua_setfield(L_, data_, key);
}

void CtxBuilder::boolean(const char* key, bool value) {
  lua_pushboolean(L_, value ? 1 : 0);
  lua_setfield(L_, data_, key);
}

void CtxBuilder::numbers(const char* key, const std::vector<double>& values) {
  lua_createtable(L_, static_cast<int>(values.size()), 0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    lua_pushnumber(L_, values[i]);
    lua_rawseti(L_, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L_, data_, key);
}

void CtxBuilder::strings(const char* key, const std::vector<std::string>& values) {
  lua_createtable(L_, static_cast<int>(values.size()), 0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    lua_pushlstring(L_, values[i].data(), values[i].size());
    lua_rawseti(L_, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L_, data_, key);
}

void CtxBuilder::table(const char* key, const std::map<std::string, double>& values) {
  lua_createtable(L_, 0, static_cast<int>(values.size()));
  for (const auto& [k, v] : values) {
    lua_pushnumber(L_, v);
    lua_setfield(L_, -2, k.c_str());
  }
  lua_setfield(L_, data_, key);
}

namespace {

void pushFields(lua_State* L, const CtxFields& values) {
  lua_createtable(L, 0, static_cast<int>(values.size()));
  for (const auto& [k, v] : values) {
    switch (v.kind) {
      case CtxValue::Kind::Number: lua_pushnumber(L, v.number); break;
      case CtxValue::Kind::Integer: lua_pushinteger(L, static_cast<lua_Integer>(v.number)); break;
      case CtxValue::Kind::Boolean: lua_pushboolean(L, v.number != 0 ? 1 : 0); break;
      case CtxValue::Kind::String: lua_pushlstring(L, v.text.data(), v.text.size()); break;
    }
    lua_setfield(L, -2, k.c_str());
  }
}

}  // namespace

void CtxBuilder::fields(const char* key, const CtxFields& values, const std::map<std::string, CtxFields>& tables) {
  pushFields(L_, values);
  for (const auto& [name, inner] : tables) {
    pushFields(L_, inner);
    lua_setfield(L_, -2, name.c_str());
  }
  lua_setfield(L_, data_, key);
}

void CtxBuilder::unavailable(const char* key, const std::string& reason) {
  lua_pushlstring(L_, reason.data(), reason.size());
  lua_setfield(L_, reasons_, key);
}

void CtxBuilder::optional(const char* key) {
  lua_pushboolean(L_, 1);
  lua_setfield(L_, optional_, key);
}

void CtxBuilder::finish(long long serial, const std::vector<const char*>& methods) {
  for (const char* m : methods) {
    lua_pushinteger(L_, static_cast<lua_Integer>(serial));
    lua_CFunction f = std::strcmp(m, "log") == 0 ? ctxLog : std::strcmp(m, "stop") == 0 ? ctxStop : ctxStartFrom;
    lua_pushcclosure(L_, f, 1);
    lua_setfield(L_, data_, m);
  }
  lua_newtable(L_);  // the proxy
  const int proxy = lua_gettop(L_);
  lua_newtable(L_);  // its metatable
  lua_pushvalue(L_, data_);
  lua_pushvalue(L_, reasons_);
  lua_pushvalue(L_, optional_);
  lua_pushinteger(L_, static_cast<lua_Integer>(serial));
  lua_pushcclosure(L_, ctxIndex, 4);
  lua_setfield(L_, -2, "__index");
  lua_pushcfunction(L_, ctxNewIndex);
  lua_setfield(L_, -2, "__newindex");
  lua_pushvalue(L_, data_);
  lua_pushinteger(L_, static_cast<lua_Integer>(serial));
  lua_pushcclosure(L_, ctxPairs, 2);
  lua_setfield(L_, -2, "__pairs");
  lua_pushboolean(L_, 0);
  lua_setfield(L_, -2, "__metatable");
  lua_setmetatable(L_, proxy);
  lua_replace(L_, data_);  // leave only the proxy
  lua_settop(L_, data_);
}

}  // namespace ipu::hooks
