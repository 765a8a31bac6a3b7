#!/usr/bin/env bash
# How runs end, as the store records them (docs/tracking.md):
#   kill -9 mid-run: the store stays consistent (integrity check), the run
#     stays `running` until its heartbeat lapses, `ipu runs gc` then marks it
#     killed (and `ipu runs` once two beats are missed, its process being
#     gone from this host), and what it recorded stays; --resume continues the same record;
#   Ctrl-C: cancelled;
#   a run directory written with --no-store: `ipu runs import` brings it in,
#     once.
# The store is read with Python's sqlite3 module as well as with ipu.
set -uo pipefail
IPU="$1"; ROOT="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail=0
export IPU_STORE="$TMP/ipu.db"
q() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])" "$IPU_STORE" "$1"; }
# Ctrl-C once a run directory under $1 has $2 lines in metrics.jsonl (not
# after a fixed time: on a loaded machine the run may not have started yet).
interrupt_after() {
  local root="$1" lines="$2" pid="$3"
  for _ in $(seq 1 1200); do
    local f; f=$(ls "$root"/*/*/metrics.jsonl 2>/dev/null | head -1)
    [ -n "$f" ] && [ "$(wc -l <"$f")" -ge "$lines" ] && break
    sleep 0.1
  done
  kill -INT "$pid"; wait "$pid"
}

# kill -9 once the store holds some steps.
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 150 --threads 1 --checkpoint-every 20 --runs-dir "$TMP/runs" >/dev/null 2>"$TMP/run.err" &
pid=$!
for _ in $(seq 1 600); do
  n=$(q "select coalesce(max(count), 0) from metric_summaries where key = 'loss'" 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 40 ] && break
  sleep 0.1
done
kill -9 "$pid"; wait "$pid" 2>/dev/null
[ "$(q 'pragma integrity_check')" = ok ] || { echo "FAIL: the store is damaged after kill -9"; fail=1; }
id=$(q "select id from runs where kind = 'run'")
[ "$(q "select status from runs where id = $id")" = running ] || { echo "FAIL: a killed run is not still running before gc"; fail=1; }
"$IPU" runs gc >"$TMP/out" || fail=1
grep -q "no running run has a lapsed heartbeat" "$TMP/out" || { echo "FAIL: gc marked a run whose heartbeat is fresh"; cat "$TMP/out"; fail=1; }
"$IPU" runs gc --grace 0 >"$TMP/out" || fail=1
grep -q "marked killed.* $id" "$TMP/out" || { echo "FAIL: gc --grace 0 did not mark run $id killed"; cat "$TMP/out"; fail=1; }
# Listing: a run of this host whose process is gone shows as killed once
# its heartbeat is two beats old (10 s), without gc. Made running again with
# an 11 s old heartbeat, as if listed 11 s after the kill.
python3 -c "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); db.execute(\"update runs set status='running', ended_at=NULL, heartbeat_at=heartbeat_at-11 where id=$id\"); db.commit()" "$IPU_STORE"
"$IPU" runs --where "status = killed" --columns id >"$TMP/out" || fail=1
grep -qx "$id" "$TMP/out" || { echo "FAIL: ipu runs did not show the dead run $id as killed"; cat "$TMP/out"; fail=1; }
"$IPU" runs show "$id" --json >"$TMP/show.json" || fail=1
python3 - "$TMP/show.json" "$IPU_STORE" <<'PY' || fail=1
import json, sqlite3, sys
r = json.load(open(sys.argv[1]))
db = sqlite3.connect(sys.argv[2])
kept = db.execute("select count(*) from metrics where run_id = ? and key = 'loss'", (r["id"],)).fetchone()[0]
problems = []
if r["status"] != "killed": problems.append(f"status {r['status']}")
if kept < 40 or r["metrics"]["loss"]["count"] != kept: problems.append(f"loss points kept {kept}, summary {r['metrics']['loss']['count']}")
if r["ended_at"] is None: problems.append("no end time")
for p in problems: print("FAIL: after kill -9 and gc:", p)
sys.exit(1 if problems else 0)
PY

