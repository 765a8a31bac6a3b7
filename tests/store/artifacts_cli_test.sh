#!/usr/bin/env bash
# Artifacts in the store through the commands (docs/tracking.md,
# "Artifacts"), on SQLite with --artifacts store: every checkpoint a run
# writes is recorded with its checksum, size, host and path in its run
# directory; a run whose checkpoint files are gone (as on another host)
# resumes from the store's copies and ends bit-identical to one never
# stopped; a damaged copy is refused, naming the run, the checkpoint and
# what to do; a sweep's `from:` starts from a run whose directory is gone;
# `ipu runs gc --keep-checkpoints last` prunes (a dry run first) and keeps
# what an unfinished sweep starts from; system metrics are recorded.
# With `postgres`, the same on a PostgreSQL server started here (as
# postgres_cli_test.sh does): large objects in place of BLOBs.
# Usage: artifacts_cli_test.sh IPU ROOT [sqlite|postgres]
set -uo pipefail
IPU="$1"
ROOT="$2"
BACKEND="${3:-sqlite}"
TMP="$(mktemp -d)"
PG=""
cleanup() {
  [ -n "$PG" ] && "${AS[@]}" "$BIN/pg_ctl" -D "$PG/data" -m fast -w stop >/dev/null 2>&1
  [ -n "$PG" ] && rm -rf "$PG"
  rm -rf "$TMP"
}
trap cleanup EXIT
export IPU_NO_CACHE=1
R="$TMP/runs"
fail=0
if [ "$BACKEND" = postgres ]; then
  BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$BIN/initdb" ] || { echo "FAIL: no PostgreSQL server (Debian package postgresql; ./dev installs it)"; exit 1; }
  PG="$(mktemp -d /tmp/ipu-pgart-XXXXXX)"
  AS=()
  if [ "$(id -u)" -eq 0 ]; then chown nobody "$PG"; AS=(runuser -u nobody --); fi
  "${AS[@]}" "$BIN/initdb" -D "$PG/data" -U ipu --auth=trust -E UTF8 --no-sync >"$TMP/initdb.log" 2>&1 \
    || { echo "FAIL: initdb"; cat "$TMP/initdb.log"; exit 1; }
  "${AS[@]}" "$BIN/pg_ctl" -D "$PG/data" -l "$PG/server.log" -w -t 60 \
    -o "-k $PG -c listen_addresses='' -c fsync=off" start >/dev/null 2>&1 || { echo "FAIL: server start"; cat "$PG/server.log"; exit 1; }
  S="postgresql://ipu@/postgres?host=$PG"
  q() { psql -h "$PG" -U ipu -d postgres -At -c "$1"; }
  CONTENTS="pg_largeobject_metadata"
  # damage RUN: one byte of each of the run's checkpoints in the store changed.
  damage() { q "select lo_put(content::oid, 0, '\\x5a'::bytea) from artifacts where run_id = $1 and content is not null" >/dev/null; }
else
  S="$TMP/ipu.db"
  q() { python3 -c "import sqlite3,sys; print('\n'.join('|'.join('' if v is None else str(v) for v in row) for row in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])))" "$S" "$1"; }
  CONTENTS="artifact_contents"
  damage() {
    python3 -c "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); db.execute(\"update artifact_contents set data = X'5A' || substr(data, 2) where id in (select content from artifacts where run_id = $1)\"); db.commit()" "$S"
  }
