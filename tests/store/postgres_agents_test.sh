#!/usr/bin/env bash
# Four `ipu agent` processes on one PostgreSQL store (a real server started
# here on a Unix socket in a temporary directory, as `nobody` under root, and
# stopped at the end) run one grid sweep of a tiny BERT on the emulator; one
# agent is killed with SIGKILL in the middle of a trial. Every cell must
# finish exactly once: one finished trial per cell, one finished run per cell
# in the store, and the killed agent's trial claimed again and finished by
# another agent (docs/sweeps.md, "Crashes"). Skipped (exit 77) only when the
# PostgreSQL server binaries are not installed.
set -uo pipefail
IPU="$1"
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$BIN" ] && [ -x "$BIN/initdb" ] || { echo "SKIP: no PostgreSQL server binaries under /usr/lib/postgresql"; exit 77; }
TMP="$(mktemp -d /tmp/ipu-pgagents-XXXXXX)"
WORK="$(mktemp -d)"
AS=()
if [ "$(id -u)" -eq 0 ]; then chown nobody "$TMP"; AS=(runuser -u nobody --); fi
PIDS=()
stop() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  "${AS[@]}" "$BIN/pg_ctl" -D "$TMP/data" -m fast -w stop >/dev/null 2>&1
  rm -rf "$TMP" "$WORK"
}
trap stop EXIT
fail=0
"${AS[@]}" "$BIN/initdb" -D "$TMP/data" -U ipu --auth=trust -E UTF8 --no-sync >"$TMP/initdb.log" 2>&1 \
  || { echo "FAIL: initdb"; cat "$TMP/initdb.log"; exit 1; }
"${AS[@]}" "$BIN/pg_ctl" -D "$TMP/data" -l "$TMP/server.log" -w -t 60 \
  -o "-k $TMP -c listen_addresses='' -c fsync=off" start >/dev/null 2>&1 || { echo "FAIL: server start"; cat "$TMP/server.log"; exit 1; }
URI="postgresql://ipu@/postgres?host=$TMP"

cat >"$WORK/grid.ipu" <<'IPU'
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
    steps: 2000
    lr: 0.002 warmup 6 steps then linear to 0
  }
}
sweep grid for tiny_trial {
  method: grid
  metric: minimize(loss)
  parameters {
    phase.short.lr: [1e-4, 3e-4, 1e-3, 3e-3]
    optimizer.weight_decay: [0, 0.1]
  }
}
run tiny_trial
IPU
CELLS=8

# The first agent creates the sweep (and runs one trial); four more join.
"$IPU" sweep "$WORK/grid.ipu" grid --count 1 --threads 1 --store "$URI" --runs-dir "$WORK/runs" >/dev/null 2>"$WORK/first.err" \
  || { echo "FAIL: ipu sweep FILE grid"; cat "$WORK/first.err"; exit 1; }
for i in 1 2 3 4; do
  "$IPU" agent grid --threads 1 --stale-after 3 --store "$URI" --runs-dir "$WORK/runs" --script-dir "$WORK" \
    >"$WORK/agent$i.out" 2>"$WORK/agent$i.err" &
  PIDS+=($!)
done
# Kill the first agent with SIGKILL once it is in the middle of a trial.
VICTIM="${PIDS[0]}"
killed=0
for ((t = 0; t < 300; t++)); do
  if "$IPU" sweep status grid --json --store "$URI" 2>/dev/null |
     python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if any(x['state']=='running' and (x['agent'] or '').endswith(':$VICTIM') for x in d['trials']) else 1)"; then
    sleep 0.3
    kill -9 "$VICTIM" && killed=1
    break
  fi
  sleep 0.1
done
[ "$killed" -eq 1 ] || { echo "FAIL: the agent to kill never held a trial"; fail=1; }
wait "$VICTIM" 2>/dev/null
for p in "${PIDS[@]:1}"; do
  wait "$p" || { echo "FAIL: an agent exited $?"; fail=1; }
done
PIDS=()
"$IPU" sweep status grid --json --store "$URI" >"$WORK/status.json" || { echo "FAIL: sweep status"; fail=1; }
"$IPU" runs --json --store "$URI" >"$WORK/runs.json" || { echo "FAIL: ipu runs"; fail=1; }
python3 - "$WORK/status.json" "$WORK/runs.json" "$VICTIM" "$CELLS" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
runs = json.load(open(sys.argv[2]))
victim, cells = sys.argv[3], int(sys.argv[4])
t = d["trials"]
keys = [x["key"] for x in t]
assert len(keys) == cells and len(set(keys)) == cells, ("every cell is one trial", keys)
assert all(x["state"] == "finished" for x in t), [(x["key"], x["state"]) for x in t]
assert d["state"] == "finished", d["state"]
# The killed agent's trial was claimed again and finished by another agent.
again = [x for x in t if x["attempts"] == 2]
assert len(again) == 1 and not again[0]["agent"].endswith(":" + victim), [(x["key"], x["attempts"], x["agent"]) for x in t]
assert all(x["attempts"] == 1 for x in t if x not in again), [(x["key"], x["attempts"]) for x in t]
# One finished run per cell, each linked to its trial; the killed attempt's
# run never finished.
finished = [r for r in runs if r["kind"] == "run" and r["status"] == "finished"]
assert len(finished) == cells, ("finished runs", len(finished), [r["status"] for r in runs])
assert sorted(r["id"] for r in finished) == sorted(x["run_id"] for x in t), "a trial is not linked to its run"
# (The killed agent may have died before its training recorded a run.)
others = [r for r in runs if r["kind"] == "run" and r["status"] != "finished"]
assert len(others) <= 1, ("runs", [(r["id"], r["status"]) for r in runs])
print("cells", cells, "finished once each; retried", again[0]["key"])
PY

[ "$fail" -eq 0 ] && echo "postgres agents test: ok"
exit "$fail"