# --resume continues the same record, to the end, with no step twice.
dir=$(ls -d "$TMP"/runs/tiny_pretrain/*)
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 150 --threads 1 --resume="$dir" >/dev/null 2>"$TMP/resume.err" || { echo "FAIL: resume"; tail -3 "$TMP/resume.err"; fail=1; }
[ "$(q "select count(*) from runs")" = 1 ] || { echo "FAIL: resuming made a new record"; fail=1; }
[ "$(q "select status from runs where id = $id")" = finished ] || { echo "FAIL: the resumed run is not finished"; fail=1; }
lines=$(wc -l <"$dir/metrics.jsonl")
[ "$(q "select count(*) from metrics where run_id = $id and key = 'loss'")" = "$lines" ] && [ "$lines" = 250 ] \
  || { echo "FAIL: after resume: $lines lines in metrics.jsonl, $(q "select count(*) from metrics where run_id = $id and key = 'loss'") loss points in the store, expected 250"; fail=1; }
[ "$(q "select count(distinct step) from metrics where run_id = $id and key = 'loss'")" = 250 ] || { echo "FAIL: a step recorded twice"; fail=1; }

# Ctrl-C: cancelled.
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 600 --threads 1 --runs-dir "$TMP/cancel" >/dev/null 2>&1 &
interrupt_after "$TMP/cancel" 5 $!
[ "$(q "select status || ' ' || stop_reason from runs order by id desc")" = "cancelled Ctrl-C" ] \
  || { echo "FAIL: Ctrl-C is recorded as: $(q "select status from runs order by id desc")"; fail=1; }

# Import of a run directory made without the store.
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 12 --threads 1 --runs-dir "$TMP/old" --no-store >/dev/null 2>&1 || fail=1
before=$(q "select count(*) from runs")
"$IPU" runs import "$TMP/old" >"$TMP/out" || { echo "FAIL: import"; fail=1; }
[ "$(q "select count(*) from runs")" = $((before + 1)) ] || { echo "FAIL: --no-store recorded, or import did not"; fail=1; }
old=$(ls -d "$TMP"/old/tiny_pretrain/*)
iid=$(q "select max(id) from runs")
[ "$(q "select count from metric_summaries where run_id = $iid and key = 'loss'")" = "$(wc -l <"$old/metrics.jsonl")" ] || { echo "FAIL: imported loss points"; fail=1; }
[ "$(q "select status from runs where id = $iid")" = finished ] || { echo "FAIL: imported status"; fail=1; }
[ "$(q "select plan_hash from runs where id = $iid")" = "$(q "select plan_hash from runs where id = $id")" ] || { echo "FAIL: the same plan imported under another hash"; fail=1; }
[ "$(q "select value from params where run_id = $iid and key = 'mapping.replicas'")" = 2 ] || { echo "FAIL: imported parameters"; fail=1; }
"$IPU" runs import "$TMP/old" >"$TMP/out" || fail=1
grep -q "already in the store" "$TMP/out" || { echo "FAIL: a second import is not skipped"; fail=1; }
# Lines of metrics.jsonl that are not records (random bytes, a step that is
# not a step) are left out and said, the rest imported.
cp -r "$TMP/old" "$TMP/damaged"
mf=$(ls "$TMP"/damaged/tiny_pretrain/*/metrics.jsonl)
good=$(wc -l <"$mf")
{ head -c 64 /dev/urandom | tr -d '\n'; echo; echo '{"global_step": -9223372036854775808, "loss": 1}'; echo '{"global_step": 2.5, "loss": 1}'; echo '[1, 2]'; } >>"$mf"
"$IPU" runs import "$TMP/damaged" >"$TMP/out" 2>"$TMP/err" || { echo "FAIL: import of a damaged metrics.jsonl"; cat "$TMP/err"; fail=1; }
grep -q "4 lines of metrics.jsonl are not a metric record" "$TMP/err" || { echo "FAIL: import does not say what it left out"; cat "$TMP/err"; fail=1; }
did=$(q "select max(id) from runs")
[ "$(q "select count from metric_summaries where run_id = $did and key = 'loss'")" = "$good" ] || { echo "FAIL: the damaged directory's good lines"; fail=1; }
[ "$(q "select min(step) from metrics where run_id = $did")" -ge 0 ] || { echo "FAIL: a negative step was imported"; fail=1; }
# Six imports of one directory at once into a new store record it once.
for k in 1 2 3 4 5 6; do "$IPU" runs import "$TMP/old" --store "$TMP/together.db" >"$TMP/together.$k" 2>&1 & done
wait
[ "$(IPU_STORE="$TMP/together.db" q "select count(*) from runs")" = 1 ] \
  || { echo "FAIL: six imports at once made $(IPU_STORE="$TMP/together.db" q "select count(*) from runs") runs"; cat "$TMP"/together.*; fail=1; }
[ "$(cat "$TMP"/together.* | grep -c "^imported ")" = 1 ] && [ "$(cat "$TMP"/together.* | grep -c "^already in the store")" = 5 ] \
  || { echo "FAIL: six imports at once: not one imported and five skipped"; cat "$TMP"/together.*; fail=1; }
# Twelve writers setting up one new store at once (switching it to WAL,
# creating its tables): every one records its estimate, none fails with
# "database is locked" (SQLite answers that at once, without waiting, to the
# losers of the set-up).
for k in 1 2 3 4 5 6 7 8 9 10 11 12; do
  ( "$IPU" estimate "$ROOT/examples/tiny_bert.ipu" --store "$TMP/twelve.db" >"$TMP/twelve.$k" 2>&1; echo "exit $?" >>"$TMP/twelve.$k" ) &
