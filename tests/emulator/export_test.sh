#!/usr/bin/env bash
# `ipu run --export-steps N DIR` as a user runs it (docs/emulator.md,
# "Exporting steps"): its usage errors (exit 2, nothing written), the export
# of a tiny BERT checked by export_check.py through the documented reader
# (batches against the corpus, gradients against PyTorch, LAMB and AdamW in
# NumPy, the run's own checkpoints), the same export under another mapping,
# and replacing an earlier export.
# Usage: export_test.sh IPU ROOT PYTHON   (PYTHON with numpy and torch)
set -uo pipefail
IPU="$1"
ROOT="$2"
PY="$3"
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
says() {  # says PATTERN DESCRIPTION: stderr of the last command matches
  grep -q -- "$1" "$TMP/err" || { echo "FAIL: $2: stderr lacks '$1'"; cat "$TMP/err"; fail=1; }
}

# script OPTIMIZER MAPPING_BODY MICRO_BATCH GA MAPPING_NAME: a tiny BERT (the PyTorch cross-check's) on POD4.
script() {
  cat <<EOF
import "std/pods"
import "std/models/bert"
model tiny = bert(layers: 2, hidden: 32, heads: 4, ffn: 64, vocab: 400, positions: 64)
mapping $5 for tiny on POD4 { $2 }
training t {
  mapping: $5
  optimizer: $1
  seed: 11
  phase one { seq_len: 32, masked_tokens: 5, micro_batch: $3, gradient_accumulation: $4, steps: 10, lr: 0.004 warmup 3 steps then linear to 0 }
}
run t
EOF
}
LAMB='lamb(weight_decay: 0.01, exclude: [bias, norm])'
ADAMW='adamw(weight_decay: 0.01, epsilon: 1e-6, clip_norm: 0.5)'   # clipped: the gradients' norm is 2 to 3
PIPE='pipeline { ipu 0: embedding, encoder[0], mlm_head, nsp_head
 ipu 1: encoder[1] }
 replicas: 2'
script "$LAMB" "" 4 2 one_ipu > "$TMP/lamb.ipu"
script "$ADAMW" "" 4 2 one_ipu > "$TMP/adamw.ipu"
script "$LAMB" "$PIPE" 2 2 pipelined > "$TMP/lamb_pipe.ipu"
RUN=("$IPU" run --no-store --threads 2)

# ---------------------------------------------------------------- usage errors
expect 2 "--export-steps without a number" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps
says "needs a whole number" "--export-steps without a number"
expect 2 "--export-steps 0" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps 0 "$TMP/e0"
says "from 1 to 1000000" "--export-steps 0"
expect 2 "--export-steps -3" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps -3 "$TMP/e0"
expect 2 "--export-steps two" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps two "$TMP/e0"
expect 2 "--export-steps 2x" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps=2x "$TMP/e0"
expect 2 "--export-steps N without a directory" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps 2
says "needs a directory" "--export-steps N without a directory"
expect 2 "--export-steps N followed by an option" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps 2 --steps 3
says "needs a directory" "--export-steps N followed by an option"
printf 'x' > "$TMP/a_file"
expect 2 "--export-steps into a file" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps 2 "$TMP/a_file"
says "is not a directory" "--export-steps into a file"
expect 1 "--export-steps under a file (cannot be created)" -- "${RUN[@]}" "$TMP/lamb.ipu" --runs-dir "$TMP/runs_none" --export-steps 2 "$TMP/a_file/sub"
says "error\[IPU5009\]: cannot create" "--export-steps under a file (cannot be created)"
[ -e "$TMP/runs_none" ] && { echo "FAIL: the run started although the export failed"; fail=1; }
mkdir -p "$TMP/busy" && printf 'mine\n' > "$TMP/busy/notes.txt"
expect 2 "--export-steps into a directory of other files" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps 2 "$TMP/busy"
says "not empty and holds no earlier export" "--export-steps into a directory of other files"
[ "$(ls "$TMP/busy")" = "notes.txt" ] || { echo "FAIL: a refused export directory was changed"; fail=1; }
expect 2 "--export-steps with --resume" -- "${RUN[@]}" "$TMP/lamb.ipu" --resume --export-steps 2 "$TMP/e1"
says "cannot be combined with --resume" "--export-steps with --resume"
expect 2 "--export-steps beyond --steps" -- "${RUN[@]}" "$TMP/lamb.ipu" --steps 3 --export-steps 5 "$TMP/e1"
says "runs 3 steps (--steps)" "--export-steps beyond --steps"
expect 2 "--export-steps beyond the phase" -- "${RUN[@]}" "$TMP/lamb.ipu" --export-steps 11 "$TMP/e1"
says "phase \`one\` runs 10 steps" "--export-steps beyond the phase"
{ script "$LAMB" "" 4 2 one_ipu; script "$ADAMW" "" 4 2 other | sed -e '1,3d' -e 's/training t /training t2 /' -e 's/^run t$/run t2/'; } > "$TMP/two.ipu"
expect 2 "--export-steps of a script with two trainings" -- "${RUN[@]}" "$TMP/two.ipu" --export-steps 1 "$TMP/e1"
says "exports one training; this script runs 2" "--export-steps of a script with two trainings"
expect 2 "--export-steps on plan" -- "$IPU" plan "$TMP/lamb.ipu" --export-steps 2 "$TMP/e1"
says "unknown option \`--export-steps\`" "--export-steps on plan"
[ -e "$TMP/e0" ] || [ -e "$TMP/e1" ] && { echo "FAIL: a refused export created its directory"; fail=1; }

