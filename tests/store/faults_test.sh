#!/usr/bin/env bash
# The run store under faults (docs/tracking.md, "What a fault costs"):
#   a store that opens but cannot be written: `ipu run` refuses to start
#     (exit 1, naming the store and what to do), nothing is trained;
#   a PostgreSQL server that accepts and never answers, or answers the
#     handshake and then never a statement: commands give up within the
#     connect and statement timeouts (exit 1, saying so), never hang;
#   a statement kept waiting by a lock: the server's statement timeout ends it;
#   a PostgreSQL restart mid-run, and an SQLite write lock held past the busy
#     timeout mid-run: the record ends complete (every step once, finished),
#     and a new run on the locked store is refused;
#   `ipu runs import` of a run directory whose record the store holds in
#     part: the record is completed from the directory.
#
#   faults_test.sh IPU ROOT
set -uo pipefail
IPU="$(realpath "$1")"; ROOT="$(realpath "$2")"
TMP="$(mktemp -d /tmp/ipu-faults-XXXXXX)"
chmod 755 "$TMP"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "${BIN:-}" ] && [ -d "$TMP/pg/data" ] && "${AS[@]}" "$BIN/pg_ctl" -D "$TMP/pg/data" -m immediate -w stop >/dev/null 2>&1
  rm -rf "$TMP"
}
trap cleanup EXIT
fail=0
lines() { wc -l <"$1" | tr -d ' '; }
sq() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])" "$1" "$2"; }

# ---------------------------------------------------------------- a store that cannot be written
# A store file this user may read and not write. Root writes any file whatever
# its mode, so under root `ipu run` runs as nobody (setpriv).
mkdir -p "$TMP/ro/runs"
"$IPU" estimate "$ROOT/examples/tiny_bert.ipu" --store "$TMP/ro/ipu.db" >/dev/null 2>&1 || { echo "FAIL: making the store"; fail=1; }
chmod 0444 "$TMP/ro/ipu.db"
chmod 0777 "$TMP/ro" "$TMP/ro/runs"
AS_USER=()
if [ "$(id -u)" -eq 0 ]; then AS_USER=(setpriv --reuid=nobody --regid=nogroup --clear-groups); fi
if "${AS_USER[@]}" test -r "$ROOT/examples/tiny_bert.ipu" && "${AS_USER[@]}" test -x "$IPU"; then
  "${AS_USER[@]}" "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 3 --threads 1 --runs-dir "$TMP/ro/runs" \
    --store "$TMP/ro/ipu.db" >"$TMP/ro.out" 2>"$TMP/ro.err"
  code=$?
  [ "$code" -eq 1 ] || { echo "FAIL: ipu run on a read-only store: exit $code, expected 1"; cat "$TMP/ro.err"; fail=1; }
  grep -q "the run store \`$TMP/ro/ipu.db\` cannot be written" "$TMP/ro.err" && grep -q -- "--no-store" "$TMP/ro.err" \
    || { echo "FAIL: the refusal does not name the store and what to do"; cat "$TMP/ro.err"; fail=1; }
  [ -z "$(ls "$TMP/ro/runs")" ] || { echo "FAIL: a run was started on a store that cannot be written"; ls -R "$TMP/ro/runs"; fail=1; }
  [ "$(sq "$TMP/ro/ipu.db" "select count(*) from runs")" = 1 ] || { echo "FAIL: the read-only store changed"; fail=1; }
else
  echo "note: skipped the read-only store case: nobody cannot read $ROOT or run $IPU"
fi

# ---------------------------------------------------------------- servers that do not answer
# Two fake servers on loopback: one accepts and never says a word; one
# answers the handshake (no SSL, authentication ok, ready) and then never
# answers a statement.
cat >"$TMP/fake_pg.py" <<'PY'
import socket, struct, sys, threading, time
mode = sys.argv[1]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
def serve(c):
    if mode == "handshake":
        while True:
            head = c.recv(8, socket.MSG_WAITALL)
            if len(head) < 8: return
            n, code = struct.unpack("!ii", head)
            rest = c.recv(n - 8, socket.MSG_WAITALL) if n > 8 else b""
            if code in (80877103, 80877104):   # SSL or GSS encryption request: no
                c.sendall(b"N"); continue
            break
        c.sendall(b"R" + struct.pack("!ii", 8, 0))                       # authentication ok
        for k, v in ((b"server_version", b"15.0"), (b"client_encoding", b"UTF8"), (b"standard_conforming_strings", b"on")):
            body = k + b"\0" + v + b"\0"
            c.sendall(b"S" + struct.pack("!i", 4 + len(body)) + body)
        c.sendall(b"K" + struct.pack("!iii", 12, 1, 2))                  # backend key
        c.sendall(b"Z" + struct.pack("!i", 5) + b"I")                    # ready for query
    time.sleep(600)                                                      # and never a word more
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
for mode in silent handshake; do
  python3 "$TMP/fake_pg.py" "$mode" >"$TMP/fake.$mode" &
  PIDS+=($!)