done
wait
[ "$(cat "$TMP"/twelve.* | grep -c "^exit 0")" = 12 ] || { echo "FAIL: twelve writers on a new store: not all recorded"; grep -h "ipu estimate:\|locked" "$TMP"/twelve.*; fail=1; }
[ "$(IPU_STORE="$TMP/twelve.db" q "select count(*) from runs")" = 12 ] \
  || { echo "FAIL: twelve writers on a new store made $(IPU_STORE="$TMP/twelve.db" q "select count(*) from runs") runs"; fail=1; }

# Resuming a run recorded without the store: what it recorded is imported
# first, then the record continues (one record, every step once).
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 100 --threads 1 --checkpoint-every 10 \
  --runs-dir "$TMP/unrecorded" --no-store >/dev/null 2>&1 &
interrupt_after "$TMP/unrecorded" 25 $!
before=$(q "select count(*) from runs")
late=$(ls -d "$TMP"/unrecorded/tiny_pretrain/*)
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 100 --threads 1 --resume="$late/" >/dev/null 2>"$TMP/resume.err" || { echo "FAIL: resume of an unrecorded run"; tail -3 "$TMP/resume.err"; fail=1; }
rid=$(q "select max(id) from runs")
[ "$(q "select count(*) from runs")" = $((before + 1)) ] || { echo "FAIL: resuming an unrecorded run made $(( $(q "select count(*) from runs") - before )) records"; fail=1; }
[ "$(q "select status from runs where id = $rid")" = finished ] || { echo "FAIL: the resumed unrecorded run is not finished"; fail=1; }
[ "$(q "select count(distinct step) || ' ' || count(*) from metrics where run_id = $rid and key = 'loss'")" = "200 200" ] \
  || { echo "FAIL: the resumed unrecorded run has $(q "select count(*) from metrics where run_id = $rid and key = 'loss'") loss points, expected 200"; fail=1; }

# Resuming after a torn last line of metrics.jsonl (Ctrl-C, then the file's
# end cut off, as by a crash mid-write): the torn line is dropped, and the
# resume continues from a checkpoint at or before the last whole record (not
# the one at the torn step), so every step has its record once, in the run
# directory and in the store.
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 100 --threads 1 --checkpoint-every 10 --runs-dir "$TMP/torn" >/dev/null 2>&1 &
interrupt_after "$TMP/torn" 25 $!
torn=$(ls -d "$TMP"/torn/tiny_pretrain/*)
python3 -c "import sys; p=sys.argv[1]; b=open(p,'rb').read(); open(p,'wb').write(b[:-30])" "$torn/metrics.jsonl"
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 100 --threads 1 --resume="$torn" >/dev/null 2>"$TMP/resume.err" \
  || { echo "FAIL: resume after a torn line"; tail -3 "$TMP/resume.err"; fail=1; }
grep -q "last line was cut off" "$TMP/resume.err" || { echo "FAIL: the torn line is not reported"; tail -3 "$TMP/resume.err"; fail=1; }
python3 - "$torn/metrics.jsonl" <<'PY' || fail=1
import json, sys
steps = [json.loads(l)["global_step"] for l in open(sys.argv[1])]
if steps != list(range(1, 201)):
    missing = sorted(set(range(1, 201)) - set(steps)); twice = sorted({s for s in steps if steps.count(s) > 1})
    print(f"FAIL: after resuming a torn metrics.jsonl: steps missing {missing[:10]}, twice {twice[:10]}")
    sys.exit(1)
PY
tid=$(q "select max(id) from runs")
[ "$(q "select status || ' ' || count(m.step) || ' ' || count(distinct m.step) from runs r join metrics m on m.run_id = r.id and m.key = 'loss' where r.id = $tid group by r.id")" = "finished 200 200" ] \
  || { echo "FAIL: the store's record after resuming a torn metrics.jsonl: $(q "select count(distinct step) from metrics where run_id = $tid and key = 'loss'") distinct steps"; fail=1; }

# gc --grace 0 leaves a run whose process is alive on this host (its
# heartbeat is only a few seconds old at best): it is not marked killed.
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 600 --threads 1 --runs-dir "$TMP/live" >/dev/null 2>&1 &
live=$!
for _ in $(seq 1 1200); do
  f=$(ls "$TMP"/live/*/*/metrics.jsonl 2>/dev/null | head -1)
  [ -n "$f" ] && [ "$(wc -l <"$f")" -ge 5 ] && break
  sleep 0.1
done
lid=$(q "select max(id) from runs")
"$IPU" runs gc --grace 0 >"$TMP/out" || fail=1
grep -q "marked killed.* $lid\b" "$TMP/out" && { echo "FAIL: gc --grace 0 marked a live run killed"; cat "$TMP/out"; fail=1; }
[ "$(q "select status from runs where id = $lid")" = running ] || { echo "FAIL: a live run is not running after gc"; fail=1; }
kill -INT "$live"; wait "$live"

[ $fail -eq 0 ] && echo "store crash tests passed"
exit $fail