# ---------------------------------------------------------------- a checked export
# The run goes on after the export: checkpoints every step let the check
# compare the exported weights with what the run trained.
expect 0 "export 2 steps (LAMB)" -- "${RUN[@]}" "$TMP/lamb.ipu" --steps 2 --checkpoint-every 1 --runs-dir "$TMP/runs" --export-steps 2 "$TMP/lamb"
says "exported 2 steps of phase one" "export 2 steps (LAMB)"
grep -q "completed: training t" "$TMP/out" || { echo "FAIL: the run after the export did not complete"; fail=1; }
ckpt="$(ls -d "$TMP"/runs/t/*/checkpoints/one | head -1)"
"$PY" "$ROOT/tests/emulator/export_check.py" check "$TMP/lamb" "$ckpt" || { echo "FAIL: the LAMB export does not check"; fail=1; }
"$PY" "$ROOT/tools/ipu_export.py" "$TMP/lamb" > "$TMP/summary" || { echo "FAIL: ipu_export.py cannot summarise the export"; fail=1; }
grep -q "step 2: loss" "$TMP/summary" || { echo "FAIL: the summary lacks step 2"; cat "$TMP/summary"; fail=1; }
# Every file is NumPy's format 1.0 with its header padded to 64 bytes, as documented.
"$PY" - "$TMP/lamb" <<'PY' || { echo "FAIL: a tensor file is not NumPy 1.0 with an aligned header"; fail=1; }
import glob, struct, sys
files = glob.glob(sys.argv[1] + "/**/*.npy", recursive=True)
assert len(files) > 100, len(files)
for f in files:
    head = open(f, "rb").read(10)
    assert head[:8] == b"\x93NUMPY\x01\x00", (f, head)
    assert (10 + struct.unpack("<H", head[8:10])[0]) % 64 == 0, f
PY

# The check can fail: exports with one thing wrong each are refused, each for its reason.
mutant() {  # mutant NAME PATTERN PYTHON: a copy of the LAMB export changed by PYTHON (d: its directory)
  rm -rf "$TMP/mutant" && cp -r "$TMP/lamb" "$TMP/mutant"
  "$PY" -c "import numpy as np, json; d='$TMP/mutant'; $3" || { echo "FAIL: mutant $1 could not be made"; fail=1; return; }
  if "$PY" "$ROOT/tests/emulator/export_check.py" check "$TMP/mutant" "$ckpt" > "$TMP/mutant.out" 2>&1; then
    echo "FAIL: export_check accepts an export with $1"; fail=1
  elif ! grep -q -- "$2" "$TMP/mutant.out"; then
    echo "FAIL: export_check refuses an export with $1, but not for it:"; cat "$TMP/mutant.out"; fail=1
  fi
}
mutant "MLM labels moved to other masked positions" "not text of the corpus" \
  "f=d+'/step-0001/batch/mlm_labels.npy'; a=np.load(f); i=np.nonzero(a>=0); a[i]=np.roll(a[i],1); np.save(f,a)"
mutant "a gradient off by 0.1%" "gradient of encoder\[1\].ffn.w1" \
  "f=d+'/step-0002/gradients/encoder[1].ffn.w1.npy'; np.save(f, np.load(f)*np.float32(1.001))"
mutant "another learning rate" "lr 0.0026" \
  "f=d+'/manifest.json'; m=json.load(open(f)); m['steps'][1]['lr']*=0.99; json.dump(m,open(f,'w'))"
mutant "a weight the run did not train" "differs from the exported weights after step 1" \
  "f=d+'/step-0001/weights/nsp_head.pooler.b.npy'; a=np.load(f); a[0,0]+=np.float32(1e-3); np.save(f,a)"

expect 0 "export 2 steps (AdamW)" -- "${RUN[@]}" "$TMP/adamw.ipu" --steps 2 --runs-dir "$TMP/runs_adamw" --export-steps 2 "$TMP/adamw"
"$PY" "$ROOT/tests/emulator/export_check.py" check "$TMP/adamw" || { echo "FAIL: the AdamW export does not check"; fail=1; }

# ---------------------------------------------------------------- other families
# A GPT (labels are the next tokens) and an MLP (checked in PyTorch), AdamW on both.
cat > "$TMP/gpt.ipu" <<'EOF'
import "std/pods"
import "std/models/gpt"
model g = gpt(layers: 2, hidden: 32, heads: 2, vocab: 400, positions: 64)
mapping m for g on POD4 { replicas: 2 }
training t { mapping: m
 optimizer: adamw(weight_decay: 0.01)
 seed: 5
 phase p { seq_len: 32, micro_batch: 4, gradient_accumulation: 1, steps: 10, lr: 0.002 } }
