// Unit tests of the hooks layer: the sandbox against each attack and error
// path, the ctx a hook receives, and hooks driving a run (estimate stepping,
// Lua schedules, Lua placement).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "interpreter/hooks/hook_set.h"
#include "interpreter/hooks/run_hooks.h"
#include "interpreter/hooks/sandbox.h"
#include "runtime/cost/estimate_steps.h"
#include "tests/unit/test_support.h"

extern "C" {
#include <lua.h>
}

using namespace ipu;
using Kind = hooks::LuaFailure::Kind;

namespace {

struct Loaded {
  hooks::LuaSandbox box;
  hooks::LuaFailure failure;
  bool ok = false;
  std::vector<std::string> printed;
  explicit Loaded(const std::string& code, hooks::SandboxLimits limits = {})
      : box("h", limits, [this](const std::string& line) { printed.push_back(line); }) {
    ok = box.load(code, failure);
  }
};

hooks::LuaFailure loadFails(const std::string& code, hooks::SandboxLimits limits = {}) {
  Loaded l(code, limits);
  EXPECT_FALSE(l.ok) << code;
  return l.failure;
}

// Calls global `f` with no arguments and returns its number result.
double callNumber(hooks::LuaSandbox& box, const std::string& f, hooks::LuaFailure& failure, bool& ok) {
  double out = NAN;
  ok = box.call(
      f, 1, [](lua_State*) { return 0; },
      [&](lua_State* L, hooks::LuaFailure&) {
        out = lua_tonumber(L, -1);
        return true;
      },
      failure);
  return out;
}

const char* kScript = R"(import "std/pods"
import "std/models/bert"
import "std/precision"
HOOKS
mapping m for bert_base on POD16 {
  PIPELINE
  replicas: 4
  recompute: every_layer
}
training t {
  mapping: m
  precision: fp16_sr
  optimizer: lamb(weight_decay: 0.01)
  hooks: [LISTED]
  phase one { seq_len: 128; masked_tokens: 20; micro_batch: 8; global_batch: 4096; steps: 500; lr: LR }
  phase two from one { seq_len: 384; masked_tokens: 56; micro_batch: 2; global_batch: 1024; steps: 100; lr: 0.001 }
}
)";

std::string script(const std::string& hooks, const std::string& listed, const std::string& lr = "0.002",
                   const std::string& pipeline = "pipeline: balanced(4)") {
  std::string s = kScript;
  auto put = [&](const std::string& key, const std::string& v) { s.replace(s.find(key), key.size(), v); };
  put("HOOKS", hooks);
  put("PIPELINE", pipeline);
  put("LISTED", listed);
  put("LR", lr);
  return s;
}

// Estimates a script (with its hooks) as `ipu estimate` does.
const cost::Estimate* estimate(session::Session& s, const std::string& text) {
  base::FileId f = s.addSource(test::sourceDir() + "/tests/hooks_test.ipu", text);
  return s.estimate(f);
}

std::string diagnostics(session::Session& s) {
  std::string out;
  for (const auto& d : s.diagnostics().all()) out += d.code + " " + d.message + "\n";
  return out;
}

}  // namespace

// ---------------------------------------------------------------- the sandbox

TEST(Sandbox, OnlyTheSafeLibrariesExist) {
  for (const char* lib : {"io", "os", "package", "require", "debug", "coroutine", "dofile", "loadfile", "collectgarbage",
                          "rawset"}) {
    hooks::LuaFailure f = loadFails(std::string("local x = ") + lib);
    EXPECT_EQ(f.kind, Kind::Forbidden) << lib << ": " << f.message;
    EXPECT_NE(f.message.find(lib), std::string::npos) << f.message;
  }
  Loaded ok(R"(
    assert(string.upper("a") == "A" and ("b"):rep(3) == "bbb")
    assert(table.concat({1, 2}, ",") == "1,2" and math.floor(2.5) == 2 and utf8.char(233) == "é")
    assert(select("#", 1, 2) == 2 and tostring(12) == "12" and tonumber("0x10") == 16)
    local ok, err = pcall(error, "caught")
    assert(not ok and err == "caught")
    local f = load("return 1 + 1")
    assert(f() == 2)
    for k, v in pairs({a = 1}) do assert(k == "a") end
    print("hello", 42)
  )");
  EXPECT_TRUE(ok.ok) << ok.failure.message;
  ASSERT_EQ(ok.printed.size(), 1u);
  EXPECT_EQ(ok.printed[0], "hello\t42");
}

