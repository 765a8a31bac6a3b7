#!/usr/bin/env python3
"""`ipu ui`'s HTTP API against a store of real runs (docs/tracking.md, "Live
dashboard: ipu ui").

Records two short `ipu run`s of tiny_bert (two learning rates) and an
`ipu estimate` of the same plan, and a sweep written by the report fixture
(its name and a value hold <script>), then starts `ipu ui --port 0` and
checks: filters, sorting, limits and columns against `ipu runs --json` of the
same filter; every bad parameter is 400 with its message (the filter's caret
too); unknown runs, metrics, sweeps and pages 404; a store that went away 503
and back again 200; report data, comparison (what differs, predicted against
measured) and pages of runs and sweeps, with user text escaped; a Host that is
not the server's refused; writes refused without --writable, refused without
the page's header or from another origin, and done with them (read back with
`ipu runs show`); a token asked of every request when one is set, taken as a
header or as the cookie `/?token=` sets; Ctrl-C ends the server with 130.

    api_test.py IPU SWEEP_FIXTURE ROOT
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

ipu, fixture, root = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(ok, what, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL:", what, str(detail)[:1500])
    return ok


tmp = tempfile.mkdtemp(prefix="ipu-ui-api-test-")
servers = []


def start(*flags):
    p = subprocess.Popen([ipu, "ui", "--store", store, "--port", "0", *flags], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    servers.append(p)
    line = p.stdout.readline().strip()
    m = re.match(r"http://([^/:]+):(\d+)/(\?token=([^&\s]+))?$", line)
    if not m:
        p.kill()
        raise SystemExit("FAIL: ipu ui printed no URL: %r %s" % (line, p.stderr.read()))
    return p, m.group(1), int(m.group(2)), m.group(4)


def request(port, path, method="GET", body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = dict(headers or {})
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
        h.setdefault("Content-Type", "application/json")
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    return r.status, doc, text, r


def get(port, path, **kw):
    status, doc, text, _ = request(port, path, **kw)
    return status, doc, text


def q(s):
    return urllib.parse.quote(s, safe="")


try:
    store = os.path.join(tmp, "ipu.db")
    env = dict(os.environ, IPU_STORE=store)
    tiny = os.path.join(root, "examples", "tiny_bert.ipu")
    slow = os.path.join(tmp, "tiny_slow.ipu")
    open(slow, "w").write(open(tiny).read().replace("lr: 0.02 warmup", "lr: 0.005 warmup"))

    def ipu_ok(*args):
        r = subprocess.run([ipu, *args], env=env, capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "ipu " + " ".join(args), r.stderr)
        return r

    ipu_ok("run", tiny, "--steps", "8", "--threads", "1", "--runs-dir", os.path.join(tmp, "runs"))
    ipu_ok("run", slow, "--steps", "6", "--threads", "1", "--runs-dir", os.path.join(tmp, "runs"))
    ipu_ok("estimate", tiny)
    sweep_name = "lr <script>alert(1)</script>"
    r = subprocess.run([fixture, store, sweep_name], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "the sweep fixture", r.stderr)

    # ---- the command line
    r = subprocess.run([ipu, "ui", "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--writable" in r.stdout and "--token" in r.stdout, "ipu ui --help", r.stdout + r.stderr)
    for args, what in ((["--port", "70000"], "a port out of range"), (["--port", "x"], "a port that is no number"),
                       (["extra"], "an argument"), (["--frob"], "an unknown option"), (["--token", "short"], "a short token"),
                       (["--poll-ms", "5"], "a poll too short")):
        r = subprocess.run([ipu, "ui", "--store", store, *args], capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and "ipu ui" in r.stderr, "usage error (exit 2): " + what, r.stderr)
    r = subprocess.run([ipu, "ui", "--store", os.path.join(tmp, "none", "ipu.db"), "--port", "0"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 1 and "there is no store" in r.stderr, "a missing store: exit 1 saying so", r.stderr)

    server, host, port, token = start()
    check(host == "127.0.0.1" and token is None, "bound to 127.0.0.1 without a token by default", (host, token))

    # ---- runs: filters, sorting, limits, columns
    status, doc, _ = get(port, "/api/runs")
    cli = json.loads(subprocess.run([ipu, "runs", "--json"], env=env, capture_output=True, text=True).stdout)
    total = len(cli)  # the three of tiny_bert and the runs of the fixture's trials
    check(status == 200 and doc["total"] == total > 3 and len(doc["runs"]) == total, "all runs listed", doc)
    check([x["id"] for x in doc["runs"]] == [x["id"] for x in cli], "the same runs in the same order as ipu runs --json",
          (doc["runs"], cli))
    tiny_runs = [x for x in cli if x["training"] == "tiny_pretrain"]
    run_ids = sorted(x["id"] for x in tiny_runs if x["kind"] == "run")
    estimate_id = [x["id"] for x in tiny_runs if x["kind"] == "estimate"][0]
    for where in ("kind = run", "training = tiny_pretrain AND phases.short.lr.peak > 0.01", "status = finished OR tag = nothing",
                  "NOT kind = estimate AND loss.count >= 6", "training = tiny_pretrain"):
        status, doc, _ = get(port, "/api/runs?where=" + q(where))
        r = subprocess.run([ipu, "runs", "--json", "--where", where], env=env, capture_output=True, text=True)
        want = [x["id"] for x in json.loads(r.stdout)] if r.returncode == 0 else None
        check(status == 200 and want is not None and [x["id"] for x in doc["runs"]] == want and doc["matched"] == len(want),
              "where " + where + " matches what ipu runs matches", (status, doc, r.stderr))
    status, doc, _ = get(port, "/api/runs?where=" + q("kind = run AND phases.short.lr.peak > 0.01"))
    check(status == 200 and len(doc["runs"]) == 1, "the filter tells the two learning rates apart", doc)

    status, doc, _ = get(port, "/api/runs?where=" + q("loss > AND kind = run"))
    check(status == 400 and doc["error"].startswith("where: ") and "^" in doc.get("shown", "") and "offset" in doc,
          "a malformed filter: 400 with the message and the caret", doc)
    status, doc, _ = get(port, "/api/runs?where=" + q("losss < 3"))
    check(status == 400 and "losss" in doc["error"] and "did you mean `loss`" in (doc.get("help", "") + doc["error"]),
          "an unknown name: 400 with a suggestion", doc)
    status, doc, _ = get(port, "/api/runs?sort=-id")
    ids = [x["id"] for x in doc["runs"]]
    check(status == 200 and ids == sorted(ids, reverse=True), "sort=-id: descending", ids)
    status, doc, _ = get(port, "/api/runs?sort=id")
    ids = [x["id"] for x in doc["runs"]]
    check(status == 200 and ids == sorted(ids), "sort=id: ascending", ids)
    status, doc, _ = get(port, "/api/runs?sort=lsos")
    check(status == 400 and "sort: no run has `lsos`" in doc["error"], "an unknown sort column: 400", doc)
    status, doc, _ = get(port, "/api/runs?limit=1")
    check(status == 200 and len(doc["runs"]) == 1 and doc["matched"] == total, "limit=1: one run of all matched", doc)
    for bad in ("0", "x", "-2", "1.5"):
        status, doc, _ = get(port, "/api/runs?limit=" + bad)
        check(status == 400 and "limit" in doc["error"], "limit=" + bad + ": 400", doc)
    status, doc, _ = get(port, "/api/runs?columns=" + q("id,phases.short.lr.peak,loss.count"))
    check(status == 200 and doc["columns"] == ["id", "phases.short.lr.peak", "loss.count"]
          and all(len(x["cells"]) == 3 and x["cells"][0] == str(x["id"]) for x in doc["runs"]), "columns chosen", doc)
    status, doc, _ = get(port, "/api/runs?columns=" + q("id,replicas"))
    check(status == 400 and "columns: no run has `replicas`" in doc["error"], "an unknown column: 400", doc)
    status, doc, _ = get(port, "/api/runs?where=" + q("training = tiny_pretrain AND kind = run"))
    check(doc["columns"] == ["phases.short.lr.base", "phases.short.lr.peak", "loss", "samples_per_s"],
          "the default columns: the parameters that differ, loss, samples_per_s", doc["columns"])

    # ---- one run, its metrics
    a, b = run_ids
    status, doc, _ = get(port, "/api/runs/%d" % a)
    check(status == 200 and doc["id"] == a and "script" in doc and doc["kind"] == "run", "one run, with its script", doc)
    status, doc, _ = get(port, "/api/runs/%s" % q(doc["name"]))
    check(status == 200 and doc["id"] == a, "a run by its name", doc)
    status, doc, _ = get(port, "/api/runs/999")
    check(status == 404 and "no run `999`" in doc["error"], "an unknown run: 404", doc)
    count = get(port, "/api/runs/%d" % a)[1]["metrics"]["loss"]["count"]
    status, doc, _ = get(port, "/api/runs/%d/metrics?key=loss" % a)
    steps = [p["step"] for p in doc["points"]]
    check(status == 200 and len(steps) == count and steps == sorted(set(steps)) and all(p["key"] == "loss" for p in doc["points"]),
          "every loss point, by step", doc)
    status, doc2, _ = get(port, "/api/runs/%d/metrics?key=loss&since=%d" % (a, steps[3]))
    check(status == 200 and [p["step"] for p in doc2["points"]] == steps[4:] and doc2["last_step"] == steps[-1],
          "since=N: the points after step N", doc2)
    status, doc, _ = get(port, "/api/runs/%d/metrics?since=abc" % a)
    check(status == 400 and "since" in doc["error"], "since=abc: 400", doc)
    status, doc, _ = get(port, "/api/runs/%d/metrics?key=losss" % a)
    check(status == 404 and "did you mean `loss`" in doc["error"], "an unknown metric: 404 with a suggestion", doc)
    status, doc, _ = get(port, "/api/runs/999/metrics")
    check(status == 404, "metrics of an unknown run: 404", doc)

    # ---- report data and comparison
    status, doc, _ = get(port, "/api/report-data?ids=%d,%d" % (a, b))
    check(status == 200 and len(doc["runs"]) == 2 and doc["charts"], "report data of two runs", str(doc)[:300])
    for bad, code in (("", 400), ("%d,999" % a, 404), (",,", 400)):
        status, doc, _ = get(port, "/api/report-data?ids=" + bad)
        check(status == code and "error" in doc, "report data of ids=%r: %d" % (bad, code), doc)
    status, doc, _ = get(port, "/api/compare?ids=%d,%d" % (a, b))
    differing = {p["name"]: p["values"] for p in doc["differing_parameters"]}
    check(status == 200 and "phases.short.lr.peak" in differing and differing["phases.short.lr.peak"][0] != differing["phases.short.lr.peak"][1],
          "compare: the parameters that differ",
          doc)
    pairs = doc["predicted_vs_measured"]
    # The estimate is of tiny_bert.ipu's plan; the other learning rate is another plan.
    check([(p["run"], p["estimate"]) for p in pairs] == [(a, estimate_id)] and pairs[0]["metrics"],
          "compare: the run of the estimated plan against its estimate, with metrics", pairs)
    m = pairs[0]["metrics"][0]
    check(m["predicted"] is not None and m["measured_mean"] is not None, "predicted and measured values", m)

    # ---- sweeps
    status, doc, _ = get(port, "/api/sweeps")
    names = [s["name"] for s in doc["sweeps"]]
    check(status == 200 and sweep_name in names, "the sweep is listed", doc)
    s = [s for s in doc["sweeps"] if s["name"] == sweep_name][0]
    check(s["total"] == 24 and s["counts"]["running"] == 1 and s["best"] is not None, "the sweep's counts and best trial", s)
    status, doc, _ = get(port, "/api/sweeps/" + q(sweep_name))
    check(status == 200 and doc["sweep"]["name"] == sweep_name and len(doc["trials"]) == 24, "one sweep's report", str(doc)[:300])
    status, doc, _ = get(port, "/api/sweeps/lr_gird")
    check(status == 404 and "no sweep `lr_gird`" in doc["error"], "an unknown sweep: 404", doc)

    # ---- pages, escaped
    status, _, html = get(port, "/")
    check(status == 200 and "/static/runs.js" in html, "the runs page", html[:300])
    status, _, html = get(port, "/runs/%d" % a)
    check(status == 200 and "/api/report-data?ids=%d" % a in html and 'data-ids="%d"' % a in html and "ui-nav" in html,
          "a run's page: the report, live, with the dashboard's section", html[:300])
    status, _, html = get(port, "/runs/999")
    check(status == 404 and "no run `999`" in html and html.lstrip().startswith("<!DOCTYPE html>"), "an unknown run's page: 404",
          html[:300])
    status, _, html = get(port, "/compare?ids=%d,%d" % (a, b))
    check(status == 200 and 'data-ids="%d,%d"' % (a, b) in html, "the comparison page", html[:300])
    status, _, html = get(port, "/compare?ids=")
    check(status == 400, "a comparison of nothing: 400", html[:300])
    status, _, html = get(port, "/sweeps/" + q(sweep_name))
    outside_json = re.sub(r'<script type="application/json".*?</script>', "", html, flags=re.S)
    check(status == 200 and "ipu-sweep-data" in html and "/static/sweep_live.js" in html, "the sweep's page, live", html[:300])
    check("<script>alert(1)</script>" not in outside_json and "&lt;script&gt;alert(1)&lt;/script&gt;" in html,
          "the sweep's name is escaped in its page", "")
    status, _, html = get(port, "/sweeps/" + q("<img src=x onerror=alert(1)>"))
    check(status == 404 and "<img" not in html and "&lt;img" in html, "an unknown sweep's name is escaped in the 404 page", html)
    for path in ("/static/runs.js", "/static/ui.css", "/static/details.js", "/static/sweep_live.js", "/static/common.js",
                 "/static/errors.js", "/sweeps"):
        status, _, _ = get(port, path)
        check(status == 200, path + ": 200")
    status, doc, _ = get(port, "/static/nope.js")
    check(status == 404, "an unknown file: 404")
    status, doc, _ = get(port, "/api/nothing")
    check(status == 404 and "there is no page" in doc["error"], "an unknown URL: 404 saying so", doc)
    _, _, _, resp = request(port, "/")
    check(resp.getheader("X-Content-Type-Options") == "nosniff" and "default-src" in (resp.getheader("Content-Security-Policy") or ""),
          "pages are served with nosniff and a content security policy", resp.getheaders())

    _, _, _, resp = request(port, "/api/runs", headers={"Accept-Encoding": "gzip, deflate, br"})
    check(resp.getheader("Content-Encoding") is None and resp.getheader("Content-Type") == "application/json",
          "answers go out uncompressed, one Content-Type (Brotli at its highest quality costs seconds)", resp.getheaders())

    # ---- who may ask
    status, doc, _ = get(port, "/api/runs", headers={"Host": "evil.example:%d" % port})
    check(status == 403 and "Host" in doc["error"], "another Host (DNS rebinding): 403", doc)
    status, doc, _ = get(port, "/api/runs", headers={"Host": "localhost:%d" % port})
    check(status == 200, "Host localhost: 200", doc)
    status, doc, _ = get(port, "/api/runs/%d/tags" % a, method="POST", body={"add": ["x"]}, headers={"X-Ipu-Request": "1"})
    check(status == 403 and "--writable" in doc["error"], "a write without --writable: 403 naming the flag", doc)
    tags = json.loads(subprocess.run([ipu, "runs", "show", str(a), "--json"], env=env, capture_output=True, text=True).stdout)["tags"]
    check("x" not in tags, "the refused write wrote nothing", tags)
    status, doc, _ = get(port, "/api/runs/%d" % a, method="POST", body={}, headers={"X-Ipu-Request": "1"})
    check(status == 405, "POST where none is taken: 405", doc)

    # ---- a store that went away: 503, then back
    moved = os.path.join(tmp, "moved")
    os.mkdir(moved)
    for f in os.listdir(tmp):
        if f.startswith("ipu.db"):
            os.rename(os.path.join(tmp, f), os.path.join(moved, f))
    status, doc, _ = get(port, "/api/runs")
    check(status == 503 and "there is no store" in doc["error"], "a store gone: 503 with the store's message", doc)
    status, _, html = get(port, "/runs/%d" % a)
    check(status == 503 and "there is no store" in html, "a run's page when the store is gone: 503", html[:300])
    for f in os.listdir(moved):
        os.rename(os.path.join(moved, f), os.path.join(tmp, f))
    status, doc, _ = get(port, "/api/runs")
    check(status == 200 and doc["total"] == total, "the store back: 200", doc)

    # ---- a run killed with -9: shown killed, as `ipu runs` shows it, once
    # two heartbeats (10 s) have passed without one
    doomed = subprocess.Popen([ipu, "run", tiny, "--steps", "5000", "--threads", "1", "--runs-dir", os.path.join(tmp, "runs")],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    doomed_id = None
    for _ in range(300):
        status, doc, _ = get(port, "/api/runs?where=" + q("status = running AND training = tiny_pretrain"))
        if status == 200 and doc["runs"]:
            doomed_id = doc["runs"][0]["id"]
            break
        time.sleep(0.1)
    check(doomed_id is not None, "the training run is listed as running")
    doomed.kill()
    doomed.wait()
    seen = None
    for _ in range(60):
        status, doc, _ = get(port, "/api/runs?where=" + q("id = %s" % doomed_id))
        seen = doc["runs"][0]["status"] if status == 200 and doc["runs"] else None
        if seen == "killed":
            break
        time.sleep(0.5)
    check(seen == "killed", "a run of this host killed with -9 is shown killed by the dashboard", seen)
    shown = json.loads(subprocess.run([ipu, "runs", "show", str(doomed_id), "--json"], env=env, capture_output=True, text=True).stdout)
    check(shown["status"] == "killed" and "no heartbeat" in shown["stop_reason"], "and so recorded in the store", shown)
    total += 1

    server.send_signal(signal.SIGINT)
    check(server.wait(timeout=30) == 130, "Ctrl-C ends the server with 130")

    # ---- --writable
    server, _, port, _ = start("--writable")
    status, doc, _ = get(port, "/api/runs/%d/tags" % a, method="POST", body={"add": ["baseline"]})
    check(status == 403 and "X-Ipu-Request" in doc["error"], "a write without the page's header: 403", doc)
    status, doc, _ = get(port, "/api/runs/%d/tags" % a, method="POST", body={"add": ["baseline"]},
                         headers={"X-Ipu-Request": "1", "Origin": "http://evil.example"})
    check(status == 403 and "evil.example" in doc["error"], "a write from another origin: 403", doc)
    page = {"X-Ipu-Request": "1", "Origin": "http://127.0.0.1:%d" % port, "Host": "127.0.0.1:%d" % port}
    status, doc, _ = get(port, "/api/runs/%d/tags" % a, method="POST", body={"add": ["baseline", "fp32"]}, headers=page)
    check(status == 200 and set(doc["tags"]) >= {"baseline", "fp32"}, "tags added", doc)
    status, doc, _ = get(port, "/api/runs/%d/tags" % a, method="POST", body={"remove": ["fp32"]}, headers=page)
    check(status == 200 and doc["tags"] == ["baseline"], "a tag removed", doc)
    note = "lr too high? <img src=x onerror=alert(1)>"
    status, doc, _ = get(port, "/api/runs/%d/note" % a, method="POST", body={"note": note}, headers=page)
    check(status == 200 and doc["note"] == note, "a note written", doc)
    shown = json.loads(subprocess.run([ipu, "runs", "show", str(a), "--json"], env=env, capture_output=True, text=True).stdout)
    check(shown["tags"] == ["baseline"] and shown["note"] == note, "ipu runs show reads the tags and the note", shown)
    for body, what in (({"add": ["two words"]}, "a tag with a space"), ({"add": "baseline"}, "tags not a list"),
                       ({}, "no tag"), ("not json", "a body that is no JSON"), ({"add": [3]}, "a tag that is no text")):
        status, doc, _ = get(port, "/api/runs/%d/tags" % a, method="POST", body=body, headers=page)
        check(status == 400 and doc["error"], "tags: " + what + ": 400", doc)
    status, doc, _ = get(port, "/api/runs/%d/note" % a, method="POST", body={"text": "x"}, headers=page)
    check(status == 400 and "note" in doc["error"], "a note without `note`: 400", doc)
    status, doc, _ = get(port, "/api/runs/999/note" % (), method="POST", body={"note": "x"}, headers=page)
    check(status == 404, "a note of an unknown run: 404", doc)
    server.send_signal(signal.SIGTERM)
    check(server.wait(timeout=30) == 130, "SIGTERM ends the server too")

    # ---- a token
    server, _, port, token = start("--token", "s3cret-token")
    check(token == "s3cret-token", "the printed URL carries the token", token)
    status, doc, _ = get(port, "/api/runs")
    check(status == 403 and "token" in doc["error"], "no token: 403", doc)
    status, doc, _ = get(port, "/api/runs", headers={"X-Ipu-Token": "wrong-token!"})
    check(status == 403, "a wrong token: 403", doc)
    status, doc, _ = get(port, "/api/runs", headers={"X-Ipu-Token": "s3cret-token"})
    check(status == 200 and doc["total"] == total, "the token as a header: 200", doc)
    status, _, _, resp = request(port, "/?token=s3cret-token&where=kind%20%3D%20run")
    cookie = resp.getheader("Set-Cookie") or ""
    check(status == 303 and cookie.startswith("ipu_ui_token=s3cret-token") and "HttpOnly" in cookie
          and resp.getheader("Location") == "/?where=kind%20%3D%20run", "/?token=: a cookie, and the URL without it",
          (status, resp.getheaders()))
    status, _, _, resp = request(port, "/runs/" + q("tiny run <1>") + "?token=s3cret-token")
    check(status == 303 and resp.getheader("Location") == "/runs/tiny%20run%20%3C1%3E",
          "/?token= keeps the page's path, encoded", resp.getheaders())
    status, _, _, resp = request(port, "/?token=guess-guess")
    check(status == 403 and not resp.getheader("Set-Cookie"), "/?token= with a wrong token: 403, no cookie")
    status, doc, _ = get(port, "/api/runs", headers={"Cookie": "other=1; ipu_ui_token=s3cret-token"})
    check(status == 200, "the token as the cookie: 200", doc)
    server.send_signal(signal.SIGINT)
    server.wait(timeout=30)
finally:
    for p in servers:
        if p.poll() is None:
            p.kill()
            p.wait()
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("ok")
