#!/usr/bin/env bash
# Agents that wait, and hooks that see their trial (docs/sweeps.md, "Running a
# sweep"; docs/hooks.md, ctx.sweep and ctx.trial):
# - a hook reads ctx.sweep and ctx.trial and stops a trial whose learning rate
#   is too high: the trial ends `stopped` with the hook's reason; under
#   `ipu run` (no sweep) the same hook sees nil and stops nothing;
# - an agent of a sweep `from: best(S)` waits while S has no finished trial,
#   and starts once another agent finished one; it is a user error when S can
#   no longer get one;
# - an agent of a paused sweep waits until it is resumed (then runs, and
#   `--count` still ends it), or cancelled (it leaves), or Ctrl-C (130).
set -uo pipefail
IPU="$1"
TMP="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
STORE="$TMP/sweeps.db"
fail=0
expect() {  # expect CODE DESCRIPTION -- command...
  local want="$1" what="$2"; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"; echo "--- stdout"; head -20 "$TMP/out"; echo "--- stderr"; head -30 "$TMP/err"
    fail=1
  fi
}
# waitfor FILE PATTERN SECONDS: until FILE has a line matching PATTERN.
waitfor() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# finish PID SECONDS: waits for PID to exit (killing it after SECONDS); its
# exit code goes to $code.
finish() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$1" 2>/dev/null && { kill -9 "$1"; echo "FAIL: process $1 did not end in $2 s"; fail=1; }
  wait "$1"
  code=$?
}

cat >"$TMP/s.ipu" <<'IPU'
import "std/pods"
import "std/models/bert"

chip tiny_chip = GC200 with { tiles: 16, memory: 64 MB, code_base: 1 MB }
machine tiny_machine = M2000 with { chip: tiny_chip, ipus: 4, streaming_memory: 1 GB }
pod tiny_pod {
  machine: tiny_machine
  machines: 1
}
model tiny = bert(layers: 1, hidden: 32, heads: 2, ffn: 64, vocab: 1000, positions: 64)
mapping one for tiny on tiny_pod {
  pipeline {
    ipu 0: embedding, encoder[0], mlm_head, nsp_head
  }
  replicas: 1
}
precision full {
  compute: fp32
}
hook guard = lua """
function on_step(ctx)
  if ctx.trial == nil then return end
  local lr = ctx.trial.params["phase.short.lr"]
  ctx:log("trial.index", ctx.trial.index)
  if lr > 0.01 and ctx.step >= 3 then
    ctx:stop(string.format("sweep %s (%s %s, trial %d): lr %g is too high",
                           ctx.sweep.name, ctx.sweep.goal, ctx.sweep.metric, ctx.trial.index, lr))
  end
end
"""
training tiny_trial {
  mapping: one
  precision: full
  optimizer: lamb(weight_decay: 0.01, exclude: [bias, norm])
  hooks: [guard]
  seed: 1234
  phase short {
    seq_len: 32
    masked_tokens: 5
    micro_batch: 4
    gradient_accumulation: 1
    steps: 20
    lr: 0.002 warmup 6 steps then linear to 0
  }
}
sweep src for tiny_trial {
  method: grid
  metric: minimize(eval.loss)
  parameters {
    phase.short.lr: [3e-2, 1e-3]
  }
}
sweep dep for tiny_trial {
  method: grid
  metric: minimize(eval.loss)
  parameters {
    phase.short.lr: [1e-4]
  }
  from: best(src)
}
sweep pausing for tiny_trial {
  method: grid
  metric: minimize(loss)
  parameters {
    phase.short.lr: [1e-3, 2e-3, 3e-3, 4e-3]
  }
}
sweep gone for tiny_trial {
  method: grid
  metric: minimize(eval.loss)
  parameters {
    phase.short.lr: [5e-2]
  }
}
sweep after_gone for tiny_trial {
  method: grid
  metric: minimize(eval.loss)
  parameters {
    phase.short.lr: [1e-4]
  }
  from: best(gone)
}
run tiny_trial
IPU
AGENT=("$IPU" agent --store "$STORE" --runs-dir "$TMP/runs" --script-dir "$TMP")

# --- a hook stops the first trial of `src` (lr 0.03), by its values
expect 0 "ipu sweep FILE src --count 1" -- "$IPU" sweep "$TMP/s.ipu" src --count 1 --store "$STORE" --runs-dir "$TMP/runs"
grep -q "^trial 0 .* stopped" "$TMP/err" || { echo "FAIL: the hook did not stop trial 0"; cat "$TMP/err"; fail=1; }
expect 0 "status of src" -- "$IPU" sweep status src --json --store "$STORE"
python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
t = d["trials"]
assert len(t) == 1 and t[0]["state"] == "stopped", t
assert t[0]["reason"] == "hook `guard`: sweep src (minimize eval.loss, trial 0): lr 0.03 is too high", t[0]["reason"]
assert d["state"] == "running" and d["best"] is None, d
PY
STOPPED_RUN=$(python3 -c "import json; print(json.load(open('$TMP/out'))['trials'][0]['run_id'])")
expect 0 "the stopped trial's run" -- "$IPU" runs show "$STOPPED_RUN" --json --store "$STORE"
python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "stopped" and "too high" in r["stop_reason"], (r["status"], r["stop_reason"])
assert r["metrics"]["loss"]["last_step"] == 3, r["metrics"]["loss"]
assert r["metrics"]["trial.index"]["last"] == 0, r["metrics"].get("trial.index")
PY

# --- outside a sweep, the hook sees no trial: `ipu run` trains to the end
expect 0 "ipu run FILE (no sweep)" -- "$IPU" run "$TMP/s.ipu" --runs-dir "$TMP/plain" --store "$TMP/plain.db"
grep -qi "stopped" "$TMP/out" "$TMP/err" && { echo "FAIL: the hook stopped a run that is no trial"; cat "$TMP/out" "$TMP/err"; fail=1; }

