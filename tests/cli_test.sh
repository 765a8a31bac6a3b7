#!/usr/bin/env bash
# The command line as a user runs it: exit codes (0 ok, 1 user error, 2 usage
# error), output channels, JSON validity, colour policy, and fmt's safety.
set -uo pipefail
IPU="$1"
ROOT="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export IPU_STORE="$TMP/ipu.db"  # estimate and run record here, not in the current directory
export IPU_NO_CACHE=1            # no search results read from or kept in the user's cache (docs/search.md)
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

expect 0 "check a clean example" -- "$IPU" check "$ROOT/examples/bert_large_pod16.ipu"
[ -s "$TMP/out" ] && { echo "FAIL: check of a clean script printed to stdout"; fail=1; }
expect 0 "plan the main example" -- "$IPU" plan "$ROOT/examples/bert_large_pod16.ipu"
grep -q "fits" "$TMP/out" || { echo "FAIL: plan report lacks a verdict"; fail=1; }
grep -q $'\x1b' "$TMP/out" && { echo "FAIL: colour codes when stdout is not a terminal"; fail=1; }
expect 0 "plan --json" -- "$IPU" plan "$ROOT/examples/bert_large_pod16.ipu" --json
python3 -c "import json,sys; d=json.load(open('$TMP/out')); p=d['runs'][0]['phases'][0]; assert p['gradient_accumulation']==2048, p; assert all(k in p['ipus'][0]['memory_bytes'] for k in ('weights','optimizer_state','activations','other','total'))" \
  || { echo "FAIL: plan --json is not the documented JSON"; fail=1; }
expect 2 "no command" -- "$IPU"
expect 2 "unknown command" -- "$IPU" frobnicate x.ipu
expect 2 "unknown option" -- "$IPU" check --bogus x.ipu
expect 2 "check without a file" -- "$IPU" check
expect 1 "missing file" -- "$IPU" check "$TMP/does-not-exist.ipu"
grep -q "IPU0011" "$TMP/err" || { echo "FAIL: missing file not reported as IPU0011"; fail=1; }
expect 0 "check several clean scripts in one call" -- "$IPU" check "$ROOT/examples/bert_large_pod16.ipu" "$ROOT/examples/tiny_bert.ipu"
expect 1 "check several scripts, one missing: one exit code" -- "$IPU" check "$ROOT/examples/tiny_bert.ipu" "$TMP/does-not-exist.ipu"
grep -q "does-not-exist.ipu" "$TMP/err" || { echo "FAIL: several files: the missing one is not reported"; fail=1; }
expect 1 "check several scripts --json" -- "$IPU" check "$ROOT/examples/tiny_bert.ipu" "$TMP/does-not-exist.ipu" --json
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert [f["errors"] for f in d["files"]] == [0, 1] and d["errors"] == 1, d
assert d["files"][1]["diagnostics"][0]["code"] == "IPU0011"
' "$TMP/out" || { echo "FAIL: several files --json: wrong document"; fail=1; }

# A layer written for estimation (docs/diagnostics.md, IPU5002): checked,
# planned and estimated with a warning; `ipu run` refuses it at the same
# layer, before anything is recorded.
custom="$ROOT/tests/diagnostics/IPU5002_custom_layer_for_estimation.ipu"
expect 0 "check a layer ipu run cannot compute" -- "$IPU" check "$custom"
grep -q "IPU5002_custom_layer_for_estimation.ipu:17:3: warning\[IPU5002\]: .ipu run. would refuse this: layer .mix.: attribute .inputs." "$TMP/err" \
  || { echo "FAIL: check of a custom layer: no IPU5002 warning at the layer"; cat "$TMP/err"; fail=1; }
expect 0 "estimate a layer ipu run cannot compute" -- "$IPU" estimate "$custom"
grep -q "warning\[IPU5002\]" "$TMP/err" || { echo "FAIL: estimate of a custom layer: no IPU5002 warning"; fail=1; }
expect 1 "run a layer ipu run cannot compute" -- "$IPU" run "$custom" --runs-dir "$TMP/custom-runs"
grep -q "IPU5002_custom_layer_for_estimation.ipu:17:3: error\[IPU5002\]: layer .mix.: attribute .inputs. must be a positive whole number" "$TMP/err" \
  || { echo "FAIL: run of a custom layer: no IPU5002 error at the layer"; cat "$TMP/err"; fail=1; }
[ ! -e "$TMP/custom-runs" ] || { echo "FAIL: a refused run left a run directory"; fail=1; }

printf 'import "std/pods"\n' > "$TMP/lib.ipu"
expect 0 "check a module with no training" -- "$IPU" check "$TMP/lib.ipu"
expect 1 "plan a module with no training" -- "$IPU" plan "$TMP/lib.ipu"
grep -q "IPU1216" "$TMP/err" || { echo "FAIL: nothing to plan not reported as IPU1216"; fail=1; }
head -c 9000000 /dev/zero | tr '\0' ' ' > "$TMP/huge.ipu"
expect 1 "a script over the size limit" -- "$IPU" check "$TMP/huge.ipu"
grep -q "IPU0010" "$TMP/err" || { echo "FAIL: huge script not reported as IPU0010"; fail=1; }

printf 'model m = bert_lrage\n' > "$TMP/bad.ipu"
expect 1 "check a script with an error" -- "$IPU" check "$TMP/bad.ipu"
grep -q "bad.ipu:1:11: error\[IPU1001\]" "$TMP/err" || { echo "FAIL: GNU-style location missing"; cat "$TMP/err"; fail=1; }
expect 1 "check --format json" -- "$IPU" check "$TMP/bad.ipu" --format json
python3 -c "import json; d=json.load(open('$TMP/out')); assert d['diagnostics'][0]['code']=='IPU1001' and d['diagnostics'][0]['line']==1" \
  || { echo "FAIL: check --format json"; fail=1; }