fi
T="$TMP/trial.ipu"
cp "$ROOT/examples/tiny_bert_sweep.ipu" "$T"
run() { "$IPU" run "$T" --checkpoint-every 8 --threads 1 --store "$S" --runs-dir "$R" --artifacts store --color never "$@"; }
dir_of() { q "select path from artifacts a join runs r on r.id = a.run_id where a.kind = 'run_directory' and r.name = '$1'"; }
id_of() { q "select id from runs where name = '$1'"; }
# interrupted NAME: a run of all 150 steps stopped by Ctrl-C after 12
# (resumed with --steps 40, it ends where the reference run ends).
interrupted() {
  # Not through `run`: a function in the background is a subshell, and the
  # Ctrl-C must reach ipu itself.
  "$IPU" run "$T" --checkpoint-every 8 --threads 1 --store "$S" --runs-dir "$R" --artifacts store --color never \
    --name "$1" --steps 150 >/dev/null 2>"$TMP/$1.err" &
  local pid=$!
  local known; known=$(ls -d "$R"/tiny_trial/* 2>/dev/null)
  for _ in $(seq 1 600); do
    local f=""
    for m in "$R"/tiny_trial/*/metrics.jsonl; do
      case "$known" in *"$(dirname "$m")"*) continue ;; esac
      [ -f "$m" ] && [ "$(wc -l <"$m")" -ge 12 ] && f="$m"
    done
    [ -n "$f" ] && break
    sleep 0.05
  done
  kill -INT "$pid"; wait "$pid"
}

# 1. Every checkpoint recorded, with its checksum, and kept in the store.
run --name ref --steps 40 >/dev/null 2>"$TMP/ref.err" || { echo "FAIL: the reference run"; tail -5 "$TMP/ref.err"; exit 1; }
REF="$(dir_of ref)"
files=$(cd "$REF" && find checkpoints -name '*.ipt' | sort)
recorded=$(q "select path from artifacts where kind = 'checkpoint' and run_id = $(id_of ref) order by path")
[ "$(echo "$files" | wc -l)" = 5 ] || { echo "FAIL: expected 5 checkpoint files (steps 8..32, final), found: $files"; fail=1; }
[ "$files" = "$recorded" ] || { echo "FAIL: the recorded checkpoints [$recorded] are not the files [$files]"; fail=1; }
"$IPU" runs show ref --json --store "$S" >"$TMP/ref.json" || fail=1
python3 - "$TMP/ref.json" "$REF" "$(hostname)" <<'PY' || fail=1
import hashlib, json, os, sys
r = json.load(open(sys.argv[1])); d = sys.argv[2]; host = sys.argv[3]
problems = []
cps = [a for a in r["artifacts"] if a["kind"] == "checkpoint"]
for a in cps:
    data = open(os.path.join(d, a["path"]), "rb").read()
    if a["sha256"] != hashlib.sha256(data).hexdigest(): problems.append(f"{a['path']}: sha256 differs")
    if a["size"] != len(data): problems.append(f"{a['path']}: size {a['size']} != {len(data)}")
    if a["run_directory"] != d: problems.append(f"{a['path']}: run directory {a['run_directory']}")
    if a["host"] != host: problems.append(f"{a['path']}: host {a['host']}")
    if not a["stored"]: problems.append(f"{a['path']}: not stored")
    if a["phase"] != "short": problems.append(f"{a['path']}: phase {a['phase']}")
steps = sorted(a["step"] for a in cps)
if steps != [8, 16, 24, 32, 40]: problems.append(f"steps {steps}")
m = r["metrics"]
for k in ("system.cpu_s", "system.peak_rss_mb", "system.rss_mb", "system.threads"):
    if k not in m or not (m[k]["max"] > 0): problems.append(f"system metric {k}: {m.get(k)}")
if m["system.peak_rss_mb"]["max"] < m["system.rss_mb"]["max"] - 1: problems.append("peak RSS below RSS")
for p in problems: print("FAIL: recorded checkpoints:", p)
sys.exit(1 if problems else 0)
PY
"$IPU" runs --store "$S" --where "system.peak_rss_mb > 1 AND system.cpu_s > 0" --columns name >"$TMP/out" || fail=1
grep -qx ref "$TMP/out" || { echo "FAIL: --where on system metrics did not find the run"; cat "$TMP/out"; fail=1; }
"$IPU" runs show ref --store "$S" --color never >"$TMP/out" || fail=1
grep -q "system     CPU .* s, peak RSS .* MiB" "$TMP/out" || { echo "FAIL: runs show does not show the system metrics"; cat "$TMP/out"; fail=1; }
grep -q "checkpoints 5 (.*, 5 kept in the store); last checkpoints/short/final.ipt at step 40" "$TMP/out" \
  || { echo "FAIL: runs show does not show the checkpoints"; cat "$TMP/out"; fail=1; }
