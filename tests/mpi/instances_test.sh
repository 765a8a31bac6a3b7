#!/usr/bin/env bash
# `ipu run` as MPI instances (docs/run.md, "Across processes and hosts"):
# 1, 2 and 4 instances give bit-identical checkpoints and per-step metrics,
# for a pipelined BERT (the gradient all-reduce crosses instances) and a
# ResNet whose batch norm spans instances; only instance 0 writes; a
# replica count that does not divide is IPU5012 with its place in the
# script; a run resumes with another instance count and ends as if it never
# stopped. Usage: instances_test.sh IPU ROOT MPI_BUILT(0|1).
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
# Open MPI refuses root unless told (containers run tests as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One host, no network needed: shared memory and loopback only.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
HERE="$ROOT/tests/mpi"
fail=0

# run NAME INSTANCES SCRIPT [ARGS...]: one run into $TMP/NAME (its own runs root and store).
run() {
  local name="$1" n="$2" script="$3"; shift 3
  mkdir -p "$TMP/$name"
  local cmd=("$IPU" run "$script" --runs-dir "$TMP/$name/runs" --store "$TMP/$name/ipu.db" --threads 1 --color never "$@")
  if [ "$n" -gt 1 ]; then cmd=(mpirun -n "$n" --oversubscribe "${cmd[@]}"); fi
  "${cmd[@]}" >"$TMP/$name/out" 2>"$TMP/$name/err"
  echo $? >"$TMP/$name/rc"
}
rundir() { ls -d "$TMP/$1"/runs/*/* | head -1; }
# The per-step record without the wall-clock figures.
steps() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(json.dumps({k: v for k, v in d.items() if not (k.endswith("_s") or "time" in k)}, sort_keys=True))
PY
}
# interrupt_after_6_steps PID DIR: Ctrl-C (SIGINT) to PID once the run in
# DIR/runs recorded 6 steps (or PID ended).
interrupt_after_6_steps() {
  local pid="$1" dir="$2" m
  for _ in $(seq 1 600); do
    m=$(ls "$dir"/runs/*/*/metrics.jsonl 2>/dev/null | head -1)
    [ -n "$m" ] && [ "$(wc -l <"$m")" -ge 6 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -INT "$pid" 2>/dev/null
}
same_as_one() {  # same_as_one NAME REFERENCE
  local a b
  if [ "$(cat "$TMP/$1/rc")" != 0 ]; then
    echo "FAIL: $1: exit $(cat "$TMP/$1/rc")"; tail -20 "$TMP/$1/err"; fail=1; return
  fi
  a="$(rundir "$1")"; b="$(rundir "$2")"
  local ca cb
  ca="$(cd "$a/checkpoints" && find . -name '*.ipt' | sort)"; cb="$(cd "$b/checkpoints" && find . -name '*.ipt' | sort)"
  if [ -z "$ca" ] || [ "$ca" != "$cb" ]; then echo "FAIL: $1: checkpoints [$ca] differ in names from $2's [$cb]"; fail=1; return; fi
  for f in $ca; do
    cmp -s "$a/checkpoints/$f" "$b/checkpoints/$f" || { echo "FAIL: $1: checkpoint $f is not bit-identical to $2's"; fail=1; }
  done
  if [ "$(steps "$a")" != "$(steps "$b")" ]; then
    echo "FAIL: $1: per-step metrics differ from $2's"; diff <(steps "$a") <(steps "$b") | head -6; fail=1
  fi
  # Traffic: each instance sent what the plan's cross-instance collectives
  # say (gradients, batch norm), and what was sent was received.
  python3 - "$a/summary.json" "${1##*-}" <<'PY' || { echo "FAIL: $1: the bytes sent between instances are not the plan's"; fail=1; }
import json, sys
s = json.load(open(sys.argv[1]))["instances"]
n = int(sys.argv[2])
assert s["count"] == n, s
assert all(x > 0 for x in s["bytes_sent"]), s
assert s["bytes_sent"] == s["planned_bytes_sent"], s
assert sum(s["bytes_sent"]) == sum(s["bytes_received"]), s
PY
  # One run, one record: one run directory, one run in the store.
  [ "$(ls -d "$TMP/$1"/runs/*/* | wc -l)" = 1 ] || { echo "FAIL: $1: more than one run directory"; fail=1; }
  n="$("$IPU" runs --store "$TMP/$1/ipu.db" 2>/dev/null | grep -c "bert_pipeline\|resnet_bn")"
  [ "$n" = 1 ] || { echo "FAIL: $1: $n runs in the store, expected 1"; fail=1; }
}

for script in bert_pipeline resnet_batch_norm; do
  run "$script-1" 1 "$HERE/$script.ipu" --steps 4
  [ "$(cat "$TMP/$script-1/rc")" = 0 ] || { echo "FAIL: $script, one process: exit $(cat "$TMP/$script-1/rc")"; tail -20 "$TMP/$script-1/err"; fail=1; continue; }
  for n in 2 4; do
    run "$script-$n" "$n" "$HERE/$script.ipu" --steps 4
    same_as_one "$script-$n" "$script-1"
  done
  echo "$script: 1, 2 and 4 instances compared"
done

# `ipu run --instances N` starts mpirun itself.
run bert-launch-2 1 "$HERE/bert_pipeline.ipu" --steps 4 --instances 2
same_as_one bert-launch-2 bert_pipeline-1
# Without --color, into files: no colour and no redrawn line, although the
# instances write through mpirun's pseudo-terminals.
mkdir -p "$TMP/plain"
"$IPU" run "$HERE/bert_pipeline.ipu" --steps 4 --instances 2 --runs-dir "$TMP/plain/runs" --store "$TMP/plain/ipu.db" \
  >"$TMP/plain/out" 2>"$TMP/plain/err" || { echo "FAIL: --instances 2 without --color"; cat "$TMP/plain/err"; fail=1; }
