#!/usr/bin/env python3
"""`ipu report` opened in headless Chromium (docs/tracking.md).

Records three short training runs (two learning rates) and an estimate into a
fresh store, writes the report, and loads it in Chromium with the network
unused. Asserts: it renders (the page's last line ran), no console error and
no uncaught exception, one curve per (run, metric) with a finite point as
counted independently from the database with Python's sqlite3, but for the
metrics with one value throughout (in the table of constant metrics instead),
one legend for the page with an entry per run, the parallel-coordinates and
scatter plots drawn, and no reference to anything outside the file. (The page
used as a reader uses it, with 200 runs: report_page_test.js.)

    report_test.py IPU ROOT [SCREENSHOT.png]
"""
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

ipu, root = sys.argv[1], sys.argv[2]
screenshot = sys.argv[3] if len(sys.argv) > 3 else None
failures = []


def check(ok, what, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL:", what, detail[:2000] if detail else "")


chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    print("FAIL: no chromium (Debian package `chromium`; ./dev installs it)")
    sys.exit(1)

tmp = tempfile.mkdtemp(prefix="ipu-report-test-")
try:
    env = dict(os.environ, IPU_STORE=os.path.join(tmp, "ipu.db"))
    script = open(os.path.join(root, "examples", "tiny_bert.ipu")).read()
    slow = os.path.join(tmp, "tiny_slow.ipu")
    open(slow, "w").write(script.replace("lr: 0.02 warmup", "lr: 0.005 warmup"))

    def ipu_ok(*args):
        r = subprocess.run([ipu, *args], env=env, capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "ipu " + " ".join(args), r.stderr)
        return r

    tiny = os.path.join(root, "examples", "tiny_bert.ipu")
    ipu_ok("run", tiny, "--steps", "12", "--threads", "1", "--runs-dir", os.path.join(tmp, "runs"))
    ipu_ok("run", tiny, "--steps", "8", "--threads", "1", "--runs-dir", os.path.join(tmp, "runs"))
    ipu_ok("run", slow, "--steps", "12", "--threads", "1", "--runs-dir", os.path.join(tmp, "runs"))
    ipu_ok("estimate", tiny)
    html = os.path.join(tmp, "report.html")
    r = ipu_ok("report", "--title", "tiny BERT: two learning rates", "-o", html)

    db = sqlite3.connect(env["IPU_STORE"])
    # A metric with one value at every point of every run (loss_scale,
    # skipped) is folded into the constant table: no curve.
    constant = [k for (k,) in db.execute(
        "select key from metrics where value is not null group by key having count(distinct value) = 1 and count(*) >= 2")]
    expected = db.execute(
        "select count(*) from (select distinct run_id, key from metrics where value is not null and key not in (%s))"
        % ",".join("?" * len(constant)), constant).fetchone()[0]
    check("loss_scale" in constant, "loss_scale is constant in these runs", str(constant))
    runs = db.execute("select count(*) from runs").fetchone()[0]
    check(runs == 4, f"4 runs recorded, found {runs}")
    check(f"{expected} curves" in r.stderr, f"ipu report says it drew {expected} curves", r.stderr)

    text = open(html, encoding="utf-8").read()
    external = re.findall(r'''(?:src|href)\s*=\s*["']?(?:https?:|//)''', text)
    check(not external, "the report refers to nothing outside itself", str(external))

    profile = os.path.join(tmp, "chromium-profile")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile,
             "--enable-logging=stderr", "--v=0", "--window-size=1200,2600", "--hide-scrollbars"]
    url = "file://" + html
    r = subprocess.run([chromium, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    dom, log = r.stdout, r.stderr
    check(r.returncode == 0 and "<body" in dom, "chromium loads the report", log[-2000:])
    check('data-rendered="yes"' in dom, "the page's script ran to its end", log[-2000:])
    check(re.search(r"<html[^>]*data-errors", dom) is None, "no uncaught exception or console.error in the page", dom[:300])
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    check(any("ipu report rendered" in line for line in console), "chromium shows the page's console", "\n".join(console))
    bad = [line for line in console if "ipu report rendered" not in line]
    check(not bad, "no other console message (an error or warning)", "\n".join(bad))

    m = re.search(r'<body[^>]*data-curves="(\d+)"', dom)
    check(m is not None and int(m.group(1)) == expected, f"{expected} curves drawn", m.group(0) if m else dom[:500])
    legend = len(re.findall(r'class="chip', dom))
    check(legend == 4, "one legend for the page, an entry per run", f"{legend} entries")
    check(re.search(r'class="u-legend', dom) is None, "no legend per chart")
    for key in constant:
        check(f'data-key="{key}"' in dom, f"{key} in the table of constant metrics")
        check(re.search(f'class="chart" data-key="{re.escape(key)}"', dom) is None, f"no chart of {key}")
    lines = len(re.findall(r'class="pc-line"', dom))
    check(lines == 4, f"parallel coordinates draw the 4 runs, drew {lines}")
    points = re.search(r'id="scatter"[^>]*data-points="(\d+)"', dom)
    check(points is not None and int(points.group(1)) >= 3, "the scatter draws the runs", points.group(0) if points else "")

    if screenshot:
        subprocess.run([chromium, *flags, "--screenshot=" + os.path.abspath(screenshot), url], capture_output=True,
                       timeout=120)
        check(os.path.exists(screenshot), "a screenshot was written")
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    sys.exit(1)
print("report test passed")
