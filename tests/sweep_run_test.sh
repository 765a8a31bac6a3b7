#!/usr/bin/env bash
# Running sweeps (docs/sweeps.md, "Running a sweep"): a learning-rate grid of a
# tiny BERT trained on the emulator by `ipu sweep FILE`, checked through
# `ipu sweep status --json`; re-running it runs nothing; a second agent
# (`ipu agent`) joins a random sweep; a sweep of a predicted metric is
# estimated; hyperband stops a poor trial early; usage and user errors exit
# 2 and 1.
set -uo pipefail
IPU="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
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

# A tiny BERT with short trials: three peak learning rates two decades apart.
cat >"$TMP/lr.ipu" <<'IPU'
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
training tiny_trial {
  mapping: one
  precision: full
  optimizer: lamb(weight_decay: 0.01, exclude: [bias, norm])
  seed: 1234
  phase short {
    seq_len: 32
    masked_tokens: 5
    micro_batch: 4
    gradient_accumulation: 1
    steps: 150
    lr: 0.002 warmup 6 steps then linear to 0
  }
}
sweep lr_grid for tiny_trial {
  method: grid
  metric: minimize(eval.loss)
  parameters {
    phase.short.lr: [1e-5, 1e-3, 3e-2]
  }
}
sweep lr_random for tiny_trial {
  method: random
  metric: minimize(eval.loss)
  parameters {
    phase.short.lr: log_uniform(1e-4, 1e-2)
  }
  run_cap: 5
  seed: 3
}
sweep batch_speed for tiny_trial {
  method: grid
  metric: maximize(samples_per_s)
  parameters {
    phase.short.micro_batch: [1, 8]
  }
}
run tiny_trial
IPU

# --- the grid, by `ipu sweep FILE NAME`
expect 0 "ipu sweep FILE lr_grid" -- "$IPU" sweep "$TMP/lr.ipu" lr_grid --store "$STORE" --runs-dir "$TMP/runs"
cp "$TMP/err" "$TMP/grid.err"
[ "$(grep -c '^trial ' "$TMP/grid.err")" -eq 3 ] || { echo "FAIL: the grid did not print one line per trial"; cat "$TMP/grid.err"; fail=1; }
grep -q 'best' "$TMP/grid.err" || { echo "FAIL: progress lacks the best so far"; fail=1; }
grep -q 'done 3, running 0' "$TMP/grid.err" || { echo "FAIL: progress lacks the counts"; cat "$TMP/grid.err"; fail=1; }
grep -q 'best trial' "$TMP/out" || { echo "FAIL: the summary does not report the best trial"; cat "$TMP/out"; fail=1; }
expect 0 "sweep status --json" -- "$IPU" sweep status lr_grid --json --store "$STORE"
cp "$TMP/out" "$TMP/grid1.json"
python3 - "$TMP/grid1.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
t = d["trials"]
keys = sorted(x["key"] for x in t)
assert keys == sorted(["phase.short.lr=1e-05", "phase.short.lr=0.001", "phase.short.lr=0.03"]), ("not every cell once", keys)
assert all(x["state"] == "finished" for x in t), ("a cell did not finish", [(x["key"], x["state"]) for x in t])
assert all(x["run_id"] is not None for x in t), "a trial is not linked to its run"
assert len({x["run_id"] for x in t}) == 3, "trials share a run"
m = {x["key"]: x["metric"] for x in t}
best, worst = min(m.values()), max(m.values())
assert d["best"]["metric"] == best, (d["best"], m)
# lr 1e-5 barely moves the weights in 150 steps: the best is clearly better.
assert m["phase.short.lr=1e-05"] == worst, ("1e-5 is not the worst", m)
assert worst - best > 0.1 * worst, ("the best lr is not clearly better than the worst", m)
assert d["state"] == "finished", ("the grid is done but the sweep is", d["state"])
print("grid:", m)
PY

# --- each trial is a recorded run of the store, with its metric
RUN_ID=$(python3 -c "import json; print(json.load(open('$TMP/grid1.json'))['best']['run_id'])")
expect 0 "the best trial's run is in the store" -- "$IPU" runs show "$RUN_ID" --store "$STORE" --json
grep -q 'eval.loss' "$TMP/out" || { echo "FAIL: the trial's run lacks eval.loss"; fail=1; }

# --- re-running the finished grid runs nothing again
expect 0 "re-run ipu sweep FILE lr_grid" -- "$IPU" sweep "$TMP/lr.ipu" lr_grid --store "$STORE" --runs-dir "$TMP/runs"
grep -q '^trial ' "$TMP/err" && { echo "FAIL: re-running a finished grid ran a trial"; cat "$TMP/err"; fail=1; }
grep -q 'resumed' "$TMP/err" || { echo "FAIL: re-running does not say the sweep was resumed"; fail=1; }
expect 0 "sweep status --json again" -- "$IPU" sweep status lr_grid --json --store "$STORE"
python3 - "$TMP/grid1.json" "$TMP/out" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ka = {(x["key"], x["run_id"], x["metric"]) for x in a["trials"]}
kb = {(x["key"], x["run_id"], x["metric"]) for x in b["trials"]}
assert ka == kb, ("re-running changed the trials", ka, kb)
PY