TEST(Sandbox, NoBytecode) {
  EXPECT_EQ(loadFails("local d = string.dump(function() end)").kind, Kind::Runtime);  // string.dump is gone
  // load() forces text mode whatever mode is asked for; a bytecode header is refused.
  Loaded l("ok, err = load('\\27Lua', 'x', 'b')\nassert(ok == nil and err:find('binary'))");
  EXPECT_TRUE(l.ok) << l.failure.message;
}

TEST(Sandbox, TheHostIsReadOnly) {
  EXPECT_EQ(loadFails("print = nil").kind, Kind::Forbidden);
  EXPECT_EQ(loadFails("string.upper = nil").kind, Kind::Forbidden);
  EXPECT_EQ(loadFails("math.pi = 3").kind, Kind::Forbidden);
  EXPECT_EQ(loadFails("setmetatable(_G, nil)").kind, Kind::Runtime);  // protected metatable
  EXPECT_EQ(loadFails("getmetatable('').__index.upper = nil").kind, Kind::Runtime);  // hidden
  EXPECT_EQ(loadFails("setmetatable({}, {__gc = function() end})").kind, Kind::Forbidden);
  // The hook's own globals are its own.
  Loaded l("counter = 1\ncounter = counter + 1\nfunction f() return counter end");
  ASSERT_TRUE(l.ok) << l.failure.message;
  hooks::LuaFailure f;
  bool ok = false;
  EXPECT_EQ(callNumber(l.box, "f", f, ok), 2);
  EXPECT_TRUE(ok);
}

TEST(Sandbox, InstructionBudgetStopsLoopsEvenThroughPcall) {
  hooks::SandboxLimits small;
  small.instructionsPerCall = 200000;
  EXPECT_EQ(loadFails("while true do end", small).kind, Kind::Instructions);
  hooks::LuaFailure f = loadFails("while true do pcall(function() while true do end end) end", small);
  EXPECT_EQ(f.kind, Kind::Instructions);
  EXPECT_EQ(loadFails("xpcall(function() while true do end end, function(e) return e end)\nwhile true do end", small).kind,
            Kind::Instructions);
  // Lua runs message handlers with hooks off: the sandbox's xpcall calls the
  // handler afterwards, where the budget sees it.
  EXPECT_EQ(loadFails("xpcall(function() while true do end end, function(e) while true do end end)", small).kind,
            Kind::Instructions);
  EXPECT_EQ(loadFails("xpcall(error, function(e) while true do end end, 'x')", small).kind, Kind::Instructions);
  Loaded handled("ok, v = xpcall(function() error('boom') end, function(e) return 'handled: ' .. e end)\n"
                 "assert(not ok and v:find('handled: ') == 1 and v:find('boom'))");
  EXPECT_TRUE(handled.ok) << handled.failure.message;
  // The budget is per call: a later call starts afresh.
  Loaded l("function f() local n = 0 for i = 1, 50000 do n = n + i end return n end", small);
  ASSERT_TRUE(l.ok);
  for (int i = 0; i < 5; ++i) {
    bool ok = false;
    EXPECT_EQ(callNumber(l.box, "f", f, ok), 50000.0 * 50001 / 2);
    EXPECT_TRUE(ok) << f.message;
  }
}

TEST(Sandbox, MemoryBudgetStopsBombsEvenThroughPcall) {
  hooks::SandboxLimits small;
  small.memoryBytes = 4u << 20;
  EXPECT_EQ(loadFails("local t = {} for i = 1, 1e8 do t[i] = i end", small).kind, Kind::Memory);
  EXPECT_EQ(loadFails("local s = string.rep('x', 1e8)", small).kind, Kind::Memory);
  EXPECT_EQ(loadFails("local s = 'x' while true do s = s .. s end", small).kind, Kind::Memory);
  hooks::LuaFailure f = loadFails("local ok = pcall(string.rep, 'x', 1e8)\nlocal t = {} for i = 1, 1e8 do t[i] = i end", small);
  EXPECT_EQ(f.kind, Kind::Memory);
  EXPECT_EQ(f.line, 1) << "pcall cannot swallow a spent memory budget";
}

