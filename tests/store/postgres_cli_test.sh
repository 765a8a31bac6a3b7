#!/usr/bin/env bash
# `--store postgresql://...` end to end: a real PostgreSQL server started here
# (initdb in a temporary directory, a Unix socket there and no TCP port, as
# `nobody` under root; stopped at the end), then `ipu estimate`, `ipu run`,
# `ipu runs`, `ipu runs compare` and `ipu report` against it, the same as on
# SQLite. The store suite (store.postgres) covers the backend itself. With
# FIXTURE (ipu_sweep_report_fixture), `ipu report --sweep` too: the same
# sweep written to PostgreSQL and to SQLite gives the same report.
#
#   postgres_cli_test.sh IPU ROOT [FIXTURE]
set -uo pipefail
IPU="$1"; ROOT="$2"; FIXTURE="${3:-}"
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$BIN/initdb" ] || { echo "FAIL: no PostgreSQL server (Debian package postgresql; ./dev installs it)"; exit 1; }
TMP="$(mktemp -d /tmp/ipu-pgcli-XXXXXX)"
AS=()
if [ "$(id -u)" -eq 0 ]; then chown nobody "$TMP"; AS=(runuser -u nobody --); fi
stop() {
  "${AS[@]}" "$BIN/pg_ctl" -D "$TMP/data" -m fast -w stop >/dev/null 2>&1
  rm -rf "$TMP"
}
trap stop EXIT
fail=0
"${AS[@]}" "$BIN/initdb" -D "$TMP/data" -U ipu --auth=trust -E UTF8 --no-sync >"$TMP/initdb.log" 2>&1 \
  || { echo "FAIL: initdb"; cat "$TMP/initdb.log"; exit 1; }
"${AS[@]}" "$BIN/pg_ctl" -D "$TMP/data" -l "$TMP/server.log" -w -t 60 \
  -o "-k $TMP -c listen_addresses='' -c fsync=off" start >/dev/null 2>&1 || { echo "FAIL: server start"; cat "$TMP/server.log"; exit 1; }
URI="postgresql://ipu@/postgres?host=$TMP"
WORK="$(mktemp -d)"
trap 'stop; rm -rf "$WORK"' EXIT

"$IPU" estimate "$ROOT/examples/tiny_bert.ipu" --store "$URI" >"$WORK/out" 2>"$WORK/err" || { echo "FAIL: estimate"; cat "$WORK/err"; fail=1; }
grep -q "recorded as run 1 in postgresql://" "$WORK/out" || { echo "FAIL: estimate did not record"; cat "$WORK/err"; fail=1; }
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 6 --threads 1 --runs-dir "$WORK/runs" --store "$URI" >/dev/null 2>"$WORK/err" \
  || { echo "FAIL: run"; cat "$WORK/err"; fail=1; }
[ -e "$WORK/runs/ipu.db" ] && { echo "FAIL: --store postgresql wrote an SQLite store too"; fail=1; }
IPU_STORE="$URI" "$IPU" runs --json >"$WORK/runs.json" || fail=1
python3 - "$WORK/runs.json" <<'PY' || fail=1
import json, sys
runs = json.load(open(sys.argv[1]))
problems = []
if [(r["id"], r["kind"], r["status"]) for r in runs] != [(2, "run", "finished"), (1, "estimate", "finished")]:
    problems.append(f"runs: {[(r['id'], r['kind'], r['status']) for r in runs]}")
elif runs[0]["metrics"]["loss"]["count"] != 12 or runs[0]["plan_hash"] != runs[1]["plan_hash"]:
    problems.append("the run's 12 loss points and the shared plan hash")
for p in problems: print("FAIL: PostgreSQL store:", p)
sys.exit(1 if problems else 0)
PY
# On PostgreSQL the checkpoints' bytes are kept in the store by default
# (--artifacts store, docs/tracking.md "Artifacts"): each as a large object
# that reads back as its file, and a run directory without its checkpoints
# resumes from them.
"$IPU" runs show 2 --json --store "$URI" >"$WORK/run.json" || fail=1
python3 - "$WORK/run.json" <<'PY' || fail=1
import hashlib, json, os, sys
r = json.load(open(sys.argv[1]))
cps = [a for a in r["artifacts"] if a["kind"] == "checkpoint"]
problems = []
if len(cps) != 2: problems.append(f"{len(cps)} checkpoints recorded, expected 2 (a final one per phase)")
for a in cps:
    data = open(os.path.join(a["run_directory"], a["path"]), "rb").read()
    if not a["stored"]: problems.append(f"{a['path']} is not kept in the store")
    if a["sha256"] != hashlib.sha256(data).hexdigest(): problems.append(f"{a['path']}: SHA-256")
