#!/usr/bin/env bash
# `ipu run` as MPI instances against one process (docs/benchmarks.md, "MPI
# instances"): the same mapping (a 2-layer BERT at hidden 256, 2 replicas,
# fp32) trained as 1 process of 2 threads and as 2 instances of 1 thread
# each on this host (shared memory). The work is the same; the difference
# is what the instances exchange and wait for. Figures: the median step time
# after the first 2 steps, from metrics.jsonl, over the steps of all REPEATS
# runs pooled (a best-of-runs figure favours whichever configuration the
# shared host's load happened to spare); and each run's CPU time.
# Usage: mpi_instances_bench.sh IPU [HIDDEN] [STEPS] [REPEATS]
set -euo pipefail
IPU="$1"
HIDDEN="${2:-256}"
STEPS="${3:-40}"
REPEATS="${4:-3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 IPU_NO_CACHE=1
FFN=$((4 * HIDDEN)); HEADS=$((HIDDEN / 64 > 2 ? HIDDEN / 64 : 2))
cat >"$TMP/bench.ipu" <<IPU
import "std/pods"
import "std/models/bert"
model tiny = bert(layers: 2, hidden: $HIDDEN, heads: $HEADS, ffn: $FFN, vocab: 1000, positions: 128)
mapping two for tiny on POD4 { replicas: 2 }
precision full { compute: fp32 }
training bench {
  mapping: two
  precision: full
  optimizer: adam()
  seed: 1
  phase p { seq_len: 32; masked_tokens: 5; micro_batch: 8; gradient_accumulation: 2; steps: $STEPS; lr: 0.001 }
}
run bench
IPU
# the step times (s) of a run directory, without the first 2 steps (warm-up), one per line
steps() {
  python3 - "$1" <<'PY'
import json, sys, glob
d = glob.glob(sys.argv[1] + "/runs/*/*/metrics.jsonl")[0]
t = [json.loads(l).get("step_time_s") for l in open(d)]
print("\n".join(str(x) for x in [x for x in t if x is not None][2:]))
PY
}
median() { python3 -c 'import sys, statistics; print(statistics.median(float(x) for x in sys.stdin if x.strip()))'; }
best() { sort -g | head -1; }
# cpu COMMAND...: runs it and prints the CPU seconds (user + system) it and
# its children took: on a shared host, a figure the other load does not
# stretch the way it stretches wall time.
cpu() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(u.ru_utime + u.ru_stime)
PY
}
one=(); two=(); onecpu=(); twocpu=()
for r in $(seq "$REPEATS"); do
  rm -rf "$TMP/a" "$TMP/b"
  onecpu+=("$(cpu "$IPU" run "$TMP/bench.ipu" --threads 2 --no-store --runs-dir "$TMP/a/runs" --color never)")
  one+=($(steps "$TMP/a"))
  twocpu+=("$(cpu mpirun -n 2 --oversubscribe --bind-to none "$IPU" run "$TMP/bench.ipu" --threads 1 --no-store --runs-dir "$TMP/b/runs" --color never)")
  two+=($(steps "$TMP/b"))
done
a="$(printf '%s\n' "${one[@]}" | median)"; b="$(printf '%s\n' "${two[@]}" | median)"
ac="$(printf '%s\n' "${onecpu[@]}" | best)"; bc="$(printf '%s\n' "${twocpu[@]}" | best)"
cmp -s "$TMP/a/runs/bench/"*/checkpoints/p/final.ipt "$TMP/b/runs/bench/"*/checkpoints/p/final.ipt && same=yes || same=NO
python3 - "$a" "$b" "$HIDDEN" "$same" "$ac" "$bc" "$STEPS" <<'PY'
import sys
a, b, hidden, same = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
ac, bc, steps = float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
samples = 2 * 2 * 8
print(f"BERT 2 layers, hidden {hidden}, 2 replicas, global batch {samples}, fp32 (median step of all runs' steps)")
print(f"  1 process x 2 threads    {a*1000:8.1f} ms/step  {samples/a:8.1f} samples/s")
print(f"  2 instances x 1 thread   {b*1000:8.1f} ms/step  {samples/b:8.1f} samples/s  ({(b/a-1)*100:+.1f}% time)")
print(f"  CPU time of the whole run (start-up and held-out evaluation included, best of runs, {steps} steps):")
print(f"  1 process x 2 threads    {ac:8.2f} s")
print(f"  2 instances x 1 thread   {bc:8.2f} s  ({(bc/ac-1)*100:+.1f}%)")
print(f"  final checkpoints bit-identical: {same}")
PY