# With --artifacts files the records are there, the bytes are not.
"$IPU" run "$T" --steps 10 --checkpoint-every 4 --threads 1 --store "$S" --runs-dir "$R" --artifacts files --name filesonly >/dev/null 2>&1 || fail=1
[ "$(q "select count(*) || ' ' || count(content) from artifacts where kind = 'checkpoint' and run_id = $(id_of filesonly)")" = "3 0" ] \
  || { echo "FAIL: --artifacts files: $(q "select count(*) || ' ' || count(content) from artifacts where kind = 'checkpoint' and run_id = $(id_of filesonly)")"; fail=1; }

# 2. Resume with the run directory's checkpoints gone: fetched from the store.
interrupted cut
[ "$(q "select status from runs where name = 'cut'")" = cancelled ] || { echo "FAIL: the interrupted run is $(q "select status from runs where name = 'cut'")"; fail=1; }
CUT="$(dir_of cut)"
rm -rf "$CUT/checkpoints"
run --resume="$CUT" --steps 40 >/dev/null 2>"$TMP/resume.err" || { echo "FAIL: resume without the checkpoint files"; tail -5 "$TMP/resume.err"; fail=1; }
grep -q "fetched checkpoints/short/step-000000.*.ipt of run cut from the store" "$TMP/resume.err" \
  || { echo "FAIL: the resume did not say it fetched the checkpoint"; cat "$TMP/resume.err"; fail=1; }
[ "$(q "select status from runs where name = 'cut'")" = finished ] || { echo "FAIL: the resumed run is not finished"; fail=1; }
cmp -s "$CUT/checkpoints/short/final.ipt" "$REF/checkpoints/short/final.ipt" \
  || { echo "FAIL: the run resumed from fetched checkpoints does not end as the one never stopped"; fail=1; }

# 3. A damaged copy is refused, with what to do, and never put in place.
interrupted damaged
DMG="$(dir_of damaged)"
damage "$(id_of damaged)"
rm -rf "$DMG/checkpoints"
run --resume="$DMG" --steps 40 >/dev/null 2>"$TMP/damaged.err"
rc=$?
[ "$rc" = 1 ] || { echo "FAIL: resuming from a damaged copy: exit $rc"; fail=1; }
grep -q "checkpoint \`checkpoints/short/step-.*\.ipt\` of run damaged kept in the store is damaged" "$TMP/damaged.err" \
  || { echo "FAIL: the damaged copy is not named"; cat "$TMP/damaged.err"; fail=1; }
grep -q "restore the file from the host that wrote it" "$TMP/damaged.err" || { echo "FAIL: no advice for a damaged copy"; cat "$TMP/damaged.err"; fail=1; }
[ -z "$(find "$DMG" -name '*.ipt*' 2>/dev/null)" ] || { echo "FAIL: a damaged checkpoint was put in place: $(find "$DMG" -name '*.ipt*')"; fail=1; }

# 4. `from:` a run whose directory is gone (another host): fetched, verified.
cat >>"$T" <<'IPU'

sweep from_ref for tiny_trial {
  method: grid
  metric: minimize(loss)
  parameters {
    phase.short.lr: [1e-3]
  }
  from: checkpoint("ref")
}
IPU
mv "$REF" "$TMP/ref-moved"
"$IPU" sweep "$T" from_ref --steps 3 --threads 1 --store "$S" --runs-dir "$R" >"$TMP/sweep.out" 2>"$TMP/sweep.err" \
  || { echo "FAIL: the sweep from a run whose directory is gone"; tail -5 "$TMP/sweep.err"; fail=1; }
