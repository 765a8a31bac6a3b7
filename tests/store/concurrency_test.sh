#!/usr/bin/env bash
# Many writers on one SQLite store (docs/tracking.md): nothing lost, never
# "database is locked".
#   A. 8 processes at once, each recording 25 runs of 400 points in batches of
#      20 (over 4,000 write transactions in all, contending for one file);
#   B. 8 `ipu estimate` and 3 `ipu run` at once into a store that does not
#      exist yet (so they also race to create its schema).
# Totals are counted with Python's own sqlite3 module, not with ipu.
set -uo pipefail
IPU="$1"; WRITER="$2"; ROOT="$3"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail=0

# A.
pids=()
for w in 1 2 3 4 5 6 7 8; do
  "$WRITER" "$TMP/a/ipu.db" 25 400 20 "w$w" 2>"$TMP/a-w$w.err" & pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "FAIL: writer $((i + 1)) failed: $(cat "$TMP/a-w$((i + 1)).err")"; fail=1; }
done
if grep -il "locked\|busy" "$TMP"/a-*.err; then echo "FAIL: a writer saw the database locked"; fail=1; fi
python3 - "$TMP/a/ipu.db" <<'PY' || fail=1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
runs = db.execute("select count(*) from runs").fetchone()[0]
finished = db.execute("select count(*) from runs where status = 'finished'").fetchone()[0]
points = db.execute("select count(*) from metrics").fetchone()[0]
per_writer = db.execute("select t.tag, count(*) from tags t group by t.tag order by t.tag").fetchall()
summaries = db.execute("select count(*) from metric_summaries where count = 400 and latest_step = 400").fetchone()[0]
mode = db.execute("pragma journal_mode").fetchone()[0]
ok = db.execute("pragma integrity_check").fetchone()[0]
problems = []
if runs != 200: problems.append(f"{runs} runs, expected 200")
if finished != 200: problems.append(f"{finished} finished, expected 200")
if points != 200 * 400: problems.append(f"{points} points, expected 80000")
if per_writer != [(f"w{i}", 25) for i in range(1, 9)]: problems.append(f"runs per writer: {per_writer}")
if summaries != 200: problems.append(f"{summaries} complete summaries, expected 200")
if mode != "wal": problems.append(f"journal mode {mode}, expected wal")
if ok != "ok": problems.append(f"integrity: {ok}")
for p in problems: print("FAIL: 8 writers:", p)
sys.exit(1 if problems else 0)
PY
# ipu reads what they wrote: 25 runs with tag w3.
n=$("$IPU" runs --store "$TMP/a/ipu.db" --where "tag = w3 AND status = finished" --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")
[ "$n" = 25 ] || { echo "FAIL: ipu runs --where found $n runs of writer w3, expected 25"; fail=1; }

# B.
export IPU_STORE="$TMP/b/ipu.db"
pids=()
for i in 1 2 3 4 5 6 7 8; do
  "$IPU" estimate "$ROOT/examples/tiny_bert.ipu" >/dev/null 2>"$TMP/b-e$i.err" & pids+=($!)
done
for i in 1 2 3; do
  "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 15 --threads 1 --runs-dir "$TMP/b/runs$i" >/dev/null 2>"$TMP/b-r$i.err" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: a process of B failed"; fail=1; }; done
if grep -il "locked\|busy\|error" "$TMP"/b-*.err; then echo "FAIL: B: an error:"; cat "$TMP"/b-*.err | grep -i "locked\|busy\|error" | head; fail=1; fi
python3 - "$TMP/b/ipu.db" "$TMP"/b/runs*/tiny_pretrain/*/metrics.jsonl <<'PY' || fail=1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
problems = []
kinds = dict(db.execute("select kind, count(*) from runs where status = 'finished' group by kind").fetchall())
if kinds != {"estimate": 8, "run": 3}: problems.append(f"finished runs by kind: {kinds}, expected 8 estimates and 3 runs")
steps = sorted(sum(1 for _ in open(f)) for f in sys.argv[2:])
recorded = sorted(r[0] for r in db.execute(
    "select s.count from metric_summaries s join runs r on r.id = s.run_id where r.kind = 'run' and s.key = 'loss'"))
if len(steps) != 3 or steps != recorded: problems.append(f"loss points in the store {recorded}, lines of metrics.jsonl {steps}")
versions = db.execute("select value from ipu_meta where key = 'schema_version'").fetchall()
if versions != [("4",)]: problems.append(f"schema version rows {versions}")
for p in problems: print("FAIL: estimates and runs at once:", p)
sys.exit(1 if problems else 0)
PY
[ $fail -eq 0 ] && echo "store concurrency tests passed"
exit $fail