expect 1 "forced colour" -- env FORCE_COLOR=1 "$IPU" check "$TMP/bad.ipu"
grep -q $'\x1b' "$TMP/err" || { echo "FAIL: FORCE_COLOR did not colour"; fail=1; }
expect 1 "NO_COLOR beats --color=always" -- env NO_COLOR=1 "$IPU" check "$TMP/bad.ipu" --color always
grep -q $'\x1b' "$TMP/err" && { echo "FAIL: NO_COLOR ignored"; fail=1; }

printf 'let   x=1\nrun  t   // keep me\n' > "$TMP/fmt.ipu"
expect 1 "fmt --check on an unformatted file" -- "$IPU" fmt --check "$TMP/fmt.ipu"
expect 0 "fmt" -- "$IPU" fmt "$TMP/fmt.ipu"
grep -q "// keep me" "$TMP/fmt.ipu" || { echo "FAIL: fmt lost a comment"; fail=1; }
expect 0 "fmt --check after fmt" -- "$IPU" fmt --check "$TMP/fmt.ipu"
printf 'let x = (1\n' > "$TMP/broken.ipu"
cp "$TMP/broken.ipu" "$TMP/broken.orig"
expect 1 "fmt of a broken file" -- "$IPU" fmt "$TMP/broken.ipu"
cmp -s "$TMP/broken.ipu" "$TMP/broken.orig" || { echo "FAIL: fmt changed a file it could not parse"; fail=1; }

# ipu estimate: the report, the documented JSON, timelines, and its errors.
expect 0 "estimate the main example" -- "$IPU" estimate "$ROOT/examples/bert_large_pod16.ipu"
for want in "samples/s" "likely" "time to train" "where the step goes" "all-reduce" "calibration" "FLOP use"; do
  grep -q "$want" "$TMP/out" || { echo "FAIL: estimate report lacks '$want'"; fail=1; }