TEST(Sandbox, BacktrackingPatternsAreRefusedUpFront) {
  hooks::LuaFailure f = loadFails("local s = string.rep('a', 100000)\nlocal i = s:find('.-.-.-b')");
  EXPECT_EQ(f.kind, Kind::Time);
  EXPECT_NE(f.message.find("pattern"), std::string::npos);
  Loaded fine("local s = string.rep('a', 1000) .. 'b'\nassert(s:find('a.-b') == 1)\nassert(('x=1'):match('(%w)=(%d)') == 'x')\n"
              "assert(string.rep('a', 100000):find('b', 1, true) == nil)");
  EXPECT_TRUE(fine.ok) << fine.failure.message;
}

// The time budget is the hook thread's CPU time: time the thread does not
// run (here, the host's print callback sleeping, as a busy host would
// deschedule it) does not count, and a hook within its budget succeeds.
TEST(Sandbox, TheTimeBudgetIsCpuTimeNotWallTime) {
  hooks::SandboxLimits limits;
  limits.millisecondsPerCall = 200;
  hooks::LuaSandbox box("h", limits, [](const std::string&) { std::this_thread::sleep_for(std::chrono::milliseconds(150)); });
  hooks::LuaFailure failure;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(box.load("for i = 1, 4 do print(i) end\nfor i = 1, 100000 do local x = math.floor(i / 3) end", failure)) << failure.message;
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(600));  // three times the budget, on the wall clock
  // A hook that works for longer than its budget still stops.
  limits.instructionsPerCall = 1LL << 60;
  hooks::LuaSandbox busy("h", limits, [](const std::string&) {});
  EXPECT_FALSE(busy.load("for i = 1, 1e12 do local s = string.rep('x', 1000) end", failure));
  EXPECT_EQ(failure.kind, Kind::Time);
}

// The clock bounds what the instruction counter cannot see: library
// functions. Each case would run for minutes to hours without it.
TEST(Sandbox, TheClockBoundsLibraryCallsEvenThroughPcall) {
  hooks::SandboxLimits limits;
  limits.instructionsPerCall = 1LL << 60;  // only the clock and the input bounds may stop these
  limits.millisecondsPerCall = 300;
  const char* hostile[] = {
      "for i = 1, 1e9 do local s = string.rep('x', 4e6) end",
      "local s = string.rep('x', 1e6)\nfor i = 1, 1e9 do local t = s:upper() end",
      "for i = 1, 1e9 do pcall(string.rep, 'x', 4e6) end",
      "pcall(function() while true do local s = string.rep('y', 1e6) end end)\nwhile true do end",
      "xpcall(function() while true do end end, function(e) while true do end end)",
      "local t = {} for i = 1, 1e9 do t[#t % 1000 + 1] = tostring(i) end",
      "local i = ('('):rep(400000):find('%b()')",
      "local s = ('x'):rep(200000)\nlocal i = s:find('[' .. ('a'):rep(100000) .. ']')",
      "local s = ('a'):rep(20000)\nfor w in s:gmatch('a-a-b') do end",
      "local t = {} for i = 1, 2000000 do t[i] = 2000000 - i end\ntable.sort(t)",
  };
  for (const char* code : hostile) {
    auto start = std::chrono::steady_clock::now();
    hooks::LuaFailure f = loadFails(code, limits);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(f.kind == Kind::Time || f.kind == Kind::Memory) << code << ": " << f.message;
    EXPECT_LT(seconds, 5.0) << code;
    EXPECT_GE(f.line, 1) << code;
  }
  // A later call has its own budget; ordinary work is unaffected.
  Loaded fine("function f() local t = {} for i = 1, 1000 do t[i] = -i end table.sort(t) return t[1] end", limits);
  ASSERT_TRUE(fine.ok) << fine.failure.message;
  hooks::LuaFailure f;
  bool ok = false;
  EXPECT_EQ(callNumber(fine.box, "f", f, ok), -1000);
  EXPECT_TRUE(ok) << f.message;
}

