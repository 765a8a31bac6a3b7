#!/usr/bin/env bash
# `ipu ui --store postgresql://...`: the dashboard on a real PostgreSQL server
# started here (initdb in a temporary directory, a Unix socket there and no TCP
# port, as `nobody` under root; stopped at the end), as on SQLite: the runs as
# `ipu runs --json` lists them, a comparison with its estimate, a sweep; a run
# read while `ipu run` records it (its points grow between two requests); the
# server stopped under it (503 with the store's message) and started again
# (200, with no restart of `ipu ui`); Ctrl-C (130).
#
#   postgres_test.sh IPU ROOT FIXTURE
set -uo pipefail
IPU="$1"; ROOT="$2"; FIXTURE="$3"
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$BIN/initdb" ] || { echo "FAIL: no PostgreSQL server (Debian package postgresql; ./dev installs it)"; exit 1; }
TMP="$(mktemp -d /tmp/ipu-ui-pg-XXXXXX)"
WORK="$(mktemp -d)"
AS=()
if [ "$(id -u)" -eq 0 ]; then chown nobody "$TMP"; AS=(runuser -u nobody --); fi
UI_PID=""; RUN_PID=""
stop() {
  [ -n "$RUN_PID" ] && kill "$RUN_PID" 2>/dev/null
  [ -n "$UI_PID" ] && kill "$UI_PID" 2>/dev/null
  "${AS[@]}" "$BIN/pg_ctl" -D "$TMP/data" -m fast -w stop >/dev/null 2>&1
  rm -rf "$TMP" "$WORK"
}
trap stop EXIT
fail=0
pg() {  # pg start|stop
  if [ "$1" = start ]; then
    "${AS[@]}" "$BIN/pg_ctl" -D "$TMP/data" -l "$TMP/server.log" -w -t 60 \
      -o "-k $TMP -c listen_addresses='' -c fsync=off" start >/dev/null 2>&1 || { echo "FAIL: server start"; cat "$TMP/server.log"; exit 1; }
  else
    "${AS[@]}" "$BIN/pg_ctl" -D "$TMP/data" -m fast -w stop >/dev/null 2>&1 || { echo "FAIL: server stop"; exit 1; }
  fi
}
"${AS[@]}" "$BIN/initdb" -D "$TMP/data" -U ipu --auth=trust -E UTF8 --no-sync >"$TMP/initdb.log" 2>&1 \
  || { echo "FAIL: initdb"; cat "$TMP/initdb.log"; exit 1; }
pg start
URI="postgresql://ipu@/postgres?host=$TMP"

"$IPU" estimate "$ROOT/examples/tiny_bert.ipu" --store "$URI" >/dev/null 2>"$WORK/err" || { echo "FAIL: estimate"; cat "$WORK/err"; fail=1; }
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 6 --threads 1 --runs-dir "$WORK/runs" --store "$URI" >/dev/null 2>"$WORK/err" \
  || { echo "FAIL: run"; cat "$WORK/err"; fail=1; }
"$FIXTURE" "$URI" lr_sweep 2>"$WORK/err" || { echo "FAIL: the sweep fixture"; cat "$WORK/err"; fail=1; }
IPU_STORE="$URI" "$IPU" runs --json >"$WORK/cli.json" || fail=1

"$IPU" ui --store "$URI" --port 0 >"$WORK/url" 2>"$WORK/ui.err" &
UI_PID=$!
for _ in $(seq 100); do [ -s "$WORK/url" ] && break; sleep 0.1; done
URL=$(head -1 "$WORK/url")
[[ "$URL" =~ ^http://127\.0\.0\.1:[0-9]+/$ ]] || { echo "FAIL: ipu ui printed no URL"; cat "$WORK/url" "$WORK/ui.err"; exit 1; }
get() {  # get PATH FILE: prints the status
  curl -s -o "$2" -w '%{http_code}' "${URL%/}$1"
}

[ "$(get /api/runs "$WORK/runs.json")" = 200 ] || { echo "FAIL: /api/runs"; cat "$WORK/runs.json"; fail=1; }
python3 - "$WORK/runs.json" "$WORK/cli.json" <<'PY' || fail=1
import json, sys
ui, cli = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
if [r["id"] for r in ui["runs"]] != [r["id"] for r in cli] or ui["total"] != len(cli):
    print("FAIL: the dashboard lists what ipu runs --json lists", [r["id"] for r in ui["runs"]], [r["id"] for r in cli])
    sys.exit(1)
PY
[ "$(get '/api/compare?ids=1,2' "$WORK/compare.json")" = 200 ] || { echo "FAIL: /api/compare"; fail=1; }
python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['predicted_vs_measured']; sys.exit(0 if [(x['run'], x['estimate']) for x in p] == [(2, 1)] else 1)" \
  "$WORK/compare.json" || { echo "FAIL: the run against its estimate on PostgreSQL"; cat "$WORK/compare.json"; fail=1; }
[ "$(get /api/sweeps/lr_sweep "$WORK/sweep.json")" = 200 ] && grep -q '"name":"lr_sweep"' "$WORK/sweep.json" \
  || { echo "FAIL: a sweep on PostgreSQL"; head -c 300 "$WORK/sweep.json"; fail=1; }
[ "$(get /runs/2 "$WORK/page.html")" = 200 ] || { echo "FAIL: a run's page"; fail=1; }

# A run read while it is recorded.
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 400 --threads 1 --runs-dir "$WORK/runs" --store "$URI" >/dev/null 2>&1 &
RUN_PID=$!
count() {  # the loss points of the live run so far ("" if none yet)
  get "/api/runs?where=status%20%3D%20running&columns=loss.count" "$WORK/live.json" >/dev/null
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs']; print(r[0]['cells'][0] if r and r[0]['cells'][0] else '')" "$WORK/live.json"
}
first=""
for _ in $(seq 200); do first=$(count); [ -n "$first" ] && break; sleep 0.1; done
grew=0
for _ in $(seq 100); do
  sleep 0.2
  now=$(count)
  [ -n "$now" ] && [ "$now" -gt "$first" ] && { grew=1; break; }
done
[ "$grew" = 1 ] || { echo "FAIL: the points of a run being recorded grow between requests ($first, then ${now:-none})"; fail=1; }
kill -INT "$RUN_PID"; wait "$RUN_PID" 2>/dev/null; RUN_PID=""

# The database server stopped under the dashboard, then started again.
pg stop
code=$(get /api/runs "$WORK/down.json")
[ "$code" = 503 ] && grep -q "the store cannot be read" "$WORK/down.json" \
  || { echo "FAIL: the server down: 503 with the store's message (got $code)"; cat "$WORK/down.json"; fail=1; }
pg start
code=$(get /api/runs "$WORK/up.json")
[ "$code" = 200 ] || { echo "FAIL: the server back: 200 (got $code)"; cat "$WORK/up.json"; fail=1; }

kill -INT "$UI_PID"; wait "$UI_PID"; status=$?; UI_PID=""
[ "$status" = 130 ] || { echo "FAIL: Ctrl-C ends ipu ui with 130 (got $status)"; fail=1; }
[ "$fail" = 0 ] && echo ok
exit "$fail"