done
grep -q $'\x1b' "$TMP/out" && { echo "FAIL: estimate coloured a pipe"; fail=1; }
expect 0 "estimate --json" -- "$IPU" estimate "$ROOT/examples/bert_large_pod16.ipu" --json
python3 - "$TMP/out" <<'PY' || { echo "FAIL: estimate --json is not the documented JSON"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "ipu-estimate/1" and d["diagnostics"] == []
run = d["runs"][0]
assert [p["name"] for p in run["phases"]] == ["one", "two"]
for p in run["phases"]:
    for k in ("name", "step_time_s", "throughput_samples_per_s", "throughput_tokens_per_s", "time_to_train_s",
              "pipeline_utilisation", "peak_memory_bytes", "fits", "ipus", "calibration"):
        assert k in p, k
    b = p["breakdown_s"]
    for k in ("compute", "recompute", "pipeline_fill_drain", "stage_imbalance", "exchange", "all_reduce",
              "rts_collectives", "across_instances", "streaming", "optimizer", "host_io", "overhead"):
        assert k in b, k
    assert p["instances"] == 1 and b["across_instances"] == 0
    assert abs(sum(b.values()) - p["step_time_s"]) < 1e-9 * p["step_time_s"]
    assert abs(p["time_to_train_s"] - p["steps"] * p["step_time_s"]) < 1e-6 * p["time_to_train_s"]
    lo, hi = p["throughput_interval"]
    assert lo < p["throughput_samples_per_s"] < hi, (lo, hi)
    assert isinstance(p["coverage_warnings"], list)
assert abs(run["time_to_train_s"] - sum(p["time_to_train_s"] for p in run["phases"])) < 1e-6 * run["time_to_train_s"]
PY
expect 0 "estimate --timeline" -- "$IPU" estimate "$ROOT/examples/bert_large_pod16.ipu" --timeline
grep -q "timeline of one step" "$TMP/out" || { echo "FAIL: no timeline drawn"; fail=1; }
expect 0 "estimate --timeline-svg" -- "$IPU" estimate "$ROOT/examples/tiny_bert.ipu" --timeline-svg "$TMP/t.svg"
python3 -c "import xml.dom.minidom,sys; xml.dom.minidom.parse('$TMP/t.svg')" || { echo "FAIL: timeline SVG is not XML"; fail=1; }
expect 1 "estimate an uncalibrated chip" -- "$IPU" estimate "$ROOT/tests/diagnostics/IPU3001_uncalibrated_chip.ipu"
grep -q "error\[IPU3001\]" "$TMP/err" || { echo "FAIL: uncalibrated chip not reported as IPU3001"; fail=1; }
expect 1 "estimate a module with no training" -- "$IPU" estimate "$TMP/lib.ipu"
expect 1 "estimate a missing file" -- "$IPU" estimate "$TMP/does-not-exist.ipu"
expect 2 "estimate without a file" -- "$IPU" estimate
# --instances N: the replicas priced as N host instances (docs/cost-model.md, "Instances").
expect 0 "estimate as 4 host instances" -- "$IPU" estimate "$ROOT/examples/resnet50_pod16.ipu" --instances 4 --json
python3 - "$TMP/out" <<'PY' || { echo "FAIL: estimate --instances 4 does not price the hosts"; fail=1; }
import json, sys
p = json.load(open(sys.argv[1]))["runs"][0]["phases"][0]
assert p["instances"] == 4 and p["breakdown_s"]["across_instances"] > 0, p["breakdown_s"]
assert any("host_network_bandwidth" in a for a in p["assumptions"]), p["assumptions"]
PY
grep -q "recorded as run" "$TMP/err" || { echo "FAIL: estimate --instances was not recorded"; fail=1; }
expect 0 "the recorded estimate names its instances" -- "$IPU" runs --where "instances = 4" --json
python3 -c "import json,sys; assert len(json.load(open('$TMP/out'))) == 1" || { echo "FAIL: the estimate as instances has no instances parameter"; cat "$TMP/out"; fail=1; }
expect 1 "estimate as instances that do not divide the replicas" -- "$IPU" estimate "$ROOT/examples/resnet50_pod16.ipu" --instances 3 --no-store
grep -q "resnet50_pod16.ipu:10:9: error\[IPU5012\]" "$TMP/err" || { echo "FAIL: 3 instances of 16 replicas not refused with IPU5012 at the mapping"; cat "$TMP/err"; fail=1; }
expect 2 "estimate --instances 0" -- "$IPU" estimate "$ROOT/examples/resnet50_pod16.ipu" --instances 0

# ipu calibrate reproduces the committed calibration and the fit table in docs.
expect 0 "calibrate on the published table" -- "$IPU" calibrate "$ROOT/tests/published/published.csv"
cmp -s "$TMP/out" "$ROOT/stdlib/calibration.ipu" || { echo "FAIL: ipu calibrate no longer reproduces stdlib/calibration.ipu (re-run: ipu calibrate tests/published/published.csv -o stdlib/calibration.ipu)"; diff "$TMP/out" "$ROOT/stdlib/calibration.ipu" | head; fail=1; }
grep -v '^fitting' "$TMP/err" > "$TMP/fit.txt"
sed -n '/<!-- fit-table/,/<!-- end fit-table/p' "$ROOT/docs/cost-model.md" | grep -v '^<!--\|^```' > "$TMP/doc-fit.txt"
cmp -s "$TMP/fit.txt" "$TMP/doc-fit.txt" || { echo "FAIL: the fit table in docs/cost-model.md is stale"; diff "$TMP/fit.txt" "$TMP/doc-fit.txt"; fail=1; }
# -o writes what the standard output shows; twelve rows fit quickly enough to check it.
mkdir -p "$TMP/pub"
cp "$ROOT"/tests/published/*.ipu "$TMP/pub/"
head -13 "$ROOT/tests/published/published.csv" > "$TMP/pub/twelve.csv"
expect 0 "calibrate twelve rows" -- "$IPU" calibrate "$TMP/pub/twelve.csv"
cp "$TMP/out" "$TMP/twelve.ipu"
expect 0 "calibrate -o" -- "$IPU" calibrate "$TMP/pub/twelve.csv" -o "$TMP/cal.ipu"
cmp -s "$TMP/cal.ipu" "$TMP/twelve.ipu" || { echo "FAIL: calibrate -o wrote something else than it prints"; fail=1; }
printf 'label,script\n' > "$TMP/bad.csv"
echo "keep" > "$TMP/keep.ipu"
expect 1 "calibrate a table with a bad header" -- "$IPU" calibrate "$TMP/bad.csv" -o "$TMP/keep.ipu"
grep -q "keep" "$TMP/keep.ipu" || { echo "FAIL: a failed calibrate touched its output"; fail=1; }
printf 'label,script,run,phase,samples_per_s\nx,nope.ipu,,,100\ny,nope.ipu,,,fast\n' > "$TMP/bad.csv"
expect 1 "calibrate a table with bad rows" -- "$IPU" calibrate "$TMP/bad.csv"
grep -q "bad.csv:3:" "$TMP/err" || { echo "FAIL: calibrate does not name the bad row"; cat "$TMP/err"; fail=1; }
expect 1 "calibrate a missing table" -- "$IPU" calibrate "$TMP/none.csv"
expect 2 "calibrate without a table" -- "$IPU" calibrate

# ipu run: a short training, its run record, Ctrl-C and --resume, and its errors.
expect 0 "run a few steps" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 3 --runs-dir "$TMP/runs" --threads 1
run_dir=$(ls -d "$TMP"/runs/tiny_pretrain/* | head -1)
for f in script.ipu plan.json metrics.jsonl events.jsonl summary.json; do
  [ -s "$run_dir/$f" ] || { echo "FAIL: run directory lacks $f"; fail=1; }
done
python3 - "$run_dir" <<'PY' || { echo "FAIL: the run record is not what docs/run.md says"; fail=1; }
import json, sys, os
d = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
assert [r["global_step"] for r in rows] == [1, 2, 3, 4, 5, 6], rows
for r in rows:
    for k in ("phase", "step", "loss", "lr", "loss_scale", "skipped", "samples_per_s", "step_time_s"):
        assert k in r, k
    assert r["loss"] > 0
s = json.load(open(os.path.join(d, "summary.json")))
assert s["status"] == "completed" and [p["name"] for p in s["phases"]] == ["short", "long"], s
assert "mlm_accuracy" in s["phases"][0]["evaluation"]
assert json.load(open(os.path.join(d, "plan.json")))["runs"][0]["name"] == "tiny_pretrain"
PY
grep -q "completed: training tiny_pretrain" "$TMP/out" || { echo "FAIL: run did not say how it ended"; fail=1; }
expect 1 "resume without a run" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --resume --runs-dir "$TMP/noruns"
grep -q "error\[IPU5005\]" "$TMP/err" || { echo "FAIL: resume without a run is not IPU5005"; fail=1; }
sed 's/steps: 1000/steps: 999/' "$ROOT/examples/tiny_bert.ipu" > "$TMP/tiny_changed.ipu"
expect 1 "resume after the script changed" -- "$IPU" run "$TMP/tiny_changed.ipu" --resume="$run_dir"
grep -q "error\[IPU5005\].*changed" "$TMP/err" || { echo "FAIL: resuming a changed plan is not refused"; cat "$TMP/err"; fail=1; }
expect 1 "resume from a directory that is not a run" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --resume="$TMP/noruns"
grep -q "error\[IPU5005\].*is not a run directory" "$TMP/err" || { echo "FAIL: resuming a non-run directory is not IPU5005"; cat "$TMP/err"; fail=1; }
expect 2 "a misspelt command" -- "$IPU" chek "$ROOT/examples/tiny_bert.ipu"
grep -q "did you mean \`check\`" "$TMP/err" || { echo "FAIL: a misspelt command gets no suggestion"; cat "$TMP/err"; fail=1; }
# The command table (docs/architecture.md): every command listed by `ipu --help`
# has its own help, by `ipu help NAME` and by `ipu NAME --help`, naming it.
expect 0 "ipu --help" -- "$IPU" --help
commands=$(sed -n '/^commands:/,/^$/p' "$TMP/out" | grep -E '^  [a-z]' | awk '{print $1}')
[ "$(echo $commands)" = "check plan fmt estimate search calibrate run repl runs report sweep agent ui lsp" ] || { echo "FAIL: ipu --help lists: $commands"; fail=1; }
for c in $commands; do
  expect 0 "ipu help $c" -- "$IPU" help "$c"
  head -1 "$TMP/out" | grep -q "^usage: ipu $c" || { echo "FAIL: ipu help $c is not its own help"; head -3 "$TMP/out"; fail=1; }
  cp "$TMP/out" "$TMP/help_$c"
  expect 0 "ipu $c --help" -- "$IPU" "$c" --help
  cmp -s "$TMP/out" "$TMP/help_$c" || { echo "FAIL: ipu $c --help differs from ipu help $c"; fail=1; }
done
expect 0 "ipu help" -- "$IPU" help
grep -q "ipu help COMMAND" "$TMP/out" || { echo "FAIL: ipu help does not say how to get a command's help"; fail=1; }
expect 2 "help for a misspelt command" -- "$IPU" help estimat
grep -q "did you mean \`estimate\`" "$TMP/err" || { echo "FAIL: ipu help estimat gets no suggestion"; cat "$TMP/err"; fail=1; }
expect 0 "--version" -- "$IPU" --version
grep -q "^ipu [0-9]" "$TMP/out" || { echo "FAIL: --version"; fail=1; }
# Each command takes its own options only, and says so.
expect 2 "an option of another command" -- "$IPU" plan "$ROOT/examples/tiny_bert.ipu" --steps 3
grep -q "unknown option \`--steps\`" "$TMP/err" && grep -q "ipu plan --help" "$TMP/err" || { echo "FAIL: plan --steps is not a usage error naming plan's help"; cat "$TMP/err"; fail=1; }
# Options before the command word are the command's.
expect 0 "an option before the command" -- "$IPU" --color never check "$ROOT/examples/tiny_bert.ipu"
touch "$TMP/not_a_dir"
expect 1 "run into an unwritable place" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 1 --runs-dir "$TMP/not_a_dir"
grep -q "error\[IPU5009\]" "$TMP/err" || { echo "FAIL: an unwritable runs dir is not IPU5009"; cat "$TMP/err"; fail=1; }
expect 2 "run with a bad --threads" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --threads many
expect 1 "run a model too large for the host" -- "$IPU" run "$ROOT/tests/diagnostics/IPU5003_too_large_for_the_host.ipu" --runs-dir "$TMP/runs"
grep -q "IPU5003" "$TMP/err" && grep -q "ipu estimate" "$TMP/err" || { echo "FAIL: a run too large for the host is not refused with IPU5003"; fail=1; }
# Ctrl-C stops cleanly and keeps what was recorded; --resume continues to the same end.
# Interrupt once the run has recorded a few steps, not after a fixed time: on a
# loaded machine two seconds may not reach the first step.
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 600 --checkpoint-every 25 --threads 1 --runs-dir "$TMP/cancel" >"$TMP/out" 2>"$TMP/err" &
run_pid=$!
for _ in $(seq 1 600); do
  m=$(ls "$TMP"/cancel/tiny_pretrain/*/metrics.jsonl 2>/dev/null | head -1)
  [ -n "$m" ] && [ "$(wc -l <"$m")" -ge 30 ] && break
  kill -0 "$run_pid" 2>/dev/null || break
  sleep 0.1