TEST(Sandbox, FailuresCarryTheLineAndTheTraceback) {
  Loaded l("local function inner(t)\n  return t.x.y\nend\nfunction outer()\n  local v = inner({})\n  return v\nend\n");
  ASSERT_TRUE(l.ok);
  hooks::LuaFailure f;
  bool ok = true;
  callNumber(l.box, "outer", f, ok);
  ASSERT_FALSE(ok);
  EXPECT_EQ(f.kind, Kind::Runtime);
  EXPECT_EQ(f.line, 2);
  EXPECT_EQ(f.message.find("h:"), std::string::npos) << "the chunk prefix is dropped: " << f.message;
  std::vector<int> lines;
  for (const auto& fr : f.traceback)
    if (fr.inHook) lines.push_back(fr.line);
  EXPECT_EQ(lines, (std::vector<int>{2, 5}));
  hooks::LuaFailure syntax = loadFails("function f(\n  return 1\nend");
  EXPECT_EQ(syntax.kind, Kind::Syntax);
  EXPECT_EQ(syntax.line, 2);
}

// ------------------------------------------------------------ hooks in a run

TEST(RunHooks, EstimateStepsThroughWithTimingAndHooksCanStopIt) {
  session::Session s;
  const char* hook = R"(
hook budget = lua """
spent = 0
function on_step(ctx)
  assert(ctx.source == "estimate" and ctx.steps >= ctx.step and ctx.step_time > 0 and #ctx.memory == 4)
  spent = spent + ctx.step_time
  ctx:log("spent", spent)
  ctx:log("lr", ctx.lr)
  if ctx.phase == "two" and ctx.step == 40 then ctx:stop("enough") end
end
"""
)";
  const cost::Estimate* e = estimate(s, script(hook, "budget"));
  ASSERT_NE(e, nullptr) << diagnostics(s);
  ASSERT_FALSE(s.diagnostics().hasErrors()) << diagnostics(s);
  const cost::RunEstimate& run = e->runs.at(0);
  ASSERT_TRUE(run.hooks.has_value());
  const cost::SteppedRun& h = *run.hooks;
  EXPECT_TRUE(h.stopped);
  EXPECT_NE(h.stopReason.find("enough"), std::string::npos) << h.stopReason;
  ASSERT_EQ(h.phases.size(), 2u);
  EXPECT_EQ(h.phases[0].stepsRun, 500);
  EXPECT_EQ(h.phases[1].stepsRun, 40);
  const double expected = 500 * run.phases[0].stepTime + 40 * run.phases[1].stepTime;
  EXPECT_NEAR(h.timeToTrain, expected, 1e-9 * expected);
  EXPECT_NEAR(h.phases[1].logged.at("spent"), expected, 1e-6 * expected);
  EXPECT_NEAR(h.phases[1].logged.at("lr"), 0.001, 1e-12);
}

TEST(RunHooks, TrainingMetricsAreErrorsUnderEstimateNotNil) {
  for (const char* field : {"loss", "loss_scale", "skipped", "metrics"}) {
    session::Session s;
    std::string hook = std::string("hook h = lua \"function on_step(ctx) local x = ctx.") + field + " end\"\n";
    estimate(s, script(hook, "h"));
    ASSERT_TRUE(s.diagnostics().hasErrors()) << field;
    EXPECT_EQ(s.diagnostics().all().front().code, "IPU4006") << diagnostics(s);
  }
  // Guarded by ctx.source, the same hook is fine.
  session::Session s;
  estimate(s, script("hook h = lua \"function on_step(ctx) if ctx.source == 'emulator' then local x = ctx.loss end end\"\n", "h"));
  EXPECT_FALSE(s.diagnostics().hasErrors()) << diagnostics(s);
}

TEST(RunHooks, PhaseHooksSeeEveryPhase) {
  session::Session s;
  const char* hook = R"(
hook phases = lua """
seen = ""
function on_phase_start(ctx) seen = seen .. "<" .. ctx.phase .. ctx.index .. (ctx.from or "-") end
function on_phase_end(ctx) seen = seen .. ">" .. ctx.steps_run end
function on_step(ctx) if ctx.step == 1 then ctx:log("seen_len", #seen) end end
"""
)";
  const cost::Estimate* e = estimate(s, script(hook, "phases"));
  ASSERT_NE(e, nullptr);
  ASSERT_FALSE(s.diagnostics().hasErrors()) << diagnostics(s);
  const auto& h = *e->runs[0].hooks;
  EXPECT_FALSE(h.stopped);
  // "<one1-" (6 chars) before phase one's first step; "<one1->500<two2one" (18) before phase two's.
  EXPECT_EQ(h.phases[0].logged.at("seen_len"), 6);
  EXPECT_EQ(h.phases[1].logged.at("seen_len"), 18);
}

