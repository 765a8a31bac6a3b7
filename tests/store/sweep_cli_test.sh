#!/usr/bin/env bash
# `ipu sweep list|status|pause|resume|cancel` as a user runs them: exit codes
# (0 ok, 1 a problem, 2 a usage error), did-you-mean for an unknown sweep or
# subcommand, the tables and the --json documents (docs/sweeps.md), and the
# state changes as agents see them. The sweeps are made and run by the
# test agent (ipu_sweep_agent: the grid of tests/store/sweep_grid.h).
set -uo pipefail
IPU="$1"; AGENT="$2"; ROOT="$3"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail=0
expect() {  # expect CODE DESCRIPTION -- command...
  local want="$1" what="$2"; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"; echo "--- stdout"; head -20 "$TMP/out"; echo "--- stderr"; head -20 "$TMP/err"
    fail=1
  fi
}
has() {  # has FILE TEXT DESCRIPTION
  grep -qF -- "$2" "$1" || { echo "FAIL: $3: no '$2' in:"; head -20 "$1"; fail=1; }
}
STORE="$TMP/ipu.db"

expect 1 "sweep list without a store" -- "$IPU" sweep list --store "$STORE"
has "$TMP/err" "there is no store at" "a missing store is said"
expect 2 "sweep without a subcommand" -- "$IPU" sweep
expect 2 "an unknown subcommand" -- "$IPU" sweep stauts x --store "$STORE"
has "$TMP/err" 'did you mean `status`' "a misspelt subcommand gets a suggestion"
expect 2 "status without a sweep" -- "$IPU" sweep status --store "$STORE"
expect 2 "an unknown option" -- "$IPU" sweep list --frobnicate
expect 0 "sweep --help" -- "$IPU" sweep --help
has "$TMP/out" "ipu sweep pause SWEEP" "the help lists the subcommands"

"$AGENT" create "$STORE" lr_grid || { echo "FAIL: creating a sweep"; exit 1; }
"$AGENT" create "$STORE" lr_grid_2 || { echo "FAIL: creating a sweep"; exit 1; }
expect 0 "list" -- "$IPU" sweep list --store "$STORE" --color never
has "$TMP/out" "lr_grid_2  grid    running" "the table lists both sweeps"
expect 1 "an unknown sweep" -- "$IPU" sweep status lr_gird --store "$STORE"
has "$TMP/err" 'there is no sweep `lr_gird`' "an unknown sweep is said"
has "$TMP/err" 'did you mean `lr_grid`' "an unknown sweep gets a suggestion"
expect 1 "pause an unknown sweep" -- "$IPU" sweep pause nope --store "$STORE"

# One agent runs all of lr_grid (12 cells of 0.01 s).
"$AGENT" "$STORE" lr_grid "$TMP/log" solo 0.01 30 0.5 || { echo "FAIL: the agent"; fail=1; }
expect 0 "status --json" -- env IPU_STORE="$STORE" "$IPU" sweep status lr_grid --json
python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
problems = []
if (s["name"], s["method"], s["state"], s["total"]) != ("lr_grid", "grid", "finished", 12):
    problems.append(f"name, method, state, total: {s['name'], s['method'], s['state'], s['total']}")
if s["counts"] != {"queued": 0, "running": 0, "finished": 12, "failed": 0, "killed": 0, "stopped": 0}:
    problems.append(f"counts {s['counts']}")
if s["metric"] != {"name": "loss", "goal": "minimize", "target": None}: problems.append(f"metric {s['metric']}")
b = s["best"]
if b is None or b["assignment"] != {"lr": 0.001, "phase.pretrain.micro_batch": 2, "precision.compute": {"name": "fp16"}} \
        or abs(b["metric"] - 0.015) > 1e-12 or b["agent"] != "solo" or b["attempts"] != 1:
    problems.append(f"best {b}")
if sorted(t["index"] for t in s["trials"]) != list(range(12)) or any(t["state"] != "finished" for t in s["trials"]):
    problems.append("trials 0..11, finished")
