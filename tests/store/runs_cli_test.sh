#!/usr/bin/env bash
# `ipu runs` and `ipu report` as a user runs them: exit codes (0 ok, 1 a
# problem, 2 a usage error), the caret under a bad filter, did-you-mean for an
# unknown name, sorting, columns, CSV and JSON, tags, notes, deletion, and a
# store from a newer ipu refused without being touched.
set -uo pipefail
IPU="$1"; WRITER="$2"; ROOT="$3"
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
has() {  # has FILE TEXT DESCRIPTION
  grep -qF -- "$2" "$1" || { echo "FAIL: $3: no '$2' in:"; head -20 "$1"; fail=1; }
}
export IPU_STORE="$TMP/ipu.db"

expect 1 "runs without a store" -- "$IPU" runs
has "$TMP/err" "there is no store at" "a missing store is said"
[ -e "$TMP/ipu.db" ] && { echo "FAIL: listing created a store"; fail=1; }
expect 2 "an unknown subcommand" -- "$IPU" runs lsit
has "$TMP/err" 'did you mean `list`' "a misspelt subcommand gets a suggestion"

"$WRITER" "$IPU_STORE" 6 50 10 w1 || fail=1
expect 0 "runs lists" -- "$IPU" runs
[ "$(sed -n 2p "$TMP/out" | awk '{print $1}')" = 6 ] || { echo "FAIL: newest run first"; cat "$TMP/out"; fail=1; }
[ "$(wc -l <"$TMP/out")" = 7 ] || { echo "FAIL: a header and 6 runs"; fail=1; }
has "$TMP/out" "mapping.replicas" "the parameters that differ are columns"

expect 2 "a malformed filter" -- "$IPU" runs --where "mapping.replicas IN (2, 4 AND index > 1"
has "$TMP/err" 'expected `,` or `)` in the IN list' "the filter error says what"
has "$TMP/err" "  mapping.replicas IN (2, 4 AND index > 1" "the filter is shown"
has "$TMP/err" "                            ^^^" "the caret is under the mistake"
expect 2 "an unknown name in a filter" -- "$IPU" runs --where "mapping.replica = 2"
has "$TMP/err" 'did you mean `mapping.replicas`' "an unknown name gets a suggestion"
has "$TMP/err" "parameters:" "an unknown name lists the names"
expect 2 "an unknown sort column" -- "$IPU" runs --sort lsos
has "$TMP/err" 'did you mean `loss`' "sort: suggestion"
expect 2 "an unknown column" -- "$IPU" runs --columns id,replicas
expect 2 "a bad limit" -- "$IPU" runs --limit none
expect 2 "json and csv" -- "$IPU" runs --json --csv

expect 0 "filter, sort, columns, csv" -- "$IPU" runs --where "mapping.replicas IN (2, 8) OR index = 0" --sort -index --columns id,index,mapping.replicas,loss.count --csv
printf 'id,index,mapping.replicas,loss.count\n6,5,2,50\n4,3,8,50\n2,1,2,50\n1,0,1,50\n' >"$TMP/want.csv"
cmp -s "$TMP/out" "$TMP/want.csv" || { echo "FAIL: the CSV"; diff "$TMP/out" "$TMP/want.csv"; fail=1; }
expect 0 "limit and json" -- "$IPU" runs --sort index --limit 2 --json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert [r['parameters']['index'] for r in d]==['0','1'], d; assert d[0]['metrics']['loss']['count']==50" "$TMP/out" \
  || { echo "FAIL: runs --json"; fail=1; }

expect 0 "tag" -- "$IPU" runs tag 3 baseline fp16
expect 0 "untag" -- "$IPU" runs untag 3 fp16
expect 0 "note" -- "$IPU" runs note writer-3 "a note with spaces"
expect 0 "show" -- "$IPU" runs show 3 --json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['tags']==['baseline','w1'] and d['note']=='a note with spaces', d" "$TMP/out" \
  || { echo "FAIL: tag, untag and note"; fail=1; }