TEST(RunHooks, LuaScheduleDrivesTheLearningRate) {
  session::Session s;
  const char* hooks = R"(
hook schedule = lua """
function my_lr(step, phase) return 0.001 * step end
"""
hook watch = lua """
function on_step(ctx) ctx:log("lr", ctx.lr) end
"""
)";
  const cost::Estimate* e = estimate(s, script(hooks, "watch", "lua my_lr"));
  ASSERT_NE(e, nullptr) << diagnostics(s);
  ASSERT_FALSE(s.diagnostics().hasErrors()) << diagnostics(s);
  EXPECT_NEAR(e->runs[0].hooks->phases[0].logged.at("lr"), 0.5, 1e-12);  // step 500 of phase one
  // The schedule's hook is used by the run, so it is not reported unused.
  for (const auto& d : s.diagnostics().all()) EXPECT_NE(d.code, "IPU1020") << d.message;
}

TEST(RunHooks, LossScalePolicyGetsThePreviousStep) {
  session::Session s;
  const char* hooks = R"(
hook policy = lua """
function scale(state)
  if state.scale == nil then return 1024 end
  if state.overflow then return state.scale / 2 end
  return state.scale * 2
end
"""
)";
  std::string text = script(hooks, "policy");
  text.replace(text.find("precision: fp16_sr"), 18, "precision: fp16_sr with { loss_scale: lua scale }");
  base::FileId f = s.addSource(test::sourceDir() + "/tests/hooks_test.ipu", text);
  const ir::ExecutionPlan* plan = s.plan(f);
  ASSERT_NE(plan, nullptr) << diagnostics(s);
  ASSERT_FALSE(s.diagnostics().hasErrors()) << diagnostics(s);
  EXPECT_EQ(plan->runs[0].phases[0].precision.lossScale.kind, ir::LossScaleKind::Lua);
  hooks::RunHooks rh(*s.hooks(), plan->runs[0], train::Source::Emulator);
  train::Policies p = rh.policies();
  ASSERT_TRUE(static_cast<bool>(p.lossScale));
  train::LossScaleState st;
  st.phase = "one";
  st.step = 1;
  EXPECT_EQ(p.lossScale(st), 1024);
  st.scale = 1024;
  st.overflow = true;
  EXPECT_EQ(p.lossScale(st), 512);
  st.overflow = false;
  EXPECT_EQ(p.lossScale(st), 2048);
}

TEST(RunHooks, AStaleCtxAndABadLogAreRefused) {
  session::Session s;
  estimate(s, script("hook h = lua \"function on_step(ctx) if kept then kept:log('x', 1) end kept = ctx end\"\n", "h"));
  ASSERT_TRUE(s.diagnostics().hasErrors());
  EXPECT_EQ(s.diagnostics().all().front().code, "IPU4005") << diagnostics(s);
  session::Session s2;
  estimate(s2, script("hook h = lua \"function on_step(ctx) ctx:log('x', 0/0) end\"\n", "h"));
  ASSERT_TRUE(s2.diagnostics().hasErrors());
  EXPECT_EQ(s2.diagnostics().all().front().code, "IPU4008") << diagnostics(s2);
}

TEST(RunHooks, AStaleCtxCannotEvenBeReadAndStopWantsText) {
  session::Session s;
  estimate(s, script("hook h = lua \"function on_step(ctx) if kept then local n = kept.step end kept = ctx end\"\n", "h"));
  ASSERT_TRUE(s.diagnostics().hasErrors());
  EXPECT_EQ(s.diagnostics().all().front().code, "IPU4005") << diagnostics(s);
  session::Session s2;
  estimate(s2, script("hook h = lua \"function on_step(ctx) ctx:stop({}) end\"\n", "h"));
  ASSERT_TRUE(s2.diagnostics().hasErrors());
  EXPECT_EQ(s2.diagnostics().all().front().code, "IPU4008") << diagnostics(s2);
  EXPECT_EQ(diagnostics(s2).find("table: 0x"), std::string::npos) << diagnostics(s2);
}

TEST(RunHooks, AFailingHookStopsTheRunAndIsReportedOnce) {
  session::Session s;
  const cost::Estimate* e =
      estimate(s, script("hook h = lua \"function on_step(ctx) if ctx.step == 7 then error('boom') end end\"\n", "h"));
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(s.diagnostics().errorCount(), 1u) << diagnostics(s);
  EXPECT_EQ(s.diagnostics().all().front().code, "IPU4002");
  EXPECT_NE(s.diagnostics().all().front().message.find("at step 7 of phase `one`"), std::string::npos);
  ASSERT_TRUE(e->runs[0].hooks.has_value());
  EXPECT_TRUE(e->runs[0].hooks->stopped);
  EXPECT_EQ(e->runs[0].hooks->phases[0].stepsRun, 7);
}

