#!/usr/bin/env bash
# Sweeps that start `from:` another run (docs/sweeps.md, "Starting from another
# run"): a learning-rate grid of a tiny BERT on the emulator finds a rate
# clearly better than the worst; a second sweep, `from: best(lr_grid)`, then
# starts every trial from the final checkpoint of that best trial: its runs
# record that checkpoint, and their first loss is the best trial's last one,
# far below a first loss from the initialisation. A checkpoint of a model of
# other shapes fails the trial with IPU5005; an unknown run is a user error.
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

# HIDDEN and the sweeps are filled in below.
cat >"$TMP/base.ipu" <<'IPU'
import "std/pods"
import "std/models/bert"

chip tiny_chip = GC200 with { tiles: 16, memory: 64 MB, code_base: 1 MB }
machine tiny_machine = M2000 with { chip: tiny_chip, ipus: 4, streaming_memory: 1 GB }
pod tiny_pod {
  machine: tiny_machine
  machines: 1
}
model tiny = bert(layers: 1, hidden: HIDDEN, heads: 2, ffn: 64, vocab: 1000, positions: 64)
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
    steps: 120
    lr: 0.002 warmup 6 steps then linear to 0
  }
}
IPU
sed 's/HIDDEN/32/' "$TMP/base.ipu" >"$TMP/lr.ipu"
cat >>"$TMP/lr.ipu" <<'IPU'
sweep lr_grid for tiny_trial {
  method: grid
  metric: minimize(eval.loss)
  parameters {
    phase.short.lr: [1e-5, 1e-3, 3e-2]
  }
}
sweep lr_next for tiny_trial {
  method: grid
  metric: minimize(eval.loss)
  parameters {
    phase.short.lr: [1e-4, 3e-4]
  }
  from: best(lr_grid)
}
run tiny_trial
IPU

# --- the learning-rate grid
expect 0 "ipu sweep FILE lr_grid" -- "$IPU" sweep "$TMP/lr.ipu" lr_grid --store "$STORE" --runs-dir "$TMP/runs"
cp "$TMP/out" "$TMP/grid.out"
expect 0 "status of lr_grid" -- "$IPU" sweep status lr_grid --json --store "$STORE"
cp "$TMP/out" "$TMP/grid.json"
python3 - "$TMP/grid.json" "$TMP/grid.out" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
m = {x["assignment"]["phase.short.lr"]: x["metric"] for x in d["trials"]}
assert all(x["state"] == "finished" for x in d["trials"]), d["trials"]
best, worst = min(m.values()), max(m.values())
assert worst - best > 0.1 * worst, ("the best learning rate is not clearly better than the worst", m)
assert d["best"]["metric"] == best and m[d["best"]["assignment"]["phase.short.lr"]] == best, (d["best"], m)
summary = open(sys.argv[2]).read()
lr = d["best"]["assignment"]["phase.short.lr"]
assert "phase.short.lr=%g" % lr in summary, ("the summary does not report the best rate", summary)
print("lr_grid:", m, "best lr", lr)
PY
BEST_RUN=$(python3 -c "import json; print(json.load(open('$TMP/grid.json'))['best']['run_id'])")
BEST_TRIAL=$(python3 -c "import json; print(json.load(open('$TMP/grid.json'))['best']['index'])")
expect 0 "the best trial's run" -- "$IPU" runs show "$BEST_RUN" --json --store "$STORE"
cp "$TMP/out" "$TMP/best_run.json"