expect 0 "tag filter" -- "$IPU" runs --where "tag = baseline" --columns id --csv
[ "$(tail -n +2 "$TMP/out")" = 3 ] || { echo "FAIL: tag = baseline"; cat "$TMP/out"; fail=1; }
expect 1 "show an unknown run" -- "$IPU" runs show writer-33
has "$TMP/err" 'did you mean `writer-3`' "an unknown run gets a suggestion"
expect 0 "compare" -- "$IPU" runs compare 1 2
has "$TMP/out" "parameters that differ" "compare shows the differences"
has "$TMP/out" "mapping.replicas" "compare shows replicas differ"
expect 2 "compare one run" -- "$IPU" runs compare 1
# Stored text with control characters (an escape sequence in a note, a BEL in
# a tag) reaches the terminal escaped, in the list and in show.
expect 0 "a note with an escape sequence" -- "$IPU" runs note 4 $'red \e[31mtext\a'
expect 0 "a tag with a bell" -- "$IPU" runs tag 4 $'ding\a'
expect 0 "show a run with control characters" -- "$IPU" runs show 4
grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$TMP/out" && { echo "FAIL: runs show printed a control character"; cat -v "$TMP/out"; fail=1; }
has "$TMP/out" 'red \x1b[31mtext\x07' "the note is shown escaped"
expect 0 "list runs with control characters" -- "$IPU" runs --columns id,tags
grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$TMP/out" && { echo "FAIL: runs printed a control character"; cat -v "$TMP/out"; fail=1; }

# A run whose process still records (recent heartbeat) is not deleted; once
# silent past the grace it is.
python3 -c "import sqlite3,sys,time; db=sqlite3.connect(sys.argv[1]); db.execute(\"update runs set status='running', heartbeat_at=? where id=5\", (time.time(),)); db.commit()" "$IPU_STORE"
expect 1 "delete a live run" -- "$IPU" runs delete 6 5
has "$TMP/err" "is running" "a live run is not deleted"
has "$TMP/err" "nothing was deleted" "nothing was deleted"
expect 0 "show the live run" -- "$IPU" runs show 5
expect 0 "show the other run" -- "$IPU" runs show 6
python3 -c "import sqlite3,sys,time; db=sqlite3.connect(sys.argv[1]); db.execute(\"update runs set heartbeat_at=? where id=5\", (time.time() - 3600,)); db.commit()" "$IPU_STORE"
expect 0 "delete a silent running run" -- "$IPU" runs delete 5
expect 0 "delete" -- "$IPU" runs delete 6
expect 1 "show a deleted run" -- "$IPU" runs show 6

expect 2 "report without -o" -- "$IPU" report
expect 1 "report of nothing" -- "$IPU" report --where "index > 100" -o "$TMP/r.html"
[ -e "$TMP/r.html" ] && { echo "FAIL: an empty report was written"; fail=1; }
expect 0 "report of two runs" -- "$IPU" report 1 writer-2 -o "$TMP/r.html"
(cd "$TMP" && "$IPU" report 1 writer-2 -o - >"$TMP/stdout.html" 2>"$TMP/err") || { echo "FAIL: report -o -"; fail=1; }
[ -e "$TMP/-" ] && { echo "FAIL: report -o - wrote a file named -"; fail=1; }
# The report says when it was made (to the second); the two may straddle one.
stamp='s/[0-9]\{4\}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]/TIME/'
cmp -s <(sed "$stamp" "$TMP/stdout.html") <(sed "$stamp" "$TMP/r.html") || { echo "FAIL: report -o - is not the report written to a file"; fail=1; }
has "$TMP/err" "2 runs, 2 curves" "report counts"

# A run directory with a pipe (FIFO) in place of one of its files: import
# says which and does not block on it (it reads regular files only).
for name in metrics.jsonl plan.json events.jsonl summary.json script.ipu; do
  mkdir -p "$TMP/fifo/$name/run"
  echo '{}' >"$TMP/fifo/$name/run/plan.json"; : >"$TMP/fifo/$name/run/metrics.jsonl"
  rm -f "$TMP/fifo/$name/run/$name"; mkfifo "$TMP/fifo/$name/run/$name"
  expect 1 "import of a run directory whose $name is a pipe" -- timeout 20 "$IPU" runs import "$TMP/fifo/$name"
  has "$TMP/err" "\`$name\` is a pipe (FIFO)" "import names the pipe ($name)"
done

# `ipu run --set/--name/--tag` and `ipu runs export` (docs/run.md, docs/tracking.md).
expect 0 "run with --set, --name and --tag" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 2 --threads 1 \
  --runs-dir "$TMP/runs" --set phase.short.lr=0.004 --set 'phase.long.steps = 20 steps' --name "lr four" --tag quick --tag lr