if grep -q $'\x1b\|\r' "$TMP/plain/out" "$TMP/plain/err"; then
  echo "FAIL: --instances wrote escape sequences or carriage returns into a file"; fail=1
fi

# `--instances` ends as the job ends: a script that does not check is exit 1
# at once (Open MPI's mpirun once hung two minutes on the instances' exits);
# Ctrl-C of the launcher stops the instances at a step, exit 130, the run
# cancelled and resumable.
printf 'import "std/pods"\nmapping x for nosuch on POD4 { replicas: 2 }\n' >"$TMP/bad.ipu"
start=$(date +%s)
timeout 60 "$IPU" run "$TMP/bad.ipu" --instances 2 --runs-dir "$TMP/bad-runs" --no-store >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
[ "$rc" = 1 ] || { echo "FAIL: --instances 2 of a script with an error: exit $rc, expected 1"; tail -5 "$TMP/bad.err"; fail=1; }
[ $(( $(date +%s) - start )) -lt 30 ] || { echo "FAIL: --instances 2 of a script with an error took $(( $(date +%s) - start )) s"; fail=1; }
grep -q "error\[IPU1001\]" "$TMP/bad.err" || { echo "FAIL: --instances 2 did not show the script's error"; fail=1; }
mkdir -p "$TMP/launched"
"$IPU" run "$HERE/bert_pipeline.ipu" --instances 2 --runs-dir "$TMP/launched/runs" --store "$TMP/launched/ipu.db" \
  --steps 300 --checkpoint-every 2 >"$TMP/launched/out" 2>"$TMP/launched/err" &
pid=$!
interrupt_after_6_steps "$pid" "$TMP/launched"
start=$(date +%s)
wait "$pid"
rc=$?
[ "$rc" = 130 ] || { echo "FAIL: Ctrl-C of ipu run --instances 2: exit $rc, expected 130"; tail -5 "$TMP/launched/err"; fail=1; }
[ $(( $(date +%s) - start )) -lt 30 ] || { echo "FAIL: Ctrl-C of ipu run --instances 2 took $(( $(date +%s) - start )) s to end"; fail=1; }
python3 -c "import json,glob; s=json.load(open(glob.glob('$TMP/launched/runs/*/*/summary.json')[0])); assert s['status']=='cancelled', s" \
  || { echo "FAIL: Ctrl-C of ipu run --instances 2: the run is not recorded as cancelled"; fail=1; }

# Ctrl-C, then resume with another instance count: 2 instances are
# interrupted (SIGINT to mpirun) once they recorded 6 steps, with a checkpoint
# every 2 steps; 4 instances finish; the end is the uninterrupted run's.
run ref300 1 "$HERE/bert_pipeline.ipu" --steps 300
mkdir -p "$TMP/resume"
mpirun -n 2 --oversubscribe "$IPU" run "$HERE/bert_pipeline.ipu" --runs-dir "$TMP/resume/runs" --store "$TMP/resume/ipu.db" \
  --threads 1 --steps 300 --checkpoint-every 2 >"$TMP/resume/out" 2>"$TMP/resume/err" &
pid=$!
interrupt_after_6_steps "$pid" "$TMP/resume"
wait "$pid"
a="$(rundir resume)"
python3 -c "import json; s=json.load(open('$a/summary.json')); assert s['status']=='cancelled', s" \
  || { echo "FAIL: Ctrl-C of 2 instances: the run is not recorded as cancelled"; tail -5 "$TMP/resume/err"; fail=1; }
mpirun -n 4 --oversubscribe "$IPU" run "$HERE/bert_pipeline.ipu" --runs-dir "$TMP/resume/runs" --store "$TMP/resume/ipu.db" \
  --threads 1 --steps 300 --resume >"$TMP/resume/out2" 2>"$TMP/resume/err2"
rc=$?
[ "$rc" = 0 ] || { echo "FAIL: resume with 4 instances: exit $rc"; tail -20 "$TMP/resume/err2"; fail=1; }
b="$(rundir ref300)"
cmp -s "$a/checkpoints/short/final.ipt" "$b/checkpoints/short/final.ipt" \
  || { echo "FAIL: stopped with 2 instances and resumed with 4, the final checkpoint differs from the uninterrupted run's"; fail=1; }
[ "$(steps "$a")" = "$(steps "$b")" ] || { echo "FAIL: stopped and resumed, the per-step metrics differ from the uninterrupted run's"; fail=1; }
echo "Ctrl-C with 2 instances, resumed with 4: compared"

# Replicas that do not divide over the instances: IPU5012 at the mapping, exit 1.
run three 3 "$HERE/bert_pipeline.ipu"
[ "$(cat "$TMP/three/rc")" = 1 ] || { echo "FAIL: 4 replicas over 3 instances: exit $(cat "$TMP/three/rc"), expected 1"; fail=1; }
grep -q "bert_pipeline.ipu:[0-9]*:[0-9]*: error\[IPU5012\]" "$TMP/three/err" \
  || { echo "FAIL: 4 replicas over 3 instances: no IPU5012 with its place"; head -20 "$TMP/three/err"; fail=1; }
[ "$(grep -c "IPU5012" "$TMP/three/err")" = 1 ] || { echo "FAIL: IPU5012 printed by more than one instance"; fail=1; }
[ -z "$(ls -A "$TMP/three/runs" 2>/dev/null)" ] || [ -z "$(find "$TMP/three/runs" -name plan.json)" ] \
  || { echo "FAIL: a refused run left a run directory"; fail=1; }

[ "$fail" = 0 ] && echo "ok"
exit "$fail"