if s["spec"]["seed"] != 0xfedcba9876543210 or len(s["spec"]["parameters"]) != 3: problems.append(f"spec {s['spec']}")
for p in problems: print("FAIL: sweep status --json:", p)
sys.exit(1 if problems else 0)
PY
expect 0 "status" -- "$IPU" sweep status lr_grid --store "$STORE" --color never
has "$TMP/out" "sweep lr_grid (grid over \`tiny_pretrain\`): finished" "the status headline"
has "$TMP/out" "trials     12: 0 queued, 0 running, 12 finished, 0 failed, 0 killed, 0 stopped" "the counts"
has "$TMP/out" "best       trial 0: loss 0.015" "the best trial"
has "$TMP/out" "lr=0.001 phase.pretrain.micro_batch=2 precision.compute=fp16" "the best assignment"
expect 1 "pause a finished sweep" -- "$IPU" sweep pause lr_grid --store "$STORE"
has "$TMP/err" "is finished" "a finished sweep cannot be paused"

# Pause, resume and cancel lr_grid_2 as agents see them.
expect 0 "pause" -- "$IPU" sweep pause lr_grid_2 --store "$STORE"
has "$TMP/out" "sweep lr_grid_2: running -> paused" "pause says what changed"
expect 0 "pause again" -- "$IPU" sweep pause lr_grid_2 --store "$STORE" --json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d == {'name': 'lr_grid_2', 'state': 'paused', 'previous_state': 'paused', 'requeued': 0} else 1)" "$TMP/out" \
  || { echo "FAIL: pause --json"; cat "$TMP/out"; fail=1; }
# A paused sweep: an agent claims nothing (it would wait; give it 2 s and stop it).
timeout 2 "$AGENT" "$STORE" lr_grid_2 "$TMP/log2" waiter 0.01 30 0.5
[ -s "$TMP/log2" ] && { echo "FAIL: an agent claimed a trial of a paused sweep"; fail=1; }
expect 0 "cancel" -- "$IPU" sweep cancel lr_grid_2 --store "$STORE"
"$AGENT" "$STORE" lr_grid_2 "$TMP/log2" leaver 0.01 30 0.5 || { echo "FAIL: an agent of a cancelled sweep"; fail=1; }
[ -s "$TMP/log2" ] && { echo "FAIL: an agent claimed a trial of a cancelled sweep"; fail=1; }
expect 1 "pause a cancelled sweep" -- "$IPU" sweep pause lr_grid_2 --store "$STORE"
expect 0 "resume" -- "$IPU" sweep resume lr_grid_2 --store "$STORE" --json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d['state'] == 'running' and d['previous_state'] == 'cancelled' else 1)" "$TMP/out" \
  || { echo "FAIL: resume --json"; cat "$TMP/out"; fail=1; }
"$AGENT" "$STORE" lr_grid_2 "$TMP/log2" again 0.01 30 0.5 || { echo "FAIL: the agent after resume"; fail=1; }
[ "$(grep -c '^done ' "$TMP/log2")" = 12 ] || { echo "FAIL: 12 trials after resume"; cat "$TMP/log2"; fail=1; }
expect 0 "list --json" -- "$IPU" sweep list --store "$STORE" --json
python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
l = json.load(open(sys.argv[1]))
got = [(s["name"], s["state"], s["counts"]["finished"]) for s in l]
if got != [("lr_grid", "finished", 12), ("lr_grid_2", "finished", 12)]:
    print("FAIL: sweep list --json:", got); sys.exit(1)
PY

# A store from before sweeps (schema 1) is migrated by the first command that opens it.
cp "$ROOT/tests/store/v1_store.db" "$TMP/v1.db"
expect 0 "list a version 1 store" -- "$IPU" sweep list --store "$TMP/v1.db"
has "$TMP/out" "no sweeps in" "an old store has no sweeps"
expect 0 "its runs are all there" -- "$IPU" runs --store "$TMP/v1.db" --json
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if [x['name'] for x in r] == ['writer-3','writer-2','tiny_pretrain-1'] else 1)" "$TMP/out" \
  || { echo "FAIL: runs of a migrated store"; cat "$TMP/out"; fail=1; }

[ $fail -eq 0 ] && echo "sweep command tests passed"
exit $fail
