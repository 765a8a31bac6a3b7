#!/usr/bin/env bash
# `ipu agent --instances N` (docs/sweeps.md, "Agents as MPI jobs"): each
# trial the agent trains runs as an MPI job of N instances, and is recorded
# once, by instance 0: one run directory and one run in the store per
# trial. Its numbers are those of the same trial in one process (per-step
# metrics and checkpoints bit for bit). Usage: agent_instances_test.sh IPU ROOT MPI_BUILT(0|1).
set -uo pipefail
IPU="$1"
ROOT="$2"
if [ "$3" != 1 ]; then
  echo "SKIP: this ipu was built without MPI (IPU_MPI)"
  exit 77
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export IPU_NO_CACHE=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
fail=0
T="$TMP/trial.ipu"
cp "$ROOT/examples/tiny_bert_sweep.ipu" "$T"
cat >>"$T" <<'IPU'

sweep two_rates for tiny_trial {
  method: grid
  metric: minimize(loss)
  parameters {
    phase.short.lr: [1e-3, 3e-3]
  }
}
IPU
steps() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(json.dumps({k: v for k, v in d.items() if not (k.endswith("_s") or "time" in k)}, sort_keys=True))
PY
}
# agent NAME [ARGS]: the sweep in its own store and runs root, one agent.
agent() {
  local name="$1"; shift
  mkdir -p "$TMP/$name"
  "$IPU" sweep create "$T" two_rates --store "$TMP/$name/ipu.db" >/dev/null 2>&1 || { echo "FAIL: $name: sweep create"; fail=1; return; }
  (cd "$TMP" && "$IPU" agent two_rates --store "$TMP/$name/ipu.db" --runs-dir "$TMP/$name/runs" --steps 6 --threads 1 "$@" \
     >"$TMP/$name/out" 2>"$TMP/$name/err")
  echo $? >"$TMP/$name/rc"
}
agent one
agent two --instances 2
for name in one two; do
  [ "$(cat "$TMP/$name/rc")" = 0 ] || { echo "FAIL: $name: exit $(cat "$TMP/$name/rc")"; tail -20 "$TMP/$name/err"; fail=1; }
done
grep -q "this agent ran 2 trials (2 finished, 0 failed)" "$TMP/two/out" || { echo "FAIL: the MPI agent did not finish both trials"; cat "$TMP/two/out" "$TMP/two/err"; fail=1; }
# One run, one record per trial.
dirs=$(ls -d "$TMP"/two/runs/tiny_trial/* 2>/dev/null | wc -l)
[ "$dirs" = 2 ] || { echo "FAIL: $dirs run directories for 2 trials"; fail=1; }
n=$("$IPU" runs --store "$TMP/two/ipu.db" --columns name 2>/dev/null | grep -c tiny_trial)
[ "$n" = 2 ] || { echo "FAIL: $n runs in the store for 2 trials"; fail=1; }
# The instances really ran: the run's summary counts two.
for d in "$TMP"/two/runs/tiny_trial/*; do
  python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['instances']['count'] == 2, s.get('instances')" "$d/summary.json" \
    || { echo "FAIL: $d was not trained by 2 instances"; fail=1; }
done
# The same numbers as in one process, trial by trial (by the learning rate).
for trial in 0 1; do
  a=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"select a.path from trials t join artifacts a on a.run_id = t.run_id and a.kind = 'run_directory' where t.trial_index = $trial\").fetchone()[0])" "$TMP/one/ipu.db")
  b=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"select a.path from trials t join artifacts a on a.run_id = t.run_id and a.kind = 'run_directory' where t.trial_index = $trial\").fetchone()[0])" "$TMP/two/ipu.db")
  [ "$(steps "$a")" = "$(steps "$b")" ] || { echo "FAIL: trial $trial: per-step metrics differ between 1 and 2 instances"; diff <(steps "$a") <(steps "$b") | head -5; fail=1; }
  cmp -s "$a/checkpoints/short/final.ipt" "$b/checkpoints/short/final.ipt" || { echo "FAIL: trial $trial: final checkpoints differ"; fail=1; }
done
# `ipu sweep FILE --instances N` creates the sweep, then runs its agent as
# that MPI job (`ipu agent SWEEP --instances N`).
mkdir -p "$TMP/three"
(cd "$TMP" && "$IPU" sweep "$T" two_rates --store "$TMP/three/ipu.db" --runs-dir "$TMP/three/runs" --steps 6 --threads 1 --instances 2 \
   >"$TMP/three/out" 2>"$TMP/three/err")
rc=$?
[ "$rc" = 0 ] || { echo "FAIL: ipu sweep --instances 2: exit $rc"; tail -20 "$TMP/three/err"; fail=1; }
grep -q "this agent ran 2 trials (2 finished, 0 failed)" "$TMP/three/out" || { echo "FAIL: ipu sweep --instances did not finish both trials"; cat "$TMP/three/out" "$TMP/three/err"; fail=1; }
for d in "$TMP"/three/runs/tiny_trial/*; do
  python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['instances']['count'] == 2, s.get('instances')" "$d/summary.json" \
    || { echo "FAIL: ipu sweep --instances: $d was not trained by 2 instances"; fail=1; }
done
"$IPU" sweep create "$T" two_rates --store "$TMP/three/ipu.db" --instances 2 >/dev/null 2>"$TMP/three/err2"
rc=$?
[ "$rc" = 2 ] || { echo "FAIL: ipu sweep create --instances: exit $rc, expected 2 (it runs no agent)"; fail=1; }
[ "$fail" = 0 ] && echo "agent instances: ok"
exit "$fail"