has "$TMP/out" "recorded as run" "the store's record is said on stdout"
expect 0 "the run by its given name" -- "$IPU" runs show "lr four" --json
python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
p = r["parameters"]
problems = []
if r["name"] != "lr four": problems.append(f"name {r['name']!r}")
if sorted(r["tags"]) != ["lr", "quick"]: problems.append(f"tags {r['tags']}")
if p.get("phases.short.lr.peak") != "0.004": problems.append(f"the run's lr peak is {p.get('phases.short.lr.peak')}, not the value set")
if p.get("phases.short.lr.warmup_steps") != "50": problems.append("the schedule's warmup was not kept")
if p.get("phases.long.steps") != "20": problems.append(f"phase long steps {p.get('phases.long.steps')}")
if p.get("set.phase.short.lr") != "0.004" or p.get("set.phase.long.steps") != "20 steps": problems.append("what was set is not recorded")
for x in problems: print("FAIL: --set/--name/--tag:", x)
sys.exit(1 if problems else 0)
PY
expect 1 "a value of the wrong unit" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --runs-dir "$TMP/runs" --set 'phase.short.lr=3 steps'
has "$TMP/err" "--set phase.short.lr:1:1: error[IPU1003]" "the value's own source is named, with line and column"
expect 1 "an unknown path" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --runs-dir "$TMP/runs" --set phase.shrt.lr=0.1
has "$TMP/err" 'did you mean `phase.short.lr`' "a misspelt path gets a suggestion"
expect 1 "a value that does not parse" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --runs-dir "$TMP/runs" --set 'phase.short.lr=(('
has "$TMP/err" "error[IPU0004]" "a syntax error in a value is the language's"
expect 2 "--set without =" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --set lr
expect 2 "a name that reads as an id" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --name 12
expect 2 "a tag with a comma" -- "$IPU" run "$ROOT/examples/tiny_bert.ipu" --tag a,b
expect 0 "estimate with --set" -- "$IPU" estimate "$ROOT/examples/tiny_bert.ipu" --set mapping.replicas=1
has "$TMP/out" "recorded as run" "an estimate's record is said on stdout"
runid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['id'])" <("$IPU" runs show "lr four" --json))
expect 0 "export as CSV" -- "$IPU" runs export "lr four" --keys loss
python3 - "$TMP/out" "$IPU_STORE" "$runid" <<'PY' || fail=1
import csv, sqlite3, sys
rows = list(csv.DictReader(open(sys.argv[1])))
db = sqlite3.connect(sys.argv[2])
want = db.execute("select step, value from metrics where run_id = ? and key = 'loss' order by step", (int(sys.argv[3]),)).fetchall()
got = [(int(r["step"]), float(r["value"])) for r in rows]
ok = got == [(s, v) for s, v in want] and len(got) == 4 and all(r["run_name"] == "lr four" and r["key"] == "loss" for r in rows)
if not ok: print("FAIL: export CSV is not the store's loss history, exactly:", got[:3], want[:3])
sys.exit(0 if ok else 1)
PY
expect 0 "export as JSON Lines to a file" -- "$IPU" runs export --where "name = 'lr four'" --jsonl -o "$TMP/export.jsonl"
python3 - "$TMP/export.jsonl" "$IPU_STORE" "$runid" <<'PY' || fail=1
import json, sqlite3, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
n = sqlite3.connect(sys.argv[2]).execute("select count(*) from metrics where run_id = ?", (int(sys.argv[3]),)).fetchone()[0]
ok = len(lines) == n and n > 4 and {l["run_id"] for l in lines} == {int(sys.argv[3])}
if not ok: print(f"FAIL: export JSON Lines has {len(lines)} points, the store {n}")
sys.exit(0 if ok else 1)
PY
expect 2 "--jsonl outside export" -- "$IPU" runs --jsonl

# A store written by a newer ipu: refused, not touched.
python3 -c "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); db.execute(\"update ipu_meta set value='7' where key='schema_version'\"); db.commit(); db.execute('pragma wal_checkpoint(TRUNCATE)')" "$IPU_STORE"
sum=$(md5sum <"$IPU_STORE")
expect 1 "runs on a newer store" -- "$IPU" runs
has "$TMP/err" "schema version 7, written by a newer ipu" "the newer store is named"
expect 1 "estimate into a newer store" -- "$IPU" estimate "$ROOT/examples/tiny_bert.ipu"
has "$TMP/err" "--no-store" "estimate says how to go on"
expect 0 "estimate with --no-store" -- "$IPU" estimate "$ROOT/examples/tiny_bert.ipu" --no-store
[ "$(md5sum <"$IPU_STORE")" = "$sum" ] || { echo "FAIL: the newer store was modified"; fail=1; }

[ $fail -eq 0 ] && echo "runs command tests passed"
exit $fail
