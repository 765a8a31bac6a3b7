#!/usr/bin/env bash
# The robustness suite: what a hostile user, a crash or a second terminal does
# to `ipu`, one case per category of docs/run.md "What is guaranteed" and
# docs/hooks.md "The sandbox". Every command runs under `timeout`: a hang is a
# failure, not a stuck test.
#
#   hooks      hostile Lua (library calls that escape an instruction count)
#   paths      FIFOs, devices and directories everywhere a path is read
#   files      modes, owners and links through fmt and calibrate -o
#   checkpoints damaged, forged, missing and misplaced checkpoints
#   runs       concurrent resumes, torn metrics, divergence
#   check      what run would refuse is refused by check; output stays clean
#   calibrate  tables with implausible, malformed or too few figures
#
# usage: robustness_test.sh IPU ROOT
set -uo pipefail
IPU="$(realpath "$1")"
ROOT="$(realpath "$2")"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
fail=0
LIMIT=60  # seconds any single command may take; hooks are bounded at 2 s per call

# expect CODE DESCRIPTION -- command...: exit status CODE within LIMIT seconds.
expect() {
  local want="$1" what="$2"; shift 3
  timeout -k 5 "$LIMIT" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  local got=$?
  if [ "$got" -eq 124 ] || [ "$got" -eq 137 ]; then
    echo "FAIL: $what: still running after ${LIMIT}s (a hang)"; fail=1; return
  fi
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"; echo "--- stdout"; head -20 "$TMP/out"; echo "--- stderr"; head -20 "$TMP/err"
    fail=1
  fi
}
# said PATTERN DESCRIPTION: the last command's output matches PATTERN (grep -E).
said() {
  grep -qE -- "$1" "$TMP/out" "$TMP/err" || { echo "FAIL: $2 (no \`$1\` in the output)"; head -20 "$TMP/err"; fail=1; }
}
not_said() {
  grep -qE -- "$1" "$TMP/out" "$TMP/err" && { echo "FAIL: $2 (\`$1\` in the output)"; head -20 "$TMP/err"; fail=1; }
}

# cpu_ms VAR: set VAR to the CPU time (user + system, milliseconds) of this
# shell's finished children so far (`times`' second line, run in this shell,
# not a subshell; a command run by `timeout` is a child's child, waited for,
# so it is counted). The hook budgets are in CPU time
# (interpreter/hooks/sandbox.h), so what they bound is checked in CPU time:
# the wall time of a check on a loaded host (a parallel build, the rest of
# the suite) says nothing about them, and a hang is caught by LIMIT.
cpu_ms() {
  times >"$TMP/times"
  printf -v "$1" '%s' "$(tail -1 "$TMP/times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] } printf "%d", t * 1000 }')"
}

# ---------------------------------------------------------------- hooks
# Each would run for minutes to hours on an instruction count alone: the
# library does the work. Top-level code runs under `ipu check`.
hostile=(
  "for i = 1, 1e9 do local s = string.rep('x', 4e6) end"
  "local s = string.rep('x', 1e6) for i = 1, 1e9 do local t = s:upper() end"
  "for i = 1, 1e9 do pcall(string.rep, 'x', 8e6) end"
  "local i = ('('):rep(400000):find('%b()')"
  "local s = ('x'):rep(300000) local i = s:find('[' .. ('a'):rep(200000) .. ']')"
  "local s = ('a'):rep(30000) for w in s:gmatch('a-a-a-b') do end"
  "local t = {} for i = 1, 3000000 do t[i] = -i end table.sort(t)"
  "local t = {} for i = 1, 200000 do t[i] = tostring(i) end for k = 1, 1e9 do table.sort(t, function(a, b) return a > b end) end"
  "xpcall(function() while true do end end, function(e) while true do end end)"
  "local s = string.rep('a', 1e6) for i = 1, 1e9 do local t = s:gsub('a', 'b') end"
  "local t = {} for i = 1, 1e9 do t[i % 5000 + 1] = table.concat({string.rep('x', 1e5), 'y'}) end"
)
n=0
for code in "${hostile[@]}"; do
  n=$((n + 1))
  printf 'import "std/pods"\nhook h = lua """\n%s\n"""\n' "$code" > "hook$n.ipu"
  cpu_ms start
  expect 1 "hostile hook $n ($code)" -- "$IPU" check "hook$n.ipu"
  said "error\[IPU400[34]\]" "hostile hook $n is a budget error"
  said "hook$n.ipu:3:" "hostile hook $n is reported at the hook's line"
  cpu_ms now
  [ $((now - start)) -le 15000 ] || { echo "FAIL: hostile hook $n took more than 15 s of CPU time"; fail=1; }