done
kill -INT "$run_pid" 2>/dev/null
wait "$run_pid"
code=$?
[ "$code" -eq 130 ] || { echo "FAIL: Ctrl-C during a run: exit $code, expected 130"; cat "$TMP/err" | tail -5; fail=1; }
cancel_dir=$(ls -d "$TMP"/cancel/tiny_pretrain/* | head -1)
python3 -c "import json; s=json.load(open('$cancel_dir/summary.json')); assert s['status']=='cancelled', s" \
  || { echo "FAIL: a cancelled run's summary does not say so"; fail=1; }
expect 0 "resume a cancelled run" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 600 --checkpoint-every 25 --threads 1 --runs-dir "$TMP/cancel" --resume
python3 - "$cancel_dir" <<'PY' || { echo "FAIL: the resumed run's record has gaps or repeats"; fail=1; }
import json, sys, os
rows = [json.loads(l) for l in open(os.path.join(sys.argv[1], "metrics.jsonl"))]
assert [r["global_step"] for r in rows] == list(range(1, 701)), (len(rows), rows[-1])
assert json.load(open(os.path.join(sys.argv[1], "summary.json")))["status"] == "completed"
PY

# Hooks steer a real run: logged metrics land in metrics.jsonl, and
# on_phase_start picks the checkpoint the second phase starts from.
expect 0 "a hook stops a run that did not learn" -- "$IPU" run "$ROOT/examples/hook_best_checkpoint.ipu" --steps 40 --runs-dir "$TMP/stopped"
grep -q "stopped by a hook: training steered" "$TMP/out" && grep -q 'reason: hook .steer.: phase short did not learn' "$TMP/out" \
  || { echo "FAIL: a run stopped by a hook does not say why"; cat "$TMP/out"; fail=1; }
python3 -c "import json,glob; s=json.load(open(glob.glob('$TMP/stopped/steered/*/summary.json')[0])); assert s['status']=='stopped' and 'did not learn' in s['stop_reason'] and len(s['phases'])==1, s" \
  || { echo "FAIL: the summary of a stopped run"; fail=1; }
expect 0 "run with hooks that log and choose a checkpoint" -- "$IPU" run "$ROOT/examples/hook_best_checkpoint.ipu" --steps 250 --checkpoint-every 50 --runs-dir "$TMP/steer"
grep -q "\[steer\] phase long starts from .*checkpoints/short/" "$TMP/err" "$TMP/out" || { echo "FAIL: the checkpoint-choosing hook did not run"; cat "$TMP/err" | tail -5; fail=1; }
python3 - "$(ls -d "$TMP"/steer/steered/* | head -1)" <<'PY' || { echo "FAIL: hook metrics or the chosen checkpoint are missing from the run record"; fail=1; }
import json, sys, os, math
d = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
assert len(rows) == 350, len(rows)
for r in rows:
    assert abs(r["perplexity"] - math.exp(r["loss"])) < 1e-6 * r["perplexity"], r
    assert "loss_smoothed" in r, r
events = [json.loads(l) for l in open(os.path.join(d, "events.jsonl"))]
start = [e for e in events if e.get("event") == "phase_start" and e["phase"] == "long"][0]
assert "/checkpoints/short/" in start["checkpoint"], start
PY

# ipu search (docs/search.md): the report, JSON, --write, usage errors, nothing fits.
expect 0 "search the POD16 example" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --top 3
grep -q "candidates in" "$TMP/out" || { echo "FAIL: search report lacks its counts"; fail=1; }
grep -q "yours (\`pod16\`)" "$TMP/out" || { echo "FAIL: search report does not compare with the script's mapping"; fail=1; }
grep -q "IPUs against throughput" "$TMP/out" || { echo "FAIL: search report lacks the Pareto table"; fail=1; }
grep -q "ranked by the likely range's lower end" "$TMP/out" || { echo "FAIL: search report does not say how it ranks"; fail=1; }
grep -q "why, by the step time's causes" "$TMP/out" || { echo "FAIL: search report does not explain the winner"; cat "$TMP/out"; fail=1; }
[ -s "$TMP/err" ] && { echo "FAIL: search wrote to stderr without a terminal (a progress bar?)"; cat "$TMP/err"; fail=1; }
# The comparison with the script's mapping follows the objective and the limits.
expect 0 "search per IPU" -- "$IPU" search "$ROOT/examples/tiny_bert.ipu" --objective throughput_per_ipu --top 1
grep -q "x the throughput per IPU" "$TMP/out" || { echo "FAIL: search per IPU compares by step time"; cat "$TMP/out"; fail=1; }
expect 0 "search within fewer IPUs than yours" -- "$IPU" search "$ROOT/examples/tiny_bert.ipu" --max-ipus 3 --top 1
grep -q "it uses more than the 3 IPUs searched" "$TMP/out" || { echo "FAIL: search compares with a mapping outside --max-ipus"; cat "$TMP/out"; fail=1; }
expect 2 "search --fix twice" -- "$IPU" search "$ROOT/examples/tiny_bert.ipu" --fix replicas=2 --fix replicas=4
grep -q "fixed twice, to 2 and to 4" "$TMP/err" || { echo "FAIL: a key fixed twice is not refused"; cat "$TMP/err"; fail=1; }
expect 1 "search --fix that yours cannot take" -- "$IPU" search "$ROOT/examples/tiny_bert.ipu" --fix batch_norm_replicas=4
grep -q "do not apply to the script's mapping .two_by_two.: .batch_norm_replicas: 4. does not divide" "$TMP/err" || { echo "FAIL: a --fix the script's mapping cannot take is not named"; cat "$TMP/err"; fail=1; }
expect 0 "search --json" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --json --top 2 --max-ipus 8 --headroom 10%
python3 -c "
import json
d=json.load(open('$TMP/out'))
assert d['format']=='ipu-search/1', d['format']
p=d['phases'][0]
assert len(p['top'])==2 and p['max_ipus']==8
for c in p['top']:
    assert c['fits'] and c['ipus_used']<=8 and c['peak_memory_bytes']<=0.9*c['memory_capacity_bytes'], c
assert p['top'][0]['ranked_step_time_s']<=p['top'][1]['ranked_step_time_s']
assert p['rank']=='conservative'
for c in p['top']:
    lo,hi=c['throughput_interval']
    assert lo<=c['samples_per_s']<=hi, c
    assert abs(c['ranked_step_time_s']-c['step_time_s']*c['samples_per_s']/lo)<=1e-6*c['ranked_step_time_s'], c
    assert len(c['regimes'])==len(c['coverage_warnings'])
    assert abs(sum(c['breakdown_s'].values())-c['step_time_s'])<=1e-6*c['step_time_s'], c
for a in p['assumptions']:
    assert a['assumption']=='Streaming Memory bandwidth' and a['low']<=a['nominal']<=a['high'], a
assert sum(p['counts'][k] for k in ('evaluated','pruned_by_bound','pruned_by_memory'))>=p['counts']['space']
assert p['declared']['name']=='pod16'
" || { echo "FAIL: search --json is not the documented JSON"; fail=1; }
# --write writes the whole script with the answer put in (docs/search.md,
# "Writing the answer into the script"): everything else kept, and each phase
# estimates, in the file written, to the throughput the search printed.
expect 0 "search --write" -- "$IPU" search "$ROOT/examples/tiny_bert.ipu" --top 1 --json --write "$TMP/best.ipu"
cp "$TMP/out" "$TMP/best_search.json"
grep -q "^wrote $TMP/best.ipu:" "$TMP/err" || { echo "FAIL: --write --json does not say what it wrote on stderr"; cat "$TMP/err"; fail=1; }
expect 0 "the written script checks" -- "$IPU" check "$TMP/best.ipu"
[ -s "$TMP/err" ] && { echo "FAIL: the written script checks with diagnostics"; cat "$TMP/err"; fail=1; }
expect 0 "the written script estimates" -- "$IPU" estimate "$TMP/best.ipu" --json
python3 - "$TMP/best_search.json" "$TMP/out" "$ROOT/examples/tiny_bert.ipu" "$TMP/best.ipu" <<'PY' || { echo "FAIL: the written script is not the script with the search's answer"; cat "$TMP/best.ipu"; fail=1; }
import json, sys
search, estimate = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
original, written = open(sys.argv[3]).read(), open(sys.argv[4]).read()
phases = {p["phase"]: p for p in search["phases"]}
assert set(phases) == {"short", "long"}, phases.keys()
for ph in estimate["runs"][0]["phases"]:
    want = phases[ph["name"]]["top"][0]["samples_per_s"]
    got = ph["throughput_samples_per_s"]
    assert abs(got - want) <= 1e-9 * want, (ph["name"], got, want)
# Comments, the pod, the model and the original mapping are kept as they were.
head = original[: original.index("precision full")]
assert written.startswith(head[: head.index("mapping two_by_two")]), "the text before the mapping changed"
assert head[head.index("mapping two_by_two") :] in written, "the original mapping changed"
assert written.rstrip().endswith("run tiny_pretrain")
PY
expect 0 "the written script plans" -- "$IPU" plan "$TMP/best.ipu" --json
python3 - "$TMP/best_search.json" "$TMP/out" <<'PY' || { echo "FAIL: the written phases do not have the search's batch"; fail=1; }
import json, sys
search, plan = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
phases = {p["phase"]: p for p in search["phases"]}
for ph in plan["runs"][0]["phases"]:
    top = phases[ph["name"]]["top"][0]
    for key in ("micro_batch", "gradient_accumulation", "replicas"):
        assert ph[key] == top[key], (ph["name"], key, ph[key], top[key])
    assert ph["global_batch"] == phases[ph["name"]]["global_batch"], ph["name"]
PY
# A phase giving micro batch and accumulation (global 1,536 derived) keeps its
# global batch: both are written (ranked by the estimate, the best has 64
# replicas and another micro batch).
expect 0 "search --write a phase with accumulation" -- "$IPU" search "$ROOT/examples/bert_large_pod64.ipu" --top 1 --rank expected --write "$TMP/pod64.ipu"
grep -q "micro_batch 2 -> [0-9]*, gradient_accumulation 96 -> [0-9]*, .*global batch 1,536 as before" "$TMP/out" || { echo "FAIL: --write does not state the batch it wrote"; cat "$TMP/out"; fail=1; }
expect 0 "plan the written pod64 script" -- "$IPU" plan "$TMP/pod64.ipu" --json
python3 -c "
import json
p = json.load(open('$TMP/out'))['runs'][0]['phases'][0]
assert p['global_batch'] == 1536 and p['mapping']['name'] == 'mlperf_pod64_searched', (p['global_batch'], p['mapping']['name'])
" || { echo "FAIL: --write changed the global batch of bert_large_pod64"; fail=1; }
# --apply edits the script as fmt does (a symlink stays a link to it, its
# mode stays), to what --write wrote; applied again, nothing changes.
mkdir -p "$TMP/apply"
cp "$ROOT/examples/tiny_bert.ipu" "$TMP/apply/script.ipu"
chmod 640 "$TMP/apply/script.ipu"
ln -s script.ipu "$TMP/apply/link.ipu"
expect 0 "search --apply" -- "$IPU" search "$TMP/apply/link.ipu" --top 1 --apply
grep -q "^updated $TMP/apply/link.ipu:" "$TMP/out" || { echo "FAIL: --apply does not say what it updated"; cat "$TMP/out"; fail=1; }
[ -L "$TMP/apply/link.ipu" ] || { echo "FAIL: --apply replaced a symlink"; fail=1; }
[ "$(stat -c %a "$TMP/apply/script.ipu")" = 640 ] || { echo "FAIL: --apply changed the script's mode"; fail=1; }
cmp -s "$TMP/apply/script.ipu" "$TMP/best.ipu" || { echo "FAIL: --apply wrote other text than --write"; diff "$TMP/apply/script.ipu" "$TMP/best.ipu"; fail=1; }
expect 0 "search --apply again" -- "$IPU" search "$TMP/apply/script.ipu" --top 1 --apply
grep -q "(unchanged)" "$TMP/out" || { echo "FAIL: --apply twice changed the script again"; cat "$TMP/out"; fail=1; }
cmp -s "$TMP/apply/script.ipu" "$TMP/best.ipu" || { echo "FAIL: --apply twice changed the text"; fail=1; }
expect 2 "search --write and --apply" -- "$IPU" search "$ROOT/examples/tiny_bert.ipu" --apply --write "$TMP/both.ipu"
[ -e "$TMP/both.ipu" ] && { echo "FAIL: --write and --apply together wrote a file"; fail=1; }
expect 1 "search --write where nothing fits" -- "$IPU" search "$ROOT/examples/gpt3_175b_pod256.ipu" --max-ipus 4 --write "$TMP/none.ipu"
[ -e "$TMP/none.ipu" ] && { echo "FAIL: --write wrote a file when nothing fits"; fail=1; }
grep -q "nothing written to" "$TMP/err" || { echo "FAIL: --write where nothing fits does not say so"; cat "$TMP/err"; fail=1; }
expect 1 "search --write does not overwrite" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --write "$TMP/best.ipu"
expect 2 "search without a script" -- "$IPU" search
expect 2 "search with a bad objective" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --objective fastest
expect 2 "search with a bad ranking" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --rank fastest
expect 0 "search ranked by the estimate" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --phase one --top 1 --rank expected
grep -q "ranked by the estimate" "$TMP/out" || { echo "FAIL: --rank expected does not say how it ranks"; cat "$TMP/out"; fail=1; }
grep -q "outside the calibration: phased execution" "$TMP/out" || { echo "FAIL: the phased winner by the estimate is not flagged"; cat "$TMP/out"; fail=1; }
expect 2 "search with a bad --fix" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --fix replicas=many
expect 2 "search with a bad headroom" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --headroom 120%
expect 2 "search with no threads" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --threads 0
expect 2 "search with a bad time limit" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --time-limit soon
expect 2 "search with a zero time limit" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --time-limit 0s
# A time limit that passes at once: the report says it stopped early and
# shows the best of what it evaluated (the script's own mapping); the JSON
# says why and how much it did not search.
expect 0 "search stopped by its time limit" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --phase one --time-limit 0.000001
grep -q "stopped early (the time limit)" "$TMP/out" || { echo "FAIL: a search stopped by --time-limit does not say so"; cat "$TMP/out"; fail=1; }
expect 0 "search --json stopped by its time limit" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --phase one --time-limit 0.000001 --json
python3 -c "
import json,sys
p = json.load(open('$TMP/out'))['phases'][0]
assert p['stopped'] == 'time_limit' and p['counts']['not_searched'] > 0, (p['stopped'], p['counts'])
" || { echo "FAIL: search --json does not say it stopped at its time limit"; fail=1; }
expect 0 "search --json with threads" -- "$IPU" search "$ROOT/examples/tiny_bert.ipu" --json --threads 3
python3 -c "
import json
p = json.load(open('$TMP/out'))['phases'][0]
assert p['stopped'] is None and p['counts']['not_searched'] == 0, (p['stopped'], p['counts'])
" || { echo "FAIL: a whole search says it stopped"; fail=1; }
# Ctrl-C: the search stops between waves, prints the best so far, writes
# nothing and ends with 130 (docs/search.md). One thread, so the search is
# still running when the signal comes on a fast host.
"$IPU" search "$ROOT/examples/gpt3_175b_pod256.ipu" --threads 1 --write "$TMP/interrupted.ipu" >"$TMP/out" 2>"$TMP/err" &
searching=$!
sleep 0.3
kill -INT "$searching"
wait "$searching"
got=$?
[ "$got" -eq 130 ] || { echo "FAIL: Ctrl-C of a search: exit $got, expected 130"; cat "$TMP/err"; fail=1; }
grep -q "interrupted: the results are the best found before Ctrl-C; nothing was written" "$TMP/err" || { echo "FAIL: Ctrl-C of a search does not say what it kept"; cat "$TMP/err"; fail=1; }
grep -q "stopped early (interrupted)" "$TMP/out" || { echo "FAIL: Ctrl-C of a search does not show the best so far"; cat "$TMP/out"; fail=1; }
[ -e "$TMP/interrupted.ipu" ] && { echo "FAIL: an interrupted search wrote its --write file"; fail=1; }
expect 2 "search of a run that is not there" -- "$IPU" search "$ROOT/examples/bert_large_pod16.ipu" --run nope
expect 1 "search of a broken script" -- "$IPU" search "$TMP/bad.ipu"
expect 1 "search where nothing fits" -- "$IPU" search "$ROOT/examples/gpt3_175b_pod256.ipu" --max-ipus 4
grep -q "nothing fits: the closest mapping found needs" "$TMP/out" || { echo "FAIL: nothing-fits explanation missing"; cat "$TMP/out"; fail=1; }
grep -q -- "--max-ipus 256" "$TMP/out" || { echo "FAIL: nothing-fits does not say which constraint to relax"; fail=1; }

# A phase whose mapping is declared with `search { }`: the check gave it the
# block's answer (batch included); what is written is the script as written
# with the search's best put in, and it estimates to the search's figure.
expect 0 "search --write of a searched mapping" -- "$IPU" search "$ROOT/tests/scripts/search/declared_search.ipu" --top 1 --max-ipus 8 --headroom 10% --fix recompute=every_layer --json --write "$TMP/declared_written.ipu"
cp "$TMP/out" "$TMP/declared_search.json"
grep -q "^    mapping: best_searched$" "$TMP/declared_written.ipu" && grep -q "^  search {" "$TMP/declared_written.ipu" \
  || { echo "FAIL: a searched mapping's phase is not written with the new mapping beside the searched one"; cat "$TMP/declared_written.ipu"; fail=1; }
expect 0 "estimate the script written for a searched mapping" -- "$IPU" estimate "$TMP/declared_written.ipu" --json
python3 -c "
import json
want = json.load(open('$TMP/declared_search.json'))['phases'][0]['top'][0]['samples_per_s']
got = json.load(open('$TMP/out'))['runs'][0]['phases'][0]['throughput_samples_per_s']
assert abs(got - want) <= 1e-9 * want, (got, want)
" || { echo "FAIL: the script written for a searched mapping estimates to another figure"; fail=1; }

# A mapping imported from a module is written for `four.model on four.pod`
# (the script does not import the pod); written elsewhere, the script's
# imports would not resolve: nothing is written. A phase of an imported
# training cannot be written into the script.
mkdir -p "$TMP/imported/sub"
cat > "$TMP/imported/lib.ipu" <<'IPU'
import "std/pods"
import "std/models/bert"
import "std/precision"
model small = bert(layers: 2, hidden: 128, heads: 2, ffn: 512, vocab: 4000, positions: 128)
mapping four for small on POD4 {
  replicas: 4
}
training imported {
  mapping: four
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  phase p { seq_len: 128, masked_tokens: 20, micro_batch: 4, global_batch: 64, steps: 100, lr: 0.001 }
}
IPU
cat > "$TMP/imported/main.ipu" <<'IPU'
import "lib"
import "std/precision"

training t {
  mapping: four
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  phase p { seq_len: 128, masked_tokens: 20, micro_batch: 4, global_batch: 64, steps: 100, lr: 0.001 }
}
run t
IPU
expect 0 "search --write with an imported mapping" -- "$IPU" search "$TMP/imported/main.ipu" --top 1 --write "$TMP/imported/written.ipu"
grep -q "^mapping four_searched for four.model on four.pod {" "$TMP/imported/written.ipu" || { echo "FAIL: an imported mapping is not written through its name"; cat "$TMP/imported/written.ipu"; fail=1; }
expect 0 "the script written with an imported mapping checks" -- "$IPU" check "$TMP/imported/written.ipu"
expect 1 "search --write where the script's imports do not resolve" -- "$IPU" search "$TMP/imported/main.ipu" --top 1 --write "$TMP/imported/sub/written.ipu"
[ -e "$TMP/imported/sub/written.ipu" ] && { echo "FAIL: a script that does not check where it goes was written"; fail=1; }
grep -q "does not check as" "$TMP/err" || { echo "FAIL: --write elsewhere does not say why nothing was written"; cat "$TMP/err"; fail=1; }
printf 'import "lib"\nrun imported\n' > "$TMP/imported/runs_lib.ipu"
expect 1 "search --write of a phase declared in a module" -- "$IPU" search "$TMP/imported/runs_lib.ipu" --top 1 --write "$TMP/imported/lib_written.ipu"
grep -q "is written in .*lib.ipu., not in" "$TMP/err" || { echo "FAIL: a phase of a module is not refused with its reason"; cat "$TMP/err"; fail=1; }

# `ipu search` of a mapping with a `search { }` block searches as the block
# asks (its objective, max_ipus, headroom and the settings beside it), so its
# best is what `ipu estimate` of the script uses; an option overrides the block.
expect 0 "search of a searched mapping, as its block asks" -- "$IPU" search "$ROOT/tests/scripts/search/declared_search.ipu" --top 1 --json
cp "$TMP/out" "$TMP/block_search.json"
expect 0 "estimate of a searched mapping" -- "$IPU" estimate "$ROOT/tests/scripts/search/declared_search.ipu" --json --no-store
python3 -c "
import json
p = json.load(open('$TMP/block_search.json'))['phases'][0]
assert (p['max_ipus'], p['headroom'], p['objective']) == (8, 0.1, 'throughput'), p
assert p['top'][0]['recompute'] == 'every_layer', p['top'][0]
got = json.load(open('$TMP/out'))['runs'][0]['phases'][0]['throughput_samples_per_s']
assert abs(got - p['top'][0]['samples_per_s']) <= 1e-9 * got, (got, p['top'][0]['samples_per_s'])
" || { echo "FAIL: ipu search of a searched mapping does not search as its block asks"; fail=1; }
expect 0 "search of a searched mapping, overriding its block" -- "$IPU" search "$ROOT/tests/scripts/search/declared_search.ipu" --top 1 --json --max-ipus 16 --headroom 0 --fix recompute=none
python3 -c "
import json
p = json.load(open('$TMP/out'))['phases'][0]
assert (p['max_ipus'], p['headroom']) == (16, 0.0), p
assert p['top'][0]['recompute'] == 'none', p['top'][0]
" || { echo "FAIL: options do not override a search block's settings"; fail=1; }

# The results of `search { }` are kept in the user's cache ($XDG_CACHE_HOME/ipu/search)
# and read back; a damaged file is searched again and rewritten; IPU_NO_CACHE=1
# keeps nothing (docs/search.md, "Cached results").
declared="$ROOT/tests/scripts/search/declared_search.ipu"
expect 0 "check a searched mapping, cache on" -- env -u IPU_NO_CACHE XDG_CACHE_HOME="$TMP/cache" "$IPU" check "$declared"
cp "$TMP/err" "$TMP/cached_first"
[ "$(ls "$TMP/cache/ipu/search" | wc -l)" = 1 ] || { echo "FAIL: the search's result was not kept in the cache"; ls -R "$TMP/cache"; fail=1; }
expect 0 "check it again, from the cache" -- env -u IPU_NO_CACHE XDG_CACHE_HOME="$TMP/cache" "$IPU" check "$declared"
cmp -s "$TMP/err" "$TMP/cached_first" || { echo "FAIL: the cached result says something else"; diff "$TMP/err" "$TMP/cached_first"; fail=1; }
for f in "$TMP"/cache/ipu/search/*.json; do head -c 100 "$f" > "$f.cut" && mv "$f.cut" "$f"; done
expect 0 "check with a damaged cache file" -- env -u IPU_NO_CACHE XDG_CACHE_HOME="$TMP/cache" "$IPU" check "$declared"
cmp -s "$TMP/err" "$TMP/cached_first" || { echo "FAIL: a damaged cache file changed the result"; diff "$TMP/err" "$TMP/cached_first"; fail=1; }
python3 -c "import glob, json; [json.load(open(f)) for f in glob.glob('$TMP/cache/ipu/search/*.json')]" || { echo "FAIL: the damaged cache file was not written again"; fail=1; }
expect 0 "check with the cache off" -- env IPU_NO_CACHE=1 XDG_CACHE_HOME="$TMP/nocache" "$IPU" check "$declared"
[ -e "$TMP/nocache" ] && { echo "FAIL: IPU_NO_CACHE=1 still wrote a cache"; fail=1; }

# Examples and the standard library are kept in canonical format.
expect 0 "examples and stdlib are formatted" -- "$IPU" fmt --check "$ROOT"/examples/*.ipu "$ROOT"/stdlib/*.ipu "$ROOT"/stdlib/models/*.ipu

# The outputs shown in docs/diagnostics.md are what `ipu` prints today.
python3 "$ROOT/tests/diagnostics/doc_outputs.py" "$IPU" "$ROOT" --check || fail=1

exit $fail