grep -q "trial 0 .* finished loss=" "$TMP/sweep.err" || { echo "FAIL: the trial from the store's checkpoint did not finish"; cat "$TMP/sweep.err"; fail=1; }
start=$(q "select value from params where key = 'start_from' and run_id = (select max(id) from runs)")
case "$start" in
  "$R"/store-artifacts/"$(id_of ref)"/checkpoints/short/final.ipt) ;;
  *) echo "FAIL: the trial started from [$start], not the fetched copy"; fail=1 ;;
esac
cmp -s "$start" "$TMP/ref-moved/checkpoints/short/final.ipt" || { echo "FAIL: the fetched checkpoint is not the run's"; fail=1; }

# 5. gc: a dry run says what would go and changes nothing; an unfinished
# sweep's `from:` is kept whole; then the rest is pruned.
cat >>"$T" <<'IPU'

sweep from_cut for tiny_trial {
  method: grid
  metric: minimize(loss)
  parameters {
    phase.short.lr: [1e-3, 2e-3]
  }
  from: checkpoint("cut")
}
IPU
"$IPU" sweep create "$T" from_cut --store "$S" >/dev/null 2>&1 || { echo "FAIL: sweep create from_cut"; fail=1; }
before=$(q "select count(*) from artifacts where kind = 'checkpoint'")
blobs=$(q "select count(*) from $CONTENTS")
"$IPU" runs gc --keep-checkpoints last --dry-run --store "$S" >"$TMP/dry.out" || fail=1
[ "$(q "select count(*) from artifacts where kind = 'checkpoint'")" = "$before" ] || { echo "FAIL: gc --dry-run removed records"; fail=1; }
grep -q "^would remove ref checkpoints/short/step-00000008.ipt (.*, store)$" "$TMP/dry.out" || { echo "FAIL: the dry run does not list ref's step 8"; cat "$TMP/dry.out"; fail=1; }
grep -q "^would remove [0-9]* checkpoints (--keep-checkpoints last): .* in the store, .* of files on this host" "$TMP/dry.out" \
  || { echo "FAIL: the dry run does not say how much would go"; cat "$TMP/dry.out"; fail=1; }
grep -q "^kept whole: cut: sweep \`from_cut\` starts from it" "$TMP/dry.out" || { echo "FAIL: gc does not keep what from_cut starts from"; cat "$TMP/dry.out"; fail=1; }
grep -q "would remove cut " "$TMP/dry.out" && { echo "FAIL: gc would prune the run an unfinished sweep starts from"; fail=1; }
"$IPU" runs gc --keep-checkpoints last --store "$S" >"$TMP/gc.out" || fail=1
[ "$(q "select count(*) from artifacts where kind = 'checkpoint' and run_id = $(id_of ref)")" = 1 ] \
  || { echo "FAIL: ref keeps $(q "select count(*) from artifacts where kind = 'checkpoint' and run_id = $(id_of ref)") checkpoints, expected its final one"; fail=1; }
[ "$(q "select count(*) from artifacts where kind = 'checkpoint' and run_id = $(id_of cut)")" -ge 5 ] || { echo "FAIL: gc pruned cut"; fail=1; }
[ "$(q "select count(*) from $CONTENTS")" -lt "$blobs" ] || { echo "FAIL: gc left the store's bytes"; fail=1; }
[ -f "$(dir_of filesonly)/checkpoints/short/step-00000004.ipt" ] && { echo "FAIL: gc left a pruned file of this host"; fail=1; }
[ -f "$(dir_of filesonly)/checkpoints/short/final.ipt" ] || { echo "FAIL: gc removed a final checkpoint"; fail=1; }

[ "$fail" = 0 ] && echo "artifacts ($BACKEND): ok"
exit "$fail"