done
# Many slow hooks share one budget for their top levels (10 s), not 2 s each.
python3 -c '
print("import \"std/pods\"")
for i in range(30): print("hook h%d = lua \"\"\"\nwhile true do local s = string.rep(\"x\", 1e5) end\n\"\"\"" % i)
' > many.ipu
cpu_ms start
expect 1 "30 slow hooks" -- "$IPU" check many.ipu
[ "$(grep -c 'error\[IPU4003\]' "$TMP/err")" = 30 ] || { echo "FAIL: not every slow hook is IPU4003"; fail=1; }
cpu_ms now
[ $((now - start)) -le 25000 ] || { echo "FAIL: 30 slow hooks took more than 25 s of CPU time to check"; fail=1; }
# A ctx kept past its call cannot be read; ctx:stop wants text.
cat > stale.ipu <<'EOF'
import "std/pods"
import "std/models/bert"
hook h = lua "function on_step(ctx) if kept then local s = kept.step end kept = ctx end"
mapping m for bert_base on POD16 { pipeline: balanced(4); replicas: 4; recompute: every_layer }
training t {
  mapping: m
  optimizer: lamb()
  hooks: [h]
  phase one { seq_len: 128; masked_tokens: 20; micro_batch: 8; global_batch: 4096; steps: 10; lr: 0.001 }
}
EOF
expect 1 "a stale ctx is read" -- "$IPU" estimate stale.ipu
said "error\[IPU4005\]" "reading a stale ctx is IPU4005"
sed 's/if kept then local s = kept.step end kept = ctx/ctx:stop({})/' stale.ipu > stop.ipu
expect 1 "ctx:stop({})" -- "$IPU" estimate stop.ipu
said "error\[IPU4008\]" "ctx:stop of a table is IPU4008"
not_said "table: 0x" "ctx:stop({}) shows a table address"

# ---------------------------------------------------------------- paths
mkfifo fifo.ipu fifo.lua fifo.csv
mkdir dir.ipu
expect 1 "check a FIFO" -- "$IPU" check fifo.ipu
said "pipe \(FIFO\)" "a FIFO script says what it is"
expect 1 "check a directory" -- "$IPU" check dir.ipu
said "a directory" "a directory script says what it is"
expect 1 "check /dev/zero" -- "$IPU" check /dev/zero
said "a device" "a device script says what it is"
for target in fifo.ipu dir.ipu /dev/null /dev/zero; do
  printf 'import "%s"\n' "$target" > "imports.ipu"
  expect 1 "import $target" -- "$IPU" check imports.ipu
  not_said "cannot find module" "import $target says it cannot find it"
  said "is (a pipe|a directory|a device)" "import $target says what it is"
done
printf 'hook h = lua file "fifo.lua"\n' > luafifo.ipu
expect 1 "a Lua hook file that is a FIFO" -- "$IPU" check luafifo.ipu
said "pipe \(FIFO\)" "a FIFO Lua file says what it is"
expect 1 "calibrate a FIFO" -- "$IPU" calibrate fifo.csv
said "pipe \(FIFO\)" "calibrate of a FIFO says what it is"
expect 1 "calibrate /dev/zero" -- "$IPU" calibrate /dev/zero
said "a device" "calibrate of a device says what it is"
expect 1 "calibrate a directory" -- "$IPU" calibrate dir.ipu
printf 'label,script,run,phase,samples_per_s\na,fifo.ipu,,,100\n' > fifo_row.csv
expect 1 "calibrate a row whose script is a FIFO" -- "$IPU" calibrate fifo_row.csv