# --- a random sweep: one agent by `ipu sweep`, a second joins by `ipu agent`
expect 0 "ipu sweep FILE lr_random --count 1" -- "$IPU" sweep "$TMP/lr.ipu" lr_random --count 1 --store "$STORE" --runs-dir "$TMP/runs"
[ "$(grep -c '^trial ' "$TMP/err")" -eq 1 ] || { echo "FAIL: --count 1 did not run one trial"; cat "$TMP/err"; fail=1; }
expect 0 "ipu agent lr_random --count 2" -- "$IPU" agent lr_random --count 2 --store "$STORE" --runs-dir "$TMP/runs" --script-dir "$TMP"
[ "$(grep -c '^trial ' "$TMP/err")" -eq 2 ] || { echo "FAIL: the agent did not run two trials"; cat "$TMP/err"; fail=1; }
expect 0 "status of the random sweep" -- "$IPU" sweep status lr_random --json --store "$STORE"
python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
t = d["trials"]
assert len(t) == 3 and all(x["state"] == "finished" for x in t), [(x["key"], x["state"]) for x in t]
assert len({x["agent"] for x in t}) == 2, ("two agents ran it", [x["agent"] for x in t])
lrs = [x["assignment"]["phase.short.lr"] for x in t]
assert len(set(lrs)) == 3 and all(1e-4 <= v <= 1e-2 for v in lrs), lrs
PY

# --- a predicted metric: each trial is estimated (a run of kind estimate), not trained
expect 0 "ipu sweep FILE batch_speed (estimated)" -- "$IPU" sweep "$TMP/lr.ipu" batch_speed --store "$STORE" --runs-dir "$TMP/runs"
expect 0 "status of the estimated sweep" -- "$IPU" sweep status batch_speed --json --store "$STORE"
cp "$TMP/out" "$TMP/speed.json"
python3 - "$TMP/speed.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
m = {x["assignment"]["phase.short.micro_batch"]: x["metric"] for x in d["trials"]}
assert set(m) == {1, 8} and all(x["state"] == "finished" for x in d["trials"]), d["trials"]
assert m[8] > m[1], ("a larger micro batch is not predicted faster", m)
assert d["best"]["assignment"]["phase.short.micro_batch"] == 8
PY
SPEED_RUN=$(python3 -c "import json; print(json.load(open('$TMP/speed.json'))['best']['run_id'])")
expect 0 "the estimated trial's run" -- "$IPU" runs show "$SPEED_RUN" --store "$STORE" --json
grep -q '"estimate"' "$TMP/out" || { echo "FAIL: the predicted trial is not an estimate run"; head -c 600 "$TMP/out"; fail=1; }
[ -d "$TMP/runs/tiny_trial" ] || { echo "FAIL: trained trials left no run directory"; fail=1; }

# --- hyperband: the second trial, with a learning rate far too small, is
# stopped early (the judge reads the trials' loss curves from the store).
sed -e 's/steps: 150/steps: 4000/' -e '/^sweep lr_random/,$d' "$TMP/lr.ipu" >"$TMP/hb.ipu"
cat >>"$TMP/hb.ipu" <<'IPU'
sweep lr_hyperband for tiny_trial {
  method: grid
  metric: minimize(loss)
  parameters {
    phase.short.lr: [3e-2, 1e-5]
  }
  early_terminate: hyperband(min_iter: 100, eta: 3)
}
run tiny_trial
IPU
expect 0 "ipu sweep FILE lr_hyperband" -- "$IPU" sweep "$TMP/hb.ipu" lr_hyperband --store "$STORE" --runs-dir "$TMP/runs"
grep -q 'stopped' "$TMP/err" || { echo "FAIL: hyperband stopped no trial"; cat "$TMP/err"; fail=1; }
expect 0 "status of the hyperband sweep" -- "$IPU" sweep status lr_hyperband --json --store "$STORE"
cp "$TMP/out" "$TMP/hb.json"
python3 - "$TMP/hb.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
s = {x["key"]: x for x in d["trials"]}
good, bad = s["phase.short.lr=0.03"], s["phase.short.lr=1e-05"]
assert good["state"] == "finished", good
assert bad["state"] == "stopped" and "hyperband" in bad["reason"], bad
assert bad["metric"] is not None and bad["metric"] > good["metric"], (good["metric"], bad["metric"])
PY
BAD_RUN=$(python3 -c "import json; d=json.load(open('$TMP/hb.json')); print([x for x in d['trials'] if x['key']=='phase.short.lr=1e-05'][0]['run_id'])")
expect 0 "the stopped trial's run" -- "$IPU" runs show "$BAD_RUN" --store "$STORE" --json
python3 -c "
import json,sys; d=json.load(open('$TMP/out')); n=d['metrics']['loss']['last_step']
assert 100 <= n < 4000, ('the stopped trial trained', n, 'steps')" || { echo "FAIL: the stopped trial did not stop early"; fail=1; }
# Its run is recorded as stopped by hyperband, not cancelled by a Ctrl-C, so
# `--where "status = stopped"` finds it.
python3 -c "
import json,sys; d=json.load(open('$TMP/out'))
assert d['status'] == 'stopped' and 'hyperband' in d['stop_reason'], (d['status'], d['stop_reason'])" \
  || { echo "FAIL: the stopped trial's run is not recorded as stopped by hyperband"; fail=1; }