done
for _ in $(seq 1 50); do [ -s "$TMP/fake.silent" ] && [ -s "$TMP/fake.handshake" ] && break; sleep 0.1; done
silent=$(head -1 "$TMP/fake.silent"); handshake=$(head -1 "$TMP/fake.handshake")
# Accepts, never answers: the connect timeout (2 s here, 10 s by default).
start=$(date +%s)
timeout 60 "$IPU" runs --store "postgresql://ipu@127.0.0.1:$silent/db?connect_timeout=2&sslmode=disable" >/dev/null 2>"$TMP/err"
code=$?; took=$(( $(date +%s) - start ))
[ "$code" -eq 1 ] && [ "$took" -le 10 ] && grep -q "cannot connect" "$TMP/err" \
  || { echo "FAIL: a server that never answers: exit $code after ${took}s"; cat "$TMP/err"; fail=1; }
# Answers the handshake, then never a statement: the statement timeout (1 s
# here, from the URI's options; 60 s by default) and 5 s more.
start=$(date +%s)
timeout 60 "$IPU" runs --store "postgresql://ipu@127.0.0.1:$handshake/db?sslmode=disable&options=-c%20statement_timeout%3D1s" \
  >/dev/null 2>"$TMP/err"
code=$?; took=$(( $(date +%s) - start ))
[ "$code" -eq 1 ] && [ "$took" -le 15 ] && grep -q "did not answer within 6 s" "$TMP/err" \
  || { echo "FAIL: a server that stops answering after the handshake: exit $code after ${took}s"; cat "$TMP/err"; fail=1; }
start=$(date +%s)
timeout 60 "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 3 --threads 1 --runs-dir "$TMP/hs" \
  --store "postgresql://ipu@127.0.0.1:$handshake/db?sslmode=disable&options=-c%20statement_timeout%3D1s" >/dev/null 2>"$TMP/err"
code=$?; took=$(( $(date +%s) - start ))
[ "$code" -eq 1 ] && [ "$took" -le 15 ] && grep -q "did not answer" "$TMP/err" \
  || { echo "FAIL: ipu run on a server that stops answering: exit $code after ${took}s"; cat "$TMP/err"; fail=1; }

# ---------------------------------------------------------------- a real PostgreSQL server
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ ! -x "$BIN/initdb" ] || ! command -v psql >/dev/null; then
  echo "FAIL: no PostgreSQL server or psql (Debian packages postgresql, postgresql-client; ./dev installs them)"
  exit 1
fi
mkdir -p "$TMP/pg"
AS=()
if [ "$(id -u)" -eq 0 ]; then chown nobody "$TMP/pg"; AS=(runuser -u nobody --); fi
"${AS[@]}" "$BIN/initdb" -D "$TMP/pg/data" -U ipu --auth=trust -E UTF8 --no-sync >"$TMP/initdb.log" 2>&1 \
  || { echo "FAIL: initdb"; cat "$TMP/initdb.log"; exit 1; }
pg_start() {
  "${AS[@]}" "$BIN/pg_ctl" -D "$TMP/pg/data" -l "$TMP/pg/server.log" -w -t 60 \
    -o "-k $TMP/pg -c listen_addresses='' -c fsync=off" start >/dev/null 2>&1
}
pg_start || { echo "FAIL: server start"; cat "$TMP/pg/server.log"; exit 1; }
URI="postgresql://ipu@/postgres?host=$TMP/pg"
pq() { psql -X -q -t -A -h "$TMP/pg" -U ipu -d postgres -c "$1" 2>/dev/null; }
"$IPU" estimate "$ROOT/examples/tiny_bert.ipu" --store "$URI" >/dev/null 2>&1 || { echo "FAIL: estimate on PostgreSQL"; fail=1; }

# A statement kept waiting by another session's lock: ended by the server's
# statement timeout (60 s by default; 1 s from the URI's options), said, exit 1.
psql -X -q -h "$TMP/pg" -U ipu -d postgres -c "BEGIN; LOCK TABLE runs IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(100);" >/dev/null 2>&1 &
locker=$!; PIDS+=($locker)
for _ in $(seq 1 100); do
  [ "$(pq "select count(*) from pg_locks where relation = 'runs'::regclass and mode = 'AccessExclusiveLock' and granted")" = 1 ] && break
  sleep 0.1