# ---------------------------------------------------------------- files
printf 'let   x=1\n' > mode.ipu
chmod 0600 mode.ipu
expect 0 "fmt a 0600 file" -- "$IPU" fmt mode.ipu
[ "$(stat -c %a mode.ipu)" = 600 ] || { echo "FAIL: fmt changed a 0600 file's mode to $(stat -c %a mode.ipu)"; fail=1; }
grep -q "let x = 1" mode.ipu || { echo "FAIL: fmt did not format the 0600 file"; fail=1; }
printf 'let   x=1\n' > target.ipu
ln -s target.ipu link.ipu
expect 0 "fmt through a symlink" -- "$IPU" fmt link.ipu
[ -L link.ipu ] || { echo "FAIL: fmt replaced a symlink by a file"; fail=1; }
grep -q "let x = 1" target.ipu || { echo "FAIL: fmt left a symlink's target unformatted"; fail=1; }
printf 'let   x=1\n' > hard1.ipu
ln hard1.ipu hard2.ipu
expect 0 "fmt a hard link" -- "$IPU" fmt hard1.ipu
[ "$(stat -c %i hard1.ipu)" = "$(stat -c %i hard2.ipu)" ] || { echo "FAIL: fmt split a hard link"; fail=1; }
grep -q "let x = 1" hard2.ipu || { echo "FAIL: the other name of a hard link was not formatted"; fail=1; }
printf 'let   x=1\n' > readonly.ipu
chmod 0444 readonly.ipu
expect 1 "fmt a read-only file" -- "$IPU" fmt readonly.ipu
said "read-only" "fmt of a read-only file says why"
grep -q "let   x=1" readonly.ipu || { echo "FAIL: fmt rewrote a read-only file"; fail=1; }
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  printf 'let   x=1\n' > owned.ipu
  chown nobody owned.ipu
  chmod 0664 owned.ipu
  expect 0 "fmt a file of another user" -- "$IPU" fmt owned.ipu
  [ "$(stat -c %U owned.ipu)" = nobody ] || { echo "FAIL: fmt took the ownership of another user's file"; fail=1; }
  [ "$(stat -c %a owned.ipu)" = 664 ] || { echo "FAIL: fmt changed the mode of another user's file"; fail=1; }