# --- the second sweep starts from the best trial's final checkpoint
expect 0 "ipu sweep FILE lr_next (from: best(lr_grid))" -- "$IPU" sweep "$TMP/lr.ipu" lr_next --store "$STORE" --runs-dir "$TMP/runs"
cp "$TMP/err" "$TMP/next.err"
[ "$(grep -c "from the best trial ($BEST_TRIAL) of sweep \`lr_grid\`" "$TMP/next.err")" -eq 2 ] ||
  { echo "FAIL: the trials do not say they start from lr_grid's best trial"; cat "$TMP/next.err"; fail=1; }
expect 0 "status of lr_next" -- "$IPU" sweep status lr_next --json --store "$STORE"
cp "$TMP/out" "$TMP/next.json"
: >"$TMP/next_runs.jsonl"
for id in $(python3 -c "import json; print(' '.join(str(x['run_id']) for x in json.load(open('$TMP/next.json'))['trials']))"); do
  "$IPU" runs show "$id" --json --store "$STORE" | python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)))" >>"$TMP/next_runs.jsonl" ||
    { echo "FAIL: runs show $id"; fail=1; }
done
python3 - "$TMP/best_run.json" "$TMP/grid.json" "$TMP/next.json" "$TMP/next_runs.jsonl" <<'PY' || fail=1
import json, os, sys
best = json.load(open(sys.argv[1]))
grid = json.load(open(sys.argv[2]))
nxt = json.load(open(sys.argv[3]))
runs = [json.loads(l) for l in open(sys.argv[4])]

def artifacts(run, kind):
    # A checkpoint's path is relative to its run directory (docs/tracking.md, "Artifacts").
    return [os.path.join(a.get("run_directory") or "", a["path"]) for a in run["artifacts"] if a["kind"] == kind]

def losses(run):
    d = artifacts(run, "run_directory")[0]
    return [json.loads(l)["loss"] for l in open(os.path.join(d, "metrics.jsonl"))]

final = [p for p in artifacts(best, "checkpoint") if p.endswith("final.ipt")]
assert len(final) == 1, ("the best trial has one final checkpoint", artifacts(best, "checkpoint"))
final = final[0]
best_losses = losses(best)
best_last = best_losses[-1]
assert all(x["state"] == "finished" for x in nxt["trials"]) and len(runs) == 2, nxt["trials"]
runs.sort(key=lambda r: r["id"])
for r in runs:
    p = r["parameters"]
    # Recorded in the run: which checkpoint, which run, which trial of which sweep.
    assert p["start_from"] == final, ("the trial did not start from the best trial's final checkpoint", p.get("start_from"), final)
    assert p["start_from.run"] == str(best["id"]), p
    assert p["start_from.trial"] == str(grid["best"]["index"]), p
    assert p["sweep"] == "lr_next", p
    assert "from:" + best["name"] in r["tags"], r["tags"]
# Every trial from scratch starts on the same batch (same seed, same data
# order) with the initialisation's loss: the best trial's own first loss.
# A trial from its final checkpoint sees that batch first too.
def mean(xs):
    return sum(xs) / len(xs)
scratch_first = best_losses[0]
best_final = mean(best_losses[-10:])
best_eval = grid["best"]["metric"]
print("first loss from scratch:", scratch_first, "| best trial: last 10 losses", round(best_final, 3), "eval.loss", best_eval)
for r, t in zip(runs, sorted(nxt["trials"], key=lambda x: x["run_id"])):
    l = losses(r)
    print("  lr_next", t["key"], "first loss", l[0], "first 10", round(mean(l[:10]), 3), "eval.loss", t["metric"])
    assert scratch_first - l[0] > 1.0, ("the trial's first loss is not far below the first loss from scratch", l[0], scratch_first)
    assert abs(mean(l[:10]) - best_final) < 0.75, ("the trial does not start near the best trial's final loss", l[:10], best_final)
    # Small learning rates barely move the weights: the held-out loss stays the best trial's.
    assert abs(t["metric"] - best_eval) < 0.05, ("the trial's held-out loss is not the best trial's", t["metric"], best_eval)
PY

# `ipu runs` shows where the trials started (their tag).
expect 0 "ipu runs" -- "$IPU" runs --store "$STORE"
grep -q "from:tiny_trial-$BEST_RUN" "$TMP/out" || { echo "FAIL: ipu runs does not show the start"; cat "$TMP/out"; fail=1; }

# --- a checkpoint of a model of other shapes: the trial fails with IPU5005
sed 's/HIDDEN/48/' "$TMP/base.ipu" >"$TMP/wide.ipu"
cat >>"$TMP/wide.ipu" <<IPU
sweep wide for tiny_trial {
  method: grid
  metric: minimize(eval.loss)
  parameters {
    phase.short.lr: [1e-3]
  }
  from: checkpoint("$BEST_RUN")
}
run tiny_trial
IPU
expect 0 "ipu sweep FILE wide (from a checkpoint of other shapes)" -- "$IPU" sweep "$TMP/wide.ipu" wide --store "$STORE" --runs-dir "$TMP/runs"
grep -q "failed: IPU5005" "$TMP/err" || { echo "FAIL: the incompatible checkpoint is not IPU5005"; cat "$TMP/err"; fail=1; }
expect 0 "status of wide" -- "$IPU" sweep status wide --json --store "$STORE"
python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
t = json.load(open(sys.argv[1]))["trials"]
assert len(t) == 1 and t[0]["state"] == "failed", t
assert "IPU5005" in t[0]["reason"] and "48" in t[0]["reason"] and "32" in t[0]["reason"], t[0]["reason"]
PY

# --- a run the store does not have: a user error before any trial
sed -e "s/checkpoint(\"$BEST_RUN\")/checkpoint(\"tiny_trial-999\")/" -e 's/sweep wide/sweep nowhere/' "$TMP/wide.ipu" >"$TMP/nowhere.ipu"
expect 1 "ipu sweep FILE nowhere (from an unknown run)" -- "$IPU" sweep "$TMP/nowhere.ipu" nowhere --store "$STORE" --runs-dir "$TMP/runs"
grep -q "no run \`tiny_trial-999\`" "$TMP/err" || { echo "FAIL: an unknown run is not named"; cat "$TMP/err"; fail=1; }
grep -q '^trial ' "$TMP/err" && { echo "FAIL: a trial ran without a checkpoint to start from"; fail=1; }
# ...and no sweep is recorded that could never run a trial (it would stay running, empty).
expect 0 "sweep list after nowhere" -- "$IPU" sweep list --json --store "$STORE"
python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
names = [s["name"] for s in json.load(open(sys.argv[1]))]
assert "nowhere" not in names and "wide" in names, names
PY

[ "$fail" -eq 0 ] && echo "sweep from tests: ok"
exit "$fail"