run t
EOF
expect 0 "export a GPT" -- "${RUN[@]}" "$TMP/gpt.ipu" --steps 2 --runs-dir "$TMP/runs_gpt" --export-steps 2 "$TMP/gpt"
"$PY" "$ROOT/tests/emulator/export_check.py" check "$TMP/gpt" || { echo "FAIL: the GPT export does not check"; fail=1; }
cat > "$TMP/mlp.ipu" <<'EOF'
import "std/pods"
import "std/layers"
model mlp {
 layer l1 = dense(inputs: 16, outputs: 64)
 layer l2 = dense(inputs: 64, outputs: 4, activation: "none")
 layer loss = softmax_loss(classes: 4)
}
mapping m for mlp on POD4 { pipeline {
 ipu 0: l1
 ipu 1: l2, loss
 }
 replicas: 2 }
training t { mapping: m
 optimizer: adamw()
 phase p { micro_batch: 16, gradient_accumulation: 2, steps: 20, lr: 0.01 } }
run t
EOF
expect 0 "export an MLP" -- "${RUN[@]}" "$TMP/mlp.ipu" --steps 3 --runs-dir "$TMP/runs_mlp" --export-steps 3 "$TMP/mlp"
"$PY" "$ROOT/tests/emulator/export_check.py" check "$TMP/mlp" || { echo "FAIL: the MLP export does not check"; fail=1; }

# ---------------------------------------------------------------- another mapping
# 2 pipeline stages, 2 replicas, micro batch 2: the same global batch of 8.
expect 0 "export under a pipelined, replicated mapping" -- "${RUN[@]}" "$TMP/lamb_pipe.ipu" --steps 2 --runs-dir "$TMP/runs_pipe" --export-steps 2 "$TMP/lamb_pipe"
"$PY" "$ROOT/tests/emulator/export_check.py" compare "$TMP/lamb" "$TMP/lamb_pipe" || { echo "FAIL: the export depends on the mapping"; fail=1; }

# ---------------------------------------------------------------- replacing an export
# An earlier export is replaced: what it wrote goes, other files stay.
printf 'my notes\n' > "$TMP/lamb/notes.txt"
expect 0 "export 1 step over an earlier export" -- "${RUN[@]}" "$TMP/lamb.ipu" --steps 1 --runs-dir "$TMP/runs2" --export-steps 1 "$TMP/lamb"
[ -d "$TMP/lamb/step-0002" ] && { echo "FAIL: the earlier export's step 2 is still there"; fail=1; }
[ -f "$TMP/lamb/step-0001/batch/tokens.npy" ] || { echo "FAIL: the new export lacks step 1"; fail=1; }
[ "$(cat "$TMP/lamb/notes.txt")" = "my notes" ] || { echo "FAIL: replacing an export touched a file it did not write"; fail=1; }
"$PY" - "$ROOT/tools" "$TMP/lamb" <<'PY' || { echo "FAIL: the replaced export does not read back"; fail=1; }
import sys
sys.path.insert(0, sys.argv[1])
import ipu_export
ex = ipu_export.load(sys.argv[2])
assert len(ex.steps) == 1 and ex.manifest["exported_steps"] == 1, ex.manifest["exported_steps"]
PY

# The reader refuses an export that did not finish, and a file that is not what the manifest says.
"$PY" - "$ROOT/tools" "$TMP/lamb" <<'PY' || { echo "FAIL: the reader accepts a damaged or unfinished export"; fail=1; }
import json, os, shutil, sys
sys.path.insert(0, sys.argv[1])
import ipu_export
d = sys.argv[2]
shutil.copy(os.path.join(d, "step-0001/batch/tokens.npy"), os.path.join(d, "step-0001/batch/tokens.bak"))
shutil.copy(os.path.join(d, "step-0001/batch/segments.npy"), os.path.join(d, "step-0001/batch/tokens.npy"))
shutil.copy(os.path.join(d, "initial/embedding.word.npy"), os.path.join(d, "step-0001/batch/tokens.npy"))
try:
    ipu_export.load(d)
    sys.exit("a tensor of the wrong shape was accepted")
except ipu_export.ExportError as e:
    assert "the manifest says" in str(e), e
os.replace(os.path.join(d, "step-0001/batch/tokens.bak"), os.path.join(d, "step-0001/batch/tokens.npy"))
m = json.load(open(os.path.join(d, "manifest.json")))
m["complete"] = False
json.dump(m, open(os.path.join(d, "manifest.json"), "w"))
try:
    ipu_export.load(d)
    sys.exit("an unfinished export was accepted")
except ipu_export.ExportError as e:
    assert "did not finish" in str(e), e
PY
# An unfinished export is still an export: it can be replaced.
expect 0 "export over an unfinished export" -- "${RUN[@]}" "$TMP/lamb.ipu" --steps 1 --runs-dir "$TMP/runs3" --export-steps 1 "$TMP/lamb"

if [ "$fail" -ne 0 ]; then echo "export tests: FAILED"; exit 1; fi
echo "export tests: all passed"