done
start=$(date +%s)
timeout 60 "$IPU" runs --store "$URI&options=-c%20statement_timeout%3D1s" >/dev/null 2>"$TMP/err"
code=$?; took=$(( $(date +%s) - start ))
[ "$code" -eq 1 ] && [ "$took" -le 10 ] && grep -q "statement timeout" "$TMP/err" \
  || { echo "FAIL: a statement kept waiting by a lock, statement_timeout=1s: exit $code after ${took}s"; cat "$TMP/err"; fail=1; }
start=$(date +%s)
timeout 90 "$IPU" runs export --store "$URI" >/dev/null 2>"$TMP/err"
code=$?; took=$(( $(date +%s) - start ))
[ "$code" -eq 1 ] && [ "$took" -ge 59 ] && [ "$took" -le 75 ] && grep -q "statement timeout" "$TMP/err" \
  || { echo "FAIL: a statement kept waiting by a lock, the default timeout: exit $code after ${took}s (expected 1 after 60 s)"; cat "$TMP/err"; fail=1; }
kill "$locker" 2>/dev/null; wait "$locker" 2>/dev/null
pq "select pg_terminate_backend(pid) from pg_stat_activity where query like '%pg_sleep(100)%' and pid <> pg_backend_pid()" >/dev/null

# A restart of the server mid-run: the record ends complete.
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 150 --threads 1 --runs-dir "$TMP/pgruns" --store "$URI" >"$TMP/pgrun.out" 2>"$TMP/pgrun.err" &
run=$!; PIDS+=($run)
for _ in $(seq 1 1200); do
  n=$(pq "select coalesce(max(count), 0) from metric_summaries where key = 'loss'")
  [ "${n:-0}" -ge 20 ] && break
  sleep 0.1
