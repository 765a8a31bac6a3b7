#include "interpreter/hooks/run_hooks.h"

#include <atomic>
#include <cmath>
#include <limits>

#include "interpreter/hooks/lua_ctx.h"

extern "C" {
#include <lua.h>
}

namespace ipu::hooks {

namespace {

// Serials are unique across runs, so a ctx kept from any earlier call is refused.
long long nextSerial() {
  static std::atomic<long long> serial{0};
  return ++serial;
}

const char* kEstimateOnly =
    "`ipu estimate` predicts timing only (step, phase, lr, samples_per_s, tokens_per_s, step_time, memory); "
    "train with `ipu run` for it";

std::string phaseWhere(const std::string& phase, long long step) {
  return "at step " + std::to_string(step) + " of phase `" + phase + "`";
}

// ctx.sweep and ctx.trial of a sweep's trial; nil (without an error) otherwise.
void addSweep(CtxBuilder& b, const SweepTrial* t) {
  if (t == nullptr) {
    b.optional("sweep");
    b.optional("trial");
    return;
  }
  CtxFields sweep{{"name", CtxValue::ofString(t->sweep)},
                  {"method", CtxValue::ofString(t->method)},
                  {"metric", CtxValue::ofString(t->metric)},
                  {"goal", CtxValue::ofString(t->goal)}};
  if (t->best) sweep.emplace_back("best", CtxValue::ofNumber(*t->best));
  b.fields("sweep", sweep);
  CtxFields trial{{"index", CtxValue::ofInteger(t->index)}, {"key", CtxValue::ofString(t->key)}};
  if (!t->startFrom.empty()) trial.emplace_back("start_from", CtxValue::ofString(t->startFrom));
  b.fields("trial", trial, {{"params", t->params}});
}

}  // namespace

RunHooks::RunHooks(HookSet& hooks, const ir::RunPlan& run, train::Source source)
    : hooks_(hooks), run_(run), source_(source) {
  for (const auto& name : run.hooks) {
    LoadedHook* h = hooks_.hook(name);
    if (h == nullptr || h->failed) continue;
    Listener l;
    l.hook = h;
    l.onStep = h->sandbox->hasFunction("on_step");
    l.onPhaseStart = h->sandbox->hasFunction("on_phase_start");
    l.onPhaseEnd = h->sandbox->hasFunction("on_phase_end");
    if (l.onStep || l.onPhaseStart || l.onPhaseEnd) listeners_.push_back(l);
  }
}

train::PhaseDecision RunHooks::phaseStart(train::Source, const train::PhaseInfo& info) {
  train::PhaseDecision decision;
  for (auto& l : listeners_) {
    if (!l.onPhaseStart || l.hook->failed || failed_) continue;
    CtxCall call;
    call.serial = nextSerial();
    call.source = source_;
    call.stop = &decision.stop;
    call.startFrom = &decision.startFrom;
    call.checkpoints = &info.checkpoints;
    LuaSandbox& box = *l.hook->sandbox;
    box.setCurrentCall(&call);
    LuaFailure failure;
    bool ok = box.call(
        "on_phase_start", 0,
        [&](lua_State* L) {
          CtxBuilder b(L);
          b.string("run", info.run);
          b.string("phase", info.phase);
          b.integer("index", info.index + 1);
          b.integer("steps", info.steps);
          b.string("source", train::name(source_));
          if (info.from.empty()) b.optional("from");
          else b.string("from", info.from);
          if (info.checkpoint.empty()) b.optional("checkpoint");
          else b.string("checkpoint", info.checkpoint);
          if (source_ == train::Source::Estimate) b.unavailable("checkpoints", "checkpoints exist only when the run trains (`ipu run`)");
          else b.strings("checkpoints", info.checkpoints);
          addSweep(b, trial_);
          b.finish(call.serial, {"stop", "start_from"});
          return 1;
        },
        [](lua_State*, LuaFailure&) { return true; }, failure);
    box.setCurrentCall(nullptr);
    if (!ok) {
      hooks_.report(*l.hook, failure, "on_phase_start", "before phase `" + info.phase + "`");
      failed_ = true;
      decision.stop = {true, "hook `" + l.hook->name() + "` failed"};
      return decision;
    }
    if (decision.stop.stop && decision.stop.reason.rfind("hook ", 0) != 0)
      decision.stop.reason = "hook `" + l.hook->name() + "`: " + decision.stop.reason;
  }
  return decision;
}

train::StopRequest RunHooks::step(train::Source, const train::StepInfo& info, std::map<std::string, double>& logged) {
  train::StopRequest stop;
  if (failed_) return {true, "a hook failed"};
  const ir::PhasePlan* phase = nullptr;
  for (const auto& p : run_.phases)
    if (p.name == info.phase) phase = &p;
  for (auto& l : listeners_) {
    if (!l.onStep || l.hook->failed) continue;
    train::StopRequest mine;
    CtxCall call;
    call.serial = nextSerial();
    call.source = source_;
    call.logged = &logged;
    call.stop = &mine;
    LuaSandbox& box = *l.hook->sandbox;
    box.setCurrentCall(&call);
    LuaFailure failure;
    const bool estimate = source_ == train::Source::Estimate;
    bool ok = box.call(
        "on_step", 0,
        [&](lua_State* L) {
          CtxBuilder b(L);
          b.string("run", info.run);
          b.string("phase", info.phase);
          b.integer("step", info.step);
          b.integer("global_step", info.globalStep);
          b.integer("steps", phase != nullptr ? phase->steps : 0);
          b.string("source", train::name(source_));
          b.number("lr", info.lr);
          auto metric = [&](const char* key, double v, const char* why) {
            if (train::measured(v)) b.number(key, v);
            else b.unavailable(key, estimate ? kEstimateOnly : why);
          };
          metric("loss", info.loss, "the loss was not measured at this step");
          metric("samples_per_s", info.samplesPerSecond, "not measured at this step");
          metric("tokens_per_s", info.tokensPerSecond,
                 phase != nullptr && phase->seqLen == 0 ? "this phase has no sequence length" : "not measured at this step");
          metric("step_time", info.stepTimeSeconds, "not measured at this step");
          if (estimate) {
            b.unavailable("loss_scale", kEstimateOnly);
            b.unavailable("skipped", kEstimateOnly);
            b.unavailable("metrics", kEstimateOnly);
          } else {
            b.number("loss_scale", info.lossScale);
            b.boolean("skipped", info.skipped);
            b.table("metrics", info.metrics);
          }
          if (!info.ipuMemoryBytes.empty()) b.numbers("memory", info.ipuMemoryBytes);
          else b.unavailable("memory", "not measured");
          addSweep(b, trial_);
          b.finish(call.serial, {"log", "stop"});
          return 1;
        },
        [](lua_State*, LuaFailure&) { return true; }, failure);
    box.setCurrentCall(nullptr);
    if (!ok) {
      hooks_.report(*l.hook, failure, "on_step", phaseWhere(info.phase, info.step));
      failed_ = true;
      return {true, "hook `" + l.hook->name() + "` failed"};
    }
    if (mine.stop && !stop.stop) stop = {true, "hook `" + l.hook->name() + "`: " + mine.reason};
  }
  return stop;
}

train::StopRequest RunHooks::phaseEnd(train::Source, const train::PhaseInfo& info) {
  train::StopRequest stop;
  for (auto& l : listeners_) {
    if (!l.onPhaseEnd || l.hook->failed || failed_) continue;
    train::StopRequest mine;
    CtxCall call;
    call.serial = nextSerial();
    call.source = source_;
    call.stop = &mine;
    LuaSandbox& box = *l.hook->sandbox;
    box.setCurrentCall(&call);
    LuaFailure failure;
    bool ok = box.call(
        "on_phase_end", 0,
        [&](lua_State* L) {
          CtxBuilder b(L);
          b.string("run", info.run);
          b.string("phase", info.phase);
          b.integer("index", info.index + 1);
          b.integer("steps", info.steps);
          b.integer("steps_run", info.stepsRun);
          b.string("source", train::name(source_));
          if (source_ == train::Source::Estimate) b.unavailable("metrics", kEstimateOnly);
          else b.table("metrics", info.metrics);
          if (info.checkpoint.empty()) {
            if (source_ == train::Source::Estimate) b.unavailable("checkpoint", "checkpoints exist only when the run trains (`ipu run`)");
            else b.optional("checkpoint");
          } else {
            b.string("checkpoint", info.checkpoint);
          }
          addSweep(b, trial_);
          b.finish(call.serial, {"stop"});
          return 1;
        },
        [](lua_State*, LuaFailure&) { return true; }, failure);
    box.setCurrentCall(nullptr);
    if (!ok) {
      hooks_.report(*l.hook, failure, "on_phase_end", "after phase `" + info.phase + "`");
      failed_ = true;
      return {true, "hook `" + l.hook->name() + "` failed"};
    }
    if (mine.stop && !stop.stop) stop = {true, "hook `" + l.hook->name() + "`: " + mine.reason};
  }
  return stop;
}

train::Policies RunHooks::policies() {
  train::Policies p;
  bool lr = false, lossScale = false;
  for (const auto& ph : run_.phases) {
    lr = lr || !ph.lr.luaFunction.empty();
    lossScale = lossScale || !ph.precision.lossScale.luaFunction.empty();
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto phaseNamed = [this](const std::string& name) -> const ir::PhasePlan* {
    for (const auto& ph : run_.phases)
      if (ph.name == name) return &ph;
    return nullptr;
  };
  // Calls `fn` of its hook with arguments, expecting one number in [lo, inf).
  auto numberCall = [this, nan](const std::string& fn, const std::string& during, double lo, const std::string& what,
                                const std::function<int(lua_State*)>& push) -> double {
    if (failed_) return nan;
    LoadedHook* h = hooks_.provider(fn);
    if (h == nullptr || h->failed) {
      failed_ = true;
      return nan;
    }
    double result = nan;
    LuaFailure failure;
    bool ok = h->sandbox->call(
        fn, 1, push,
        [&](lua_State* L, LuaFailure& f) {
          int isNumber = 0;
          double v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumberx(L, -1, &isNumber) : nan;
          if (!isNumber || !std::isfinite(v) || v < lo) {
            const char* type = lua_typename(L, lua_type(L, -1));
            f = LuaFailure{};
            f.kind = LuaFailure::Kind::BadValue;
            f.message = "`" + fn + "` returned " +
                        (isNumber ? "the number " + std::to_string(v)
                                  : lua_isnil(L, -1) ? std::string("nil")
                                                     : std::string("a ") + type) +
                        "; it must return " +
                        what;
            return false;
          }
          result = v;
          return true;
        },
        failure);
    if (!ok) {
      const check::LuaFunctionRef* ref = hooks_.reference(fn);
      hooks_.report(*h, failure, fn, during, ref != nullptr ? ref->span : base::Span{});
      failed_ = true;
      return nan;
    }
    return result;
  };
  if (lr)
    p.learningRate = [this, phaseNamed, numberCall, nan](long long step, const std::string& phaseName) {
      const ir::PhasePlan* ph = phaseNamed(phaseName);
      if (ph == nullptr || ph->lr.luaFunction.empty()) return nan;
      const long long s = step + 1;
      return numberCall(ph->lr.luaFunction, phaseWhere(phaseName, s), 0.0, "a learning rate, a number >= 0",
                        [&](lua_State* L) {
                          lua_pushinteger(L, static_cast<lua_Integer>(s));
                          lua_pushlstring(L, phaseName.data(), phaseName.size());
                          return 2;
                        });
    };
  if (lossScale)
    p.lossScale = [this, phaseNamed, numberCall, nan](const train::LossScaleState& st) {
      const ir::PhasePlan* ph = phaseNamed(st.phase);
      if (ph == nullptr || ph->precision.lossScale.luaFunction.empty()) return nan;
      return numberCall(ph->precision.lossScale.luaFunction, phaseWhere(st.phase, st.step), 1.0,
                        "a loss scale, a number >= 1", [&](lua_State* L) {
                          lua_createtable(L, 0, 5);
                          lua_pushlstring(L, st.phase.data(), st.phase.size());
                          lua_setfield(L, -2, "phase");
                          lua_pushinteger(L, static_cast<lua_Integer>(st.step));
                          lua_setfield(L, -2, "step");
                          if (st.scale > 0) lua_pushnumber(L, st.scale);
                          else lua_pushnil(L);
                          lua_setfield(L, -2, "scale");
                          lua_pushboolean(L, st.overflow ? 1 : 0);
                          lua_setfield(L, -2, "overflow");
                          lua_pushinteger(L, static_cast<lua_Integer>(st.goodSteps));
                          lua_setfield(L, -2, "good_steps");
                          return 1;
                        });
    };
  return p;
}

}  // namespace ipu::hooks