for p in problems: print("FAIL: PostgreSQL artifacts:", p)
sys.exit(1 if problems else 0)
PY
"$IPU" runs gc --keep-checkpoints last --dry-run --store "$URI" >"$WORK/out" || fail=1
grep -q "would remove 0 checkpoints" "$WORK/out" || { echo "FAIL: gc on PostgreSQL would prune a phase's final checkpoint"; cat "$WORK/out"; fail=1; }
"$IPU" runs compare 1 2 --store "$URI" >"$WORK/out" || fail=1
grep -q "predicted (estimate 1) against measured (run 2)" "$WORK/out" || { echo "FAIL: compare on PostgreSQL"; cat "$WORK/out"; fail=1; }
"$IPU" runs --store "$URI" --where "kind = run AND loss.count = 12" --columns id --csv >"$WORK/out" || fail=1
[ "$(tail -n +2 "$WORK/out")" = 2 ] || { echo "FAIL: a filter on PostgreSQL"; cat "$WORK/out"; fail=1; }
"$IPU" report --store "$URI" -o "$WORK/r.html" 2>"$WORK/err" || { echo "FAIL: report"; cat "$WORK/err"; fail=1; }
grep -q "2 runs" "$WORK/err" || { echo "FAIL: report of 2 runs"; cat "$WORK/err"; fail=1; }
"$IPU" runs --store "postgresql://ipu@/no_such_db?host=$TMP" >/dev/null 2>"$WORK/err"
[ $? -eq 1 ] && grep -q "cannot connect" "$WORK/err" || { echo "FAIL: a missing database is a clear error"; cat "$WORK/err"; fail=1; }

if [ -n "$FIXTURE" ]; then
  "$FIXTURE" "$URI" "lr <i>sweep</i>" 2>"$WORK/err" || { echo "FAIL: the sweep fixture on PostgreSQL"; cat "$WORK/err"; fail=1; }
  "$FIXTURE" "$WORK/sweeps.db" "lr <i>sweep</i>" 2>"$WORK/err" || { echo "FAIL: the sweep fixture on SQLite"; cat "$WORK/err"; fail=1; }
  "$IPU" report --sweep "lr <i>sweep</i>" --store "$URI" --json >"$WORK/pg.json" 2>"$WORK/err" || { echo "FAIL: report --sweep on PostgreSQL"; cat "$WORK/err"; fail=1; }
  "$IPU" report --sweep "lr <i>sweep</i>" --store "$WORK/sweeps.db" --json >"$WORK/sqlite.json" || fail=1
  "$IPU" report --sweep "lr <i>sweep</i>" --store "$URI" -o "$WORK/sweep.html" 2>"$WORK/err" || { echo "FAIL: report --sweep HTML on PostgreSQL"; cat "$WORK/err"; fail=1; }
  python3 - "$WORK/pg.json" "$WORK/sqlite.json" <<'PY' || fail=1
import json, sys
pg, lite = (json.load(open(p)) for p in sys.argv[1:3])
for d in (pg, lite):
    d["sweep"].pop("store")
    for t in d["trials"]: t.pop("run_id")  # the PostgreSQL store has two runs already
ok = pg == lite and len(pg["trials"]) == 24 and pg["importance"]["model_fitted"]
if not ok: print("FAIL: report --sweep differs between PostgreSQL and SQLite")
sys.exit(0 if ok else 1)
PY
  "$IPU" report --sweep "lr <i>swep</i>" --store "$URI" --json >/dev/null 2>"$WORK/err"
  [ $? -eq 1 ] && grep -q 'did you mean `lr <i>sweep</i>`' "$WORK/err" || { echo "FAIL: an unknown sweep on PostgreSQL"; cat "$WORK/err"; fail=1; }
fi

[ $fail -eq 0 ] && echo "PostgreSQL command tests passed"
exit $fail