# --- `dep` starts from src's best trial: its agent waits until there is one
"$IPU" sweep "$TMP/s.ipu" dep --store "$STORE" --runs-dir "$TMP/runs" >"$TMP/dep.out" 2>"$TMP/dep.err" &
DEP=$!
PIDS+=("$DEP")
waitfor "$TMP/dep.err" "waiting for a trial to start from: sweep \`src\` has no finished trial yet (it is running)" 20 ||
  { echo "FAIL: the agent of dep does not say it waits for src"; cat "$TMP/dep.err"; fail=1; }
sleep 1
kill -0 "$DEP" 2>/dev/null || { echo "FAIL: the agent of dep left instead of waiting"; cat "$TMP/dep.err"; fail=1; }
grep -q '^trial ' "$TMP/dep.err" && { echo "FAIL: dep ran a trial before src had one"; fail=1; }
expect 0 "ipu agent src (finishes its second cell)" -- "${AGENT[@]}" src
finish "$DEP" 60
[ "$code" -eq 0 ] || { echo "FAIL: the agent of dep exited $code"; cat "$TMP/dep.err"; fail=1; }
grep -q "^trial 0 \[phase.short.lr=0.0001\] from the best trial (1) of sweep \`src\`.* finished" "$TMP/dep.err" ||
  { echo "FAIL: dep's trial did not start from src's best trial once there was one"; cat "$TMP/dep.err"; fail=1; }

# --- a sweep to start from that can no longer finish a trial: a user error
expect 0 "ipu sweep FILE gone (every trial stopped)" -- "$IPU" sweep "$TMP/s.ipu" gone --store "$STORE" --runs-dir "$TMP/runs"
expect 1 "ipu sweep FILE after_gone" -- "$IPU" sweep "$TMP/s.ipu" after_gone --store "$STORE" --runs-dir "$TMP/runs"
grep -q "sweep \`gone\` has no finished trial, and it is finished" "$TMP/err" || { echo "FAIL: no reason why after_gone cannot start"; cat "$TMP/err"; fail=1; }

# --- a paused sweep: the agent waits; resumed, it runs (`--count` ends it)
expect 0 "ipu sweep FILE pausing --count 1" -- "$IPU" sweep "$TMP/s.ipu" pausing --count 1 --store "$STORE" --runs-dir "$TMP/runs"
expect 0 "pause" -- "$IPU" sweep pause pausing --store "$STORE"
"${AGENT[@]}" pausing --count 1 >"$TMP/p1.out" 2>"$TMP/p1.err" &
P1=$!
PIDS+=("$P1")
waitfor "$TMP/p1.err" "sweep pausing is paused: waiting until it is resumed" 20 ||
  { echo "FAIL: the agent of a paused sweep does not say it waits"; cat "$TMP/p1.err"; fail=1; }
sleep 2
kill -0 "$P1" 2>/dev/null || { echo "FAIL: the agent of a paused sweep left"; cat "$TMP/p1.out" "$TMP/p1.err"; fail=1; }
grep -q '^trial ' "$TMP/p1.err" && { echo "FAIL: a trial ran while the sweep was paused"; fail=1; }
expect 0 "resume" -- "$IPU" sweep resume pausing --store "$STORE"
finish "$P1" 60
[ "$code" -eq 0 ] || { echo "FAIL: the resumed agent exited $code"; cat "$TMP/p1.err"; fail=1; }
[ "$(grep -c '^trial ' "$TMP/p1.err")" -eq 1 ] || { echo "FAIL: --count 1 after the resume did not run one trial"; cat "$TMP/p1.err"; fail=1; }

# --- paused again: cancelling it ends the waiting agent (0); Ctrl-C too (130)
expect 0 "pause again" -- "$IPU" sweep pause pausing --store "$STORE"
"${AGENT[@]}" pausing >"$TMP/p2.out" 2>"$TMP/p2.err" &
P2=$!
PIDS+=("$P2")
waitfor "$TMP/p2.err" "is paused: waiting" 20 || { echo "FAIL: the second agent does not wait"; cat "$TMP/p2.err"; fail=1; }
kill -INT "$P2"
finish "$P2" 10
[ "$code" -eq 130 ] || { echo "FAIL: Ctrl-C of a waiting agent exited $code, expected 130"; cat "$TMP/p2.err"; fail=1; }
"${AGENT[@]}" pausing >"$TMP/p3.out" 2>"$TMP/p3.err" &
P3=$!
PIDS+=("$P3")
waitfor "$TMP/p3.err" "is paused: waiting" 20 || { echo "FAIL: the third agent does not wait"; cat "$TMP/p3.err"; fail=1; }
expect 0 "cancel" -- "$IPU" sweep cancel pausing --store "$STORE"
finish "$P3" 20
[ "$code" -eq 0 ] || { echo "FAIL: the agent of a cancelled sweep exited $code"; cat "$TMP/p3.err"; fail=1; }
grep -q "the sweep is cancelled" "$TMP/p3.err" || { echo "FAIL: the agent does not say the sweep was cancelled"; cat "$TMP/p3.err"; fail=1; }
grep -q '^trial ' "$TMP/p3.err" && { echo "FAIL: a trial of a cancelled sweep ran"; fail=1; }
expect 0 "status of pausing" -- "$IPU" sweep status pausing --json --store "$STORE"
python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["state"] == "cancelled", d["state"]
assert [x["state"] for x in d["trials"]] == ["finished", "finished"], [(x["key"], x["state"]) for x in d["trials"]]
PY

[ "$fail" -eq 0 ] && echo "sweep wait tests: ok"
exit "$fail"