done
"${AS[@]}" "$BIN/pg_ctl" -D "$TMP/pg/data" -m fast -w stop >/dev/null 2>&1 || { echo "FAIL: server stop"; fail=1; }
sleep 3
pg_start || { echo "FAIL: server restart"; cat "$TMP/pg/server.log"; fail=1; }
wait "$run"; code=$?
dir=$(ls -d "$TMP"/pgruns/tiny_pretrain/*)
[ "$code" -eq 0 ] || { echo "FAIL: the run across a server restart: exit $code"; tail -5 "$TMP/pgrun.err"; fail=1; }
rid=$(pq "select max(id) from runs where kind = 'run'")
got=$(pq "select status || ' ' || count(m.step) || ' ' || count(distinct m.step) from runs r join metrics m on m.run_id = r.id and m.key = 'loss' where r.id = $rid group by r.status")
# 250 steps: 150 of the first phase, 100 (all) of the second.
[ "$got" = "finished $(lines "$dir/metrics.jsonl") $(lines "$dir/metrics.jsonl")" ] && [ "$(lines "$dir/metrics.jsonl")" = 250 ] \
  || { echo "FAIL: after a server restart mid-run the record is '$got' (status, loss points, distinct steps), expected 'finished 250 250'"; tail -3 "$TMP/pgrun.err"; fail=1; }
[ "$(pq "select count from metric_summaries where run_id = $rid and key = 'loss'")" = 250 ] \
  || { echo "FAIL: after a server restart the loss summary counts $(pq "select count from metric_summaries where run_id = $rid and key = 'loss'")"; fail=1; }

# ---------------------------------------------------------------- SQLite: a write lock held past the busy timeout
DB="$TMP/locked.db"
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 60 --threads 1 --runs-dir "$TMP/lockruns" --store "$DB" >/dev/null 2>"$TMP/lockrun.err" &
run=$!; PIDS+=($run)
for _ in $(seq 1 1200); do
  n=$(sq "$DB" "select coalesce(max(count), 0) from metric_summaries where key = 'loss'" 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 5 ] && break
  sleep 0.1
done
# 45 s: past the 30 s busy timeout.
python3 -c "
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute('BEGIN IMMEDIATE'); time.sleep(45); db.execute('ROLLBACK')" "$DB" &
holder=$!; PIDS+=($holder)
# Meanwhile a new run on the store locked past the busy timeout is refused
# before it trains (exit 1, after the 30 s the busy timeout waits).
for _ in $(seq 1 50); do
  python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1], timeout=0).execute('BEGIN IMMEDIATE')" "$DB" 2>/dev/null || break
  sleep 0.1
done
start=$(date +%s)
timeout 60 "$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 3 --threads 1 --runs-dir "$TMP/refused" --store "$DB" >/dev/null 2>"$TMP/err"
code=$?; took=$(( $(date +%s) - start ))
[ "$code" -eq 1 ] && grep -q "the run store \`$DB\` cannot be written" "$TMP/err" && grep -q "locked" "$TMP/err" && [ ! -e "$TMP/refused" ] \
  || { echo "FAIL: ipu run on a store locked past the busy timeout: exit $code after ${took}s"; cat "$TMP/err"; fail=1; }
wait "$run"; code=$?
wait "$holder"
dir=$(ls -d "$TMP"/lockruns/tiny_pretrain/*)
[ "$code" -eq 0 ] || { echo "FAIL: the run under a held lock: exit $code"; tail -5 "$TMP/lockrun.err"; fail=1; }
got=$(sq "$DB" "select r.status || ' ' || count(m.step) || ' ' || count(distinct m.step) from runs r join metrics m on m.run_id = r.id and m.key = 'loss' group by r.id")
[ "$got" = "finished 120 120" ] && [ "$(lines "$dir/metrics.jsonl")" = 120 ] \
  || { echo "FAIL: after a lock held past the busy timeout the record is '$got', expected 'finished 120 120'"; tail -3 "$TMP/lockrun.err"; fail=1; }

# ---------------------------------------------------------------- import completes a partial record
# The record of a finished run cut back to what a process that lost its
# store would have left: running, its process gone, 20 of its loss points.
"$IPU" run "$ROOT/examples/tiny_bert.ipu" --steps 30 --threads 1 --runs-dir "$TMP/partial" --store "$TMP/partial.db" >/dev/null 2>&1 \
  || { echo "FAIL: run for the partial record"; fail=1; }
pdir=$(ls -d "$TMP"/partial/tiny_pretrain/*)
python3 - "$TMP/partial.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("delete from metrics where step > 20")
db.execute("update metric_summaries set count = 20 where key in ('loss', 'lr', 'loss_scale', 'skipped')")
db.execute("delete from metric_summaries where key like 'eval.%'")
db.execute("update runs set status = 'running', ended_at = NULL, pid = 0, heartbeat_at = heartbeat_at - 100")
db.commit()
PY
"$IPU" runs import "$pdir" --store "$TMP/partial.db" >"$TMP/out" 2>"$TMP/err" || { echo "FAIL: import of a partial record"; cat "$TMP/err"; fail=1; }
grep -q "^completed $pdir: run 1 had" "$TMP/out" || { echo "FAIL: import does not complete a partial record"; cat "$TMP/out"; fail=1; }
[ "$(sq "$TMP/partial.db" "select status || ' ' || (select count(*) from metrics where key = 'loss') || ' ' || (select count from metric_summaries where key = 'loss') || ' ' || (select count(*) from metrics where key like 'eval.%') from runs")" \
  = "finished 60 60 $(sq "$TMP/partial.db" "select count(*) from metrics where key like 'eval.%'")" ] \
  || { echo "FAIL: the completed record: $(sq "$TMP/partial.db" "select status from runs"), $(sq "$TMP/partial.db" "select count(*) from metrics where key = 'loss'") loss points"; fail=1; }
[ "$(sq "$TMP/partial.db" "select count(*) from metrics where key like 'eval.%'")" -ge 2 ] || { echo "FAIL: the evaluations were not completed"; fail=1; }
"$IPU" runs import "$pdir" --store "$TMP/partial.db" >"$TMP/out" 2>&1 || fail=1
grep -q "^already in the store: $pdir" "$TMP/out" || { echo "FAIL: a second import of the completed record is not skipped"; cat "$TMP/out"; fail=1; }
# A run still recording (its process alive on this host) is left alone.
python3 -c "import sqlite3,sys,os; db=sqlite3.connect(sys.argv[1]); db.execute('update runs set status=\"running\", pid=?', (int(sys.argv[2]),)); db.commit()" "$TMP/partial.db" $$
"$IPU" runs import "$pdir" --store "$TMP/partial.db" >"$TMP/out" 2>&1 || fail=1
grep -q "^left as it is: $pdir: still being recorded by process $$" "$TMP/out" || { echo "FAIL: import touched a run still recording"; cat "$TMP/out"; fail=1; }

[ $fail -eq 0 ] && echo "store fault tests passed"
exit $fail