// ------------------------------------------------------- a sweep's trial

// Drives the hook `h` of a planned script's run through one phase start and
// one step, as a trial of `trial` (or as a plain run when it is null); returns
// what the hook logged and whether it stopped the run, and why.
struct Driven {
  std::map<std::string, double> logged;
  train::StopRequest stop;
  std::string failures;
};
Driven driveOneStep(const std::string& hookCode, const hooks::SweepTrial* trial) {
  session::Session s;
  base::FileId f = s.addSource(test::sourceDir() + "/tests/hooks_test.ipu", script("hook h = lua \"\"\"\n" + hookCode + "\n\"\"\"\n", "h"));
  const ir::ExecutionPlan* plan = s.plan(f);
  Driven out;
  if (plan == nullptr || s.diagnostics().hasErrors()) {
    out.failures = diagnostics(s);
    return out;
  }
  hooks::RunHooks rh(*s.hooks(), plan->runs[0], train::Source::Emulator);
  rh.setSweepTrial(trial);
  train::PhaseInfo pi;
  pi.run = "t";
  pi.phase = "one";
  pi.steps = 500;
  train::PhaseDecision d = rh.phaseStart(train::Source::Emulator, pi);
  train::StepInfo si;
  si.run = "t";
  si.phase = "one";
  si.step = 1;
  si.globalStep = 1;
  si.loss = 6.5;
  si.lr = 0.001;
  out.stop = rh.step(train::Source::Emulator, si, out.logged);
  if (d.stop.stop && !out.stop.stop) out.stop = d.stop;
  out.failures = diagnostics(s);
  return out;
}

hooks::SweepTrial aTrial() {
  hooks::SweepTrial t;
  t.sweep = "lr_grid";
  t.method = "grid";
  t.metric = "eval.loss";
  t.goal = "minimize";
  t.best = 4.25;
  t.index = 3;
  t.key = "optimizer.weight_decay=0.1 phase.one.micro_batch=8 phase.one.lr=0.003 precision=fp16_sr";
  t.params = {{"optimizer.weight_decay", hooks::CtxValue::ofNumber(0.1)},
              {"phase.one.micro_batch", hooks::CtxValue::ofInteger(8)},
              {"phase.one.lr", hooks::CtxValue::ofNumber(0.003)},
              {"precision", hooks::CtxValue::ofString("fp16_sr")}};
  t.startFrom = "/runs/t/1/checkpoints/one/final.ipt";
  return t;
}