fi
cp "$ROOT"/tests/published/*.ipu .
cp "$ROOT/tests/published/published.csv" .
printf 'old\n' > cal_target.ipu
chmod 0640 cal_target.ipu
ln -s cal_target.ipu cal_link.ipu
# Twelve rows are enough to fit and quick to: this checks how -o writes, not the fit.
head -13 published.csv > twelve.csv
expect 0 "calibrate -o through a symlink" -- "$IPU" calibrate twelve.csv -o cal_link.ipu
[ -L cal_link.ipu ] && [ "$(stat -c %a cal_target.ipu)" = 640 ] || { echo "FAIL: calibrate -o broke the link or the mode"; fail=1; }
grep -q "calibration" cal_target.ipu || { echo "FAIL: calibrate -o did not write the link's target"; fail=1; }
# A file just under the size limit that formatting would push over it.
python3 - <<'PY'
out, size, i = [], 0, 0
while True:
    line = "let a_long_name_for_a_v%d=1\n" % i  # formatting adds two spaces per line
    if size + len(line) > 8 * 1024 * 1024 - 10:
        break
    out.append(line); size += len(line); i += 1
open("big.ipu", "w").write("".join(out))
PY
expect 1 "fmt a file that formatting makes too large" -- "$IPU" fmt big.ipu
not_said "internal error" "fmt of a file near the limit is an internal error"
said "8 MiB" "fmt of a file near the limit names the limit"

# ---------------------------------------------------------------- checkpoints
# A short run with checkpoints to damage. The plan record and checksums are
# those `ipu run` writes; the forged files get a correct checksum, so the
# identity checks are exercised on their own.
fresh() {  # fresh NAME: a completed run under $TMP/NAME; prints its (absolute) directory
  rm -rf "${TMP:?}/$1"
  timeout -k 5 "$LIMIT" "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 20 --checkpoint-every 5 --threads 1 \
    --runs-dir "$TMP/$1" >/dev/null 2>&1
  local dir
  dir="$(ls -d "$TMP/$1"/tiny_pretrain/* 2>/dev/null | head -1)"
  if [ -z "$dir" ]; then
    echo "FAIL: the run to damage ($1) was not made" >&2
    mkdir -p "$TMP/$1/none/checkpoints/long"  # what follows then fails inside $TMP, harmlessly
    dir="$TMP/$1/none"
  fi
  echo "$dir"
}
forge() {  # forge FILE KEY VALUE: set a meta field and recompute the checksum
  python3 - "$@" <<'PY'
import sys
path, key, value = sys.argv[1:4]
data = open(path, "rb").read()
end = data.index(b"\nend\n") + 5
lines = data[:end].decode().split("\n")[:-2]
out = []
for l in lines:
    if l.startswith("checksum "):
        continue
    if l.startswith("meta " + key + " "):
        l = "meta %s %s" % (key, value)
    out.append(l)
header = ("\n".join(out) + "\n").encode()
h = 0xcbf29ce484222325
for b in header + data[end:]:
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
open(path, "wb").write(header + ("checksum fnv1a64:%016x\nend\n" % h).encode() + data[end:])
PY
}
resume_fails() {  # resume_fails DIR DESCRIPTION PATTERN
  local before=""
  [ -f "$1/summary.json" ] && before="$(cat "$1/summary.json")"
  expect 1 "$2" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 20 --threads 1 --resume="$1"
  said "error\[IPU5005\]" "$2 is IPU5005"
  said "$3" "$2 says why"
  [ "$before" = "$(cat "$1/summary.json" 2>/dev/null)" ] || { echo "FAIL: $2 changed summary.json"; fail=1; }
}
d=$(fresh r1)
python3 - "$d/checkpoints/long/step-00000015.ipt" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[-50] ^= 0x10; open(p, "wb").write(b)
PY
rm "$d/checkpoints/long/final.ipt"
resume_fails "$d" "resume from a checkpoint with a flipped bit" "checksum does not match"
d=$(fresh r2); rm "$d/checkpoints/long/final.ipt"
forge "$d/checkpoints/long/step-00000015.ipt" step -5
resume_fails "$d" "resume from a checkpoint claiming step -5" "claims step"
d=$(fresh r3); rm "$d/checkpoints/long/final.ipt"
forge "$d/checkpoints/long/step-00000015.ipt" step 10
resume_fails "$d" "resume from a checkpoint whose step is not its name's" "its name says"
d=$(fresh r4); rm "$d/checkpoints/long/final.ipt"
forge "$d/checkpoints/long/step-00000015.ipt" phase short
resume_fails "$d" "resume from a checkpoint of another phase" "belongs to phase"
d=$(fresh r5); rm "$d/checkpoints/long/final.ipt"
forge "$d/checkpoints/long/step-00000015.ipt" plan 0123456789abcdef
resume_fails "$d" "resume from a checkpoint of another plan" "another plan"
d=$(fresh r6); rm "$d/checkpoints/long/final.ipt"
python3 - "$d/checkpoints/long/step-00000015.ipt" <<'PY'
import sys
p = sys.argv[1]; b = open(p, "rb").read(); open(p, "wb").write(b[: len(b) // 2])
PY
resume_fails "$d" "resume from a truncated checkpoint" "checksum|runs past the end"
d=$(fresh r7); rm -rf "$d/checkpoints"
resume_fails "$d" "resume without checkpoints" "no checkpoint to resume from"
d=$(fresh r8); rm "$d/checkpoints/long/final.ipt" "$d/checkpoints/long/step-00000015.ipt"
mkfifo "$d/checkpoints/long/step-00000015.ipt"
resume_fails "$d" "resume from a checkpoint that is a FIFO" "pipe \(FIFO\)"
d=$(fresh r9); rm "$d/checkpoints/long/final.ipt"; mkdir "$d/checkpoints/long/final.ipt"
resume_fails "$d" "resume from a final checkpoint that is a directory" "a directory"
d=$(fresh r10); rm "$d/checkpoints/long/final.ipt"; rm "$d/plan.json"; mkfifo "$d/plan.json"
expect 1 "resume with plan.json a FIFO" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 20 --threads 1 --resume="$d"
said "pipe \(FIFO\)" "a FIFO plan record says what it is"
d=$(fresh r11); rm "$d/checkpoints/long/final.ipt"; rm "$d/metrics.jsonl"; mkfifo "$d/metrics.jsonl"
expect 1 "resume with metrics.jsonl a FIFO" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 20 --threads 1 --resume="$d"

# ---------------------------------------------------------------- runs
# Torn metrics: the cut-off line is dropped and reported, the rest continues.
d=$(fresh t1); rm "$d/checkpoints/long/final.ipt"
python3 - "$d/metrics.jsonl" <<'PY'
import sys
p = sys.argv[1]; b = open(p, "rb").read(); open(p, "wb").write(b[:-40])
PY
expect 0 "resume after a torn metrics line" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 20 --threads 1 --resume="$d"
said "last line was cut off" "the torn line is reported"
python3 - "$d/metrics.jsonl" <<'PY' || { echo "FAIL: metrics.jsonl after a torn line is not one JSON object per step"; fail=1; }
import json, sys
steps = [json.loads(l)["global_step"] for l in open(sys.argv[1])]
assert steps == list(range(1, 41)), steps
PY
# A log whose whole lines stop before every checkpoint (steps 1 to 3 kept,
# checkpoints from step 5): resuming would leave steps unrecorded, so it is
# refused, saying up to which step the log is whole.
d=$(fresh t2); rm "$d/checkpoints/long/final.ipt"
head -3 "$d/metrics.jsonl" >"$d/m" && mv "$d/m" "$d/metrics.jsonl"
resume_fails "$d" "resume with every checkpoint past the log's last whole line" "every record only up to step 3"
# Two resumes of one directory: the second is refused while the first runs.
d=$(fresh c1)
rm -rf "${d:?}/checkpoints/long"
timeout -k 5 "$LIMIT" "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 400 --threads 1 --resume="$d" >first.out 2>&1 &
first=$!
for _ in $(seq 50); do grep -q "phase long" first.out 2>/dev/null && break; sleep 0.1; done
expect 1 "a second resume of a directory in use" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 400 --threads 1 --resume="$d"
said "in use by another .ipu run." "the second writer is told the directory is in use"
wait "$first" || { echo "FAIL: the first resume failed beside the refused second"; cat first.out | tail -5; fail=1; }
grep -q '"status": "completed"' "$d/summary.json" || { echo "FAIL: the first resume did not complete"; fail=1; }
# A diverging run is failed, not completed.
expect 1 "a diverging run" -- "$IPU" run "$ROOT/tests/diagnostics/IPU5010_diverged.ipu" --runs-dir div
said "error\[IPU5010\]" "divergence is IPU5010"
grep -q '"status": "failed"' div/t/*/summary.json || { echo "FAIL: a diverged run is not recorded as failed"; fail=1; }