expect 0 "runs stopped" -- "$IPU" runs --where "status = stopped" --columns id --store "$STORE"
grep -qx "$BAD_RUN" "$TMP/out" || { echo "FAIL: --where 'status = stopped' does not find run $BAD_RUN"; cat "$TMP/out"; fail=1; }

# --- the retry policy: an agent killed mid-trial with --max-attempts 1 leaves a
# trial that the next agent fails instead of queueing it again.
sed 's/steps: 150/steps: 1000000/' "$TMP/lr.ipu" >"$TMP/slow.ipu"
SLOW="$TMP/slow.db"
"$IPU" sweep "$TMP/slow.ipu" lr_grid --store "$SLOW" --runs-dir "$TMP/slow_runs" --threads 1 --stale-after 1 \
  --max-attempts 1 >"$TMP/slow1.out" 2>&1 &
victim=$!
for _ in $(seq 1 300); do
  "$IPU" sweep status lr_grid --store "$SLOW" --json >"$TMP/slow.json" 2>/dev/null &&
    python3 -c "import json,sys; d=json.load(open('$TMP/slow.json')); sys.exit(0 if any(t['state']=='running' for t in d['trials']) else 1)" &&
    break
  sleep 0.1
done
kill -9 "$victim" 2>/dev/null; wait "$victim" 2>/dev/null
expect 0 "an agent after a killed one, --max-attempts 1" -- "$IPU" agent lr_grid --store "$SLOW" --runs-dir "$TMP/slow_runs" \
  --script-dir "$TMP" --steps 5 --stale-after 1 --max-attempts 1
expect 0 "status after the retry policy" -- "$IPU" sweep status lr_grid --store "$SLOW" --json
python3 - "$TMP/out" <<'PY' || { echo "FAIL: --max-attempts 1 did not fail the killed agent's trial"; cat "$TMP/out" | head -40; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
states = {t["index"]: (t["state"], t["attempts"]) for t in d["trials"]}
assert states[0] == ("failed", 1), states
assert states[1][0] == "finished" and states[2][0] == "finished", states
PY
expect 2 "--max-attempts 0" -- "$IPU" agent lr_grid --store "$SLOW" --max-attempts 0

# --- errors
expect 2 "ipu agent without a sweep" -- "$IPU" agent --store "$STORE"
expect 1 "ipu agent with an unknown sweep" -- "$IPU" agent lr_gird --store "$STORE"
grep -q 'lr_grid' "$TMP/err" || { echo "FAIL: no did-you-mean for an unknown sweep"; fail=1; }
expect 2 "ipu sweep FILE with several sweeps and no name" -- "$IPU" sweep "$TMP/lr.ipu" --store "$STORE"
expect 1 "ipu sweep FILE with an unknown sweep" -- "$IPU" sweep "$TMP/lr.ipu" lr_gridd --store "$STORE"
expect 2 "--count 0" -- "$IPU" sweep "$TMP/lr.ipu" lr_grid --count 0 --store "$STORE"
expect 2 "an unknown option" -- "$IPU" agent lr_grid --bogus --store "$STORE"
expect 1 "a missing script" -- "$IPU" sweep "$TMP/missing.ipu" --store "$STORE"
expect 0 "ipu sweep FILE --help" -- "$IPU" sweep "$TMP/lr.ipu" --help
grep -q 'ipu agent SWEEP' "$TMP/out" || { echo "FAIL: help does not describe ipu agent"; fail=1; }
printf 'training t {\n  bogus: 1\n}\n' >"$TMP/bad.ipu"
expect 1 "a script with errors" -- "$IPU" sweep "$TMP/bad.ipu" --store "$STORE"

[ "$fail" -eq 0 ] && echo "sweep run tests: ok"
exit "$fail"