TEST(RunHooks, ATrialSeesItsSweepAndItsValues) {
  const hooks::SweepTrial trial = aTrial();
  Driven d = driveOneStep(R"(
local started = nil
function on_phase_start(ctx)
  started = ctx.sweep.name .. "/" .. ctx.trial.index
end
function on_step(ctx)
  local s, t = ctx.sweep, ctx.trial
  ctx:log("is_lr_grid", (s.name == "lr_grid" and s.method == "grid" and s.metric == "eval.loss" and s.goal == "minimize") and 1 or 0)
  ctx:log("best", s.best)
  ctx:log("index", t.index)
  ctx:log("lr", t.params["phase.one.lr"])
  ctx:log("micro_batch_is_integer", math.type(t.params["phase.one.micro_batch"]) == "integer" and 1 or 0)
  ctx:log("precision_is_fp16_sr", t.params.precision == "fp16_sr" and 1 or 0)
  ctx:log("key_len", #t.key)
  ctx:log("start_from_final", t.start_from:match("final%.ipt$") and 1 or 0)
  ctx:log("started_here", started == "lr_grid/3" and 1 or 0)
  if t.params["phase.one.lr"] > 0.002 then ctx:stop("lr " .. t.params["phase.one.lr"] .. " of trial " .. t.index .. " is too high") end
end)", &trial);
  ASSERT_EQ(d.failures, "");
  EXPECT_EQ(d.logged.at("is_lr_grid"), 1);
  EXPECT_EQ(d.logged.at("best"), 4.25);
  EXPECT_EQ(d.logged.at("index"), 3);
  EXPECT_EQ(d.logged.at("lr"), 0.003);
  EXPECT_EQ(d.logged.at("micro_batch_is_integer"), 1);
  EXPECT_EQ(d.logged.at("precision_is_fp16_sr"), 1);
  EXPECT_EQ(d.logged.at("key_len"), static_cast<double>(trial.key.size()));
  EXPECT_EQ(d.logged.at("start_from_final"), 1);
  EXPECT_EQ(d.logged.at("started_here"), 1);
  // The hook's stop, with its reason, as for any run.
  EXPECT_TRUE(d.stop.stop);
  EXPECT_EQ(d.stop.reason, "hook `h`: lr 0.003 of trial 3 is too high");
}

TEST(RunHooks, OutsideASweepCtxSweepAndTrialAreNil) {
  Driven d = driveOneStep(R"(
function on_step(ctx)
  ctx:log("nil_sweep", ctx.sweep == nil and 1 or 0)
  ctx:log("nil_trial", ctx.trial == nil and 1 or 0)
end)", nullptr);
  ASSERT_EQ(d.failures, "");
  EXPECT_EQ(d.logged.at("nil_sweep"), 1);
  EXPECT_EQ(d.logged.at("nil_trial"), 1);
  EXPECT_FALSE(d.stop.stop);
  // A trial with no best yet and no checkpoint to start from: those fields are nil.
  hooks::SweepTrial first = aTrial();
  first.best.reset();
  first.startFrom.clear();
  Driven e = driveOneStep(R"(
function on_step(ctx)
  ctx:log("nil_best", ctx.sweep.best == nil and 1 or 0)
  ctx:log("nil_start", ctx.trial.start_from == nil and 1 or 0)
end)", &first);
  ASSERT_EQ(e.failures, "");
  EXPECT_EQ(e.logged.at("nil_best"), 1);
  EXPECT_EQ(e.logged.at("nil_start"), 1);
}

// ------------------------------------------------------------ Lua placement

TEST(LuaPlacement, PlacesLikeTheEquivalentExplicitPipeline) {
  const char* hook = R"(
hook placement = lua """
function place(layer, info)
  assert(info.max_ipus == 4 and info.layers == 27 and info.replicas == 4)
  local n = layer.name:match("encoder%[(%d+)%]")
  if n == nil then return 0 end
  return 1 + tonumber(n) // 4
end
"""
)";
  test::Outcome lua = test::runText(script(hook, "", "0.002", "pipeline: lua place"));
  test::Outcome explicitly = test::runText(script("", "", "0.002",
                                                  "pipeline {\n ipu 0: embedding\n ipu 1: encoder[0..4]\n"
                                                  " ipu 2: encoder[4..8]\n ipu 3: encoder[8..12]\n ipu 0: mlm_head, nsp_head\n }"));
  ASSERT_NE(lua.plan, nullptr) << lua.rendered();
  ASSERT_NE(explicitly.plan, nullptr) << explicitly.rendered();
  EXPECT_TRUE(lua.errorCodes().empty()) << lua.rendered();
  const auto& a = lua.plan->runs[0].phases[0];
  const auto& b = explicitly.plan->runs[0].phases[0];
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t i = 0; i < a.layers.size(); ++i) EXPECT_EQ(a.layers[i].ipu, b.layers[i].ipu) << a.layers[i].name;
  ASSERT_EQ(a.ipus.size(), b.ipus.size());
  for (std::size_t i = 0; i < a.ipus.size(); ++i) EXPECT_DOUBLE_EQ(a.ipus[i].memory.total(), b.ipus[i].memory.total());
  EXPECT_EQ(a.mapping.pipelineIpus, 4);
}

TEST(LuaPlacement, ABadAnswerIsReportedWithTheLayer) {
  test::Outcome o = test::runText(script("hook p = lua \"function place(layer, info) if layer.index == 3 then return 'x' end return 0 end\"\n",
                                         "", "0.002", "pipeline: lua place"));
  ASSERT_FALSE(o.errorCodes().empty());
  EXPECT_EQ(o.errorCodes().front(), "IPU4008") << o.rendered();
  EXPECT_NE(o.rendered().find("`encoder[1].attention`"), std::string::npos) << o.rendered();
  EXPECT_EQ(o.errorCodes().size(), 1u) << "no knock-on memory errors:\n" << o.rendered();
}