# ---------------------------------------------------------------- check
sed 's/seq_len: 64/seq_len: 200/' "$ROOT/examples/tiny_bert.ipu" > seq.ipu  # beyond the 128 positions, within memory
# Only `ipu run` needs the positions: a warning for check, the error of run.
expect 0 "check seq_len beyond the positions" -- "$IPU" check seq.ipu
said "seq.ipu:[0-9]+:[0-9]+: warning\[IPU5002\]: .ipu run. would refuse this: .*positions" "seq_len beyond positions is a check warning at the user's line"
expect 1 "run seq_len beyond the positions" -- "$IPU" run seq.ipu --runs-dir seqruns
said "seq.ipu:[0-9]+:[0-9]+: error\[IPU5002\].*positions" "seq_len beyond positions is a run error at the user's line"
[ ! -e seqruns ] || { echo "FAIL: a run refused for its positions left a run directory"; fail=1; }
cat > empty.ipu <<'EOF'
import "std/pods"
model m {}
mapping mp for m on POD4 { replicas: 4 }
training t {
  mapping: mp
  optimizer: adam()
  phase p { micro_batch: 8; gradient_accumulation: 1; steps: 10; lr: 0.001 }
}
EOF
expect 1 "check an empty model" -- "$IPU" check empty.ipu
said "empty.ipu:7:3: error\[IPU5006\]" "an empty model is a check error"
expect 1 "estimate an empty model" -- "$IPU" estimate empty.ipu
not_said "samples/s" "estimate reports a throughput for an empty model"
sed 's/seq_len: 64/seq_len: 1e12/' "$ROOT/examples/tiny_bert.ipu" > huge.ipu
expect 1 "plan seq_len 1e12" -- "$IPU" plan huge.ipu
not_said "-[0-9]+%" "a negative percentage"
not_said "[0-9]{20}" "a 20-digit figure"
printf 'let x = "\x1b[31m"\nlet y = z\x1b[2J\n' > esc.ipu
expect 1 "check a script with raw escape bytes" -- "$IPU" check esc.ipu
grep -q $'\x1b' "$TMP/err" && { echo "FAIL: a raw ESC byte reached the terminal"; fail=1; }

# ---------------------------------------------------------------- calibrate
cal_fails() {  # cal_fails FIGURE PATTERN
  printf 'label,script,run,phase,samples_per_s\n' > c.csv
  for f in resnet50_pod16_mlperf_v11 resnet50_pod64_mlperf_v11 bert_large_pod16_mlperf_v11 bert_large_pod64_mlperf_v11; do
    printf '%s,%s.ipu,,,%s\n' "$f" "$f" "$2" >> c.csv
  done
  printf 'keep\n' > c_out.ipu
  expect 1 "calibrate with figures $2" -- "$IPU" calibrate c.csv -o c_out.ipu
  said "c.csv:2: error" "calibrate of $2 names the line"
  said "$3" "calibrate of $2 says why"
  grep -q keep c_out.ipu || { echo "FAIL: a refused calibration wrote its output"; fail=1; }
  not_said "[0-9]{30}" "calibrate printed a 30-digit figure"
}
cal_fails 1 1e-307 "plausible"
cal_fails 2 1e300 "plausible"
cal_fails 3 nan "not a number"
cal_fails 4 inf "not a number"
cal_fails 5 -3 "not a number|positive"
cal_fails 6 0x1p4 "not a number"
cal_fails 7 12abc "not a number"
cal_fails 8 5 "times off"
head -3 published.csv > few.csv
expect 1 "calibrate fewer rows than parameters" -- "$IPU" calibrate few.csv
said "cannot determine" "too few rows says so"

exit $fail
