#!/usr/bin/env python3
"""`ipu report --sweep` (docs/sweeps.md, "Report").

1. Sweeps written through the store's API by ipu_sweep_report_fixture: one
   whose name and one of whose parameter values contain <script>, with
   finished, stopped, failed and running trials that ended out of index
   order; and an empty one. The --json document is checked against
   `ipu sweep status --json` (another path through the store) and against
   what the fixture wrote; the HTML for its three sections, every trial, the
   escaping of every user string, nothing from outside the file, and the JSON
   it embeds (the same document). The page is opened in headless Chromium:
   it must render with no console error and no exception.
2. A real sweep, estimated by `ipu sweep FILE` (a predicted metric, so in
   seconds), reported the same way.
3. Errors: an unknown sweep (with did-you-mean), an empty sweep (a report,
   not a crash), no store, bad options.

    sweep_report_test.py IPU FIXTURE ROOT
"""
import html as htmllib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ipu, fixture, root = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []
HOSTILE = "<script>alert(1)</script>"
NAME = "lr " + HOSTILE


def check(ok, what, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL:", what, str(detail)[:2000] if detail else "")


def run(*args, code=0, env=None):
    r = subprocess.run([ipu, *args], capture_output=True, text=True, timeout=300, env=env)
    check(r.returncode == code, f"ipu {' '.join(args)}: exit {r.returncode}, expected {code}", r.stderr + r.stdout[:500])
    return r


def embedded_json(text):
    m = re.search(r'<script type="application/json" id="ipu-sweep-data">(.*?)</script>', text, re.S)
    return json.loads(m.group(1)) if m else None


def chromium_check(path, trials):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        check(False, "no chromium (Debian package `chromium`; ./dev installs it)")
        return
    profile = tempfile.mkdtemp(prefix="ipu-chromium-")
    try:
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile,
                 "--enable-logging=stderr", "--v=0", "--window-size=1200,2600"]
        r = subprocess.run([chromium, *flags, "--dump-dom", "file://" + path], capture_output=True, text=True, timeout=120)
        dom, log = r.stdout, r.stderr
        check(r.returncode == 0 and "<body" in dom, "chromium loads the sweep report", log[-2000:])
        check('data-rendered="yes"' in dom, "the page's script ran to its end", log[-2000:])
        check(re.search(r"<html[^>]*data-errors", dom) is None, "no uncaught exception or console.error", dom[:300])
        console = [line for line in log.splitlines() if "CONSOLE" in line]
        check(any("ipu sweep report rendered" in line for line in console), "chromium shows the page's console", console)
        bad = [line for line in console if "ipu sweep report rendered" not in line]
        check(not bad, "no other console message", bad)
        m = re.search(r'<body[^>]*data-trials="(\d+)"', dom)
        check(m is not None and int(m.group(1)) == trials, f"the page parsed its data: {trials} trials", m.group(0) if m else "")
        check("alert(1)" not in log, "no script from the data ran")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


tmp = tempfile.mkdtemp(prefix="ipu-sweep-report-test-")
try:
    store = os.path.join(tmp, "ipu.db")
    r = subprocess.run([fixture, store, NAME], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "the fixture writes the sweeps", r.stderr)

    # --- the JSON document, against `ipu sweep status --json`
    status = json.loads(run("sweep", "status", NAME, "--json", "--store", store).stdout)
    rep = json.loads(run("report", "--sweep", NAME, "--json", "--store", store).stdout)
    s = rep["sweep"]
    check((s["name"], s["method"], s["total"]) == (NAME, "random", 24), "name, method, total", s)
    check(s["metric"] == {"name": "eval.loss", "goal": "minimize", "target": 0.9}, "the metric", s["metric"])
    check(s["counts"] == status["counts"] == {"queued": 0, "running": 1, "finished": 19, "failed": 2, "killed": 0,
                                              "stopped": 2}, "counts", (s["counts"], status["counts"]))
    by_index = {t["index"]: t for t in status["trials"]}
    check(sorted(t["index"] for t in rep["trials"]) == list(range(24)), "every trial once", [t["index"] for t in rep["trials"]])
    for t in rep["trials"]:
        st = by_index.get(t["index"], {})
        for key in ("state", "assignment", "key", "metric", "run_id", "reason"):
            check(t[key] == st.get(key), f"trial {t['index']}: {key} as `ipu sweep status` says", (t[key], st.get(key)))
    check(rep["best"] == status["best"]["index"], "the best trial is the one `ipu sweep status` names",
          (rep["best"], status["best"]["index"]))
    finished = [t for t in rep["trials"] if t["state"] == "finished"]
    check([t["rank"] for t in finished] == list(range(1, 20)), "finished trials ranked 1..19", [t["rank"] for t in finished])
    check([t["metric"] for t in finished] == sorted(t["metric"] for t in finished), "finished trials best first (minimize)")
    check(rep["trials"][0]["index"] == rep["best"] and rep["trials"][0]["best"], "the table starts with the best trial")
    order = [t["state"] for t in rep["trials"]]
    check(order == ["finished"] * 19 + ["stopped"] * 2 + ["running"] + ["failed"] * 2, "states in the table's order", order)
    check(all(t["steps"] == 200 for t in finished), "a finished trial's run recorded 200 steps", [t["steps"] for t in finished])
    check(all(t["steps"] == 60 for t in rep["trials"] if t["state"] == "stopped"), "a stopped trial's run stopped at 60")
    check(all(t["steps"] is None and t["run_id"] is None for t in rep["trials"] if t["state"] in ("failed", "running")),
          "failed and running trials have no run")
    # History: ended trials by their end, which the fixture made 22, 21, ..., 12, 0, 1, ..., 11.
    hist = rep["history"]
    check([h["index"] for h in hist] == list(range(22, 11, -1)) + list(range(0, 12)), "history in the order trials ended",
          [h["index"] for h in hist])
    best = None
    for h in hist:
        t = by_index[h["index"]]
        check(h["state"] == t["state"], f"history {h['index']}: state")
        if h["state"] == "failed":
            check(h["metric"] is None, "a failed trial has no metric in the history")
        if h["state"] == "finished" and (best is None or h["metric"] < best):
            best = h["metric"]
        check(h["best_so_far"] == best, f"history {h['index']}: best so far {best}", h)
    check(hist[-1]["best_so_far"] == status["best"]["metric"], "the best so far ends at the best metric")
    params = [p["path"] for p in rep["parameters"]]
    check(params == ["lr", "micro_batch", "optimizer", "tag"], "one axis per parameter", params)
    scales = {p["path"]: p["scale"] for p in rep["parameters"]}
    check(scales == {"lr": "log", "micro_batch": "linear", "optimizer": "categorical", "tag": "categorical"}, "axis scales", scales)
    imp = rep["importance"]
    check(imp["observations"] == 21 and imp["minimum_observations"] == 16 and imp["model_fitted"], "importance fitted on 21 trials", imp)
    share = {p["path"]: p["importance"] for p in imp["parameters"]}
    rho = {p["path"]: p["spearman"] for p in imp["parameters"]}
    check(share["lr"] is not None and all(share["lr"] > 3 * (share[p] or 0) for p in ("micro_batch", "optimizer", "tag")),
          "the learning rate, which drives the metric, is the most important", share)
    check(rho["optimizer"] is None and rho["tag"] is None and rho["micro_batch"] is not None, "correlations of numbers only", rho)

    # --- the page
    page = os.path.join(tmp, "report.html")
    r = run("report", "--sweep", NAME, "--store", store, "-o", page)
    check("wrote " in r.stderr and "24 trials" in r.stderr, "it says what it wrote", r.stderr)
    text = open(page, encoding="utf-8").read()
    for section in ("history-section", "parallel-section", "importance-section", "trials-section"):
        check(f'id="{section}"' in text, f"the page has {section}")
    for i in range(24):
        check(f'<tr data-trial="{i}"' in text, f"the table has trial {i}")
    check(len(re.findall(r'class="pc-line[^"]*" data-trial=', text)) == 24, "a line per trial in the parallel coordinates")
    check(len(re.findall(r'class="pt-(?:finished|stopped|failed)[^"]*" data-trial=', text)) == 23,
          "a point per ended trial in the history")
    check(len(re.findall(r'class="pt-stopped"', text)) == 2 + 1 and len(re.findall(r'class="pt-failed"', text)) == 2 + 1,
          "stopped and failed trials marked (and in the legend)")
    # One colour per trial: its history point, its parallel-coordinates line, its table row.
    points = dict(re.findall(r'class="pt-(?:finished|stopped)[^"]*" data-trial="(\d+)" style="fill:([^"]+)"', text))
    lines = {t: c for c, t in re.findall(r'<path d="[^"]*" stroke="([^"]+)" class="pc-line[^"]*" data-trial="(\d+)"', text)}
    rows = dict(re.findall(r'<tr data-trial="(\d+)"[^>]*><td class="num">\d*</td><td class="num"><span class="swatch" '
                           r'style="background:([^"]+)"', text))
    check(len(points) == 21 and len(lines) == 24 and len(rows) == 24, "colours found for every trial",
          (len(points), len(lines), len(rows)))
    check(all(lines[t] == rows[t] for t in rows) and all(points[t] == rows[t] for t in points),
          "each trial one colour in the history, the parallel coordinates and the table",
          [(t, points.get(t), lines.get(t), rows.get(t)) for t in rows if not (lines.get(t) == rows[t] == points.get(t, rows[t]))])
    check(len(set(rows.values())) > 10, "trials in many colours (by their metric)", set(rows.values()))
    # A trial's hover names what differs among the trials, briefly.
    check(re.search(r"<title>trial \d+: lr=[0-9.e-]+, micro_batch=\d+, optimizer=\w+, tag=", text) is not None,
          "a trial's title names the parameters that differ", re.findall(r"<title>trial [^\n<]*", text)[:3])
    check('class="target"' in text, "the target line is drawn")
    check('pc-best' in text and 'class="best"' in text, "the best trial highlighted")
    check(HOSTILE not in text, "no user string reaches the page unescaped")
    check(htmllib.escape(HOSTILE, quote=False) in text, "the hostile value is shown, escaped")
    check(htmllib.escape("tiny<b>trial</b>", quote=False) in text, "the training's name is escaped")
    check(len(re.findall(r"<script", text)) == 3, "the page's own three scripts only", re.findall(r"<script[^>]*>", text))
    check(not re.findall(r'''(?:src|href)\s*=\s*["']?(?:https?:|//)''', text), "nothing from outside the file")
    check(embedded_json(text) == rep, "the page carries the same document as --json")
    out_json = os.path.join(tmp, "report.json")
    run("report", "--sweep", NAME, "--store", store, "--json", "-o", out_json)
    check(json.load(open(out_json)) == rep, "--json -o FILE writes the document")
    chromium_check(page, 24)

    # --- an empty sweep: a report saying so
    empty = os.path.join(tmp, "empty.html")
    r = run("report", "--sweep", "empty_sweep", "--store", store, "-o", empty)
    check("no trial finished yet" in r.stderr, "an empty sweep's report says no trial finished", r.stderr)
    etext = open(empty, encoding="utf-8").read()
    check("No trial has finished yet" in etext, "the empty page says no trial has finished")
    ej = json.loads(run("report", "--sweep", "empty_sweep", "--store", store, "--json").stdout)
    check(ej["trials"] == [] and ej["history"] == [] and ej["best"] is None and ej["importance"]["notes"],
          "the empty sweep's document", ej)
    chromium_check(empty, 0)

    # --- errors
    r = run("report", "--sweep", "empty_swep", "--store", store, "-o", page, code=1)
    check("there is no sweep `empty_swep`" in r.stderr and "did you mean `empty_sweep`" in r.stderr, "an unknown sweep", r.stderr)
    r = run("report", "--sweep", "x", "--store", os.path.join(tmp, "missing.db"), "-o", page, code=1)
    check("there is no store at" in r.stderr, "a missing store is said", r.stderr)
    open(os.path.join(tmp, "junk.db"), "w").write("not a database, " * 100)
    run("report", "--sweep", "x", "--store", os.path.join(tmp, "junk.db"), "-o", page, code=1)
    run("report", "--sweep", code=2)
    run("report", "--sweep", "", "--store", store, "-o", page, code=2)
    run("report", "--sweep", "empty_sweep", "--store", store, code=2)  # neither -o nor --json
    run("report", "--sweep", "empty_sweep", "--store", store, "--frobnicate", "-o", page, code=2)
    run("report", "--sweep", "empty_sweep", "3", "--store", store, "-o", page, code=2)
    run("report", "--sweep", "empty_sweep", "--where", "loss < 1", "--store", store, "-o", page, code=2)
    r = run("report", "--sweep", "x", "--help")
    check("--sweep SWEEP" in r.stdout, "--help with --sweep explains the sweep report", r.stdout)
    r = run("report", "--sweep", "empty_sweep", "--store", store, "-o", os.path.join(tmp, "no", "such", "dir.html"), code=1)

    # --- a real sweep: estimated trials of a tiny BERT
    script = os.path.join(tmp, "speed.ipu")
    open(script, "w").write("""import "std/pods"
import "std/models/bert"

chip tiny_chip = GC200 with { tiles: 16, memory: 64 MB, code_base: 1 MB }
machine tiny_machine = M2000 with { chip: tiny_chip, ipus: 4, streaming_memory: 1 GB }
pod tiny_pod {
  machine: tiny_machine
  machines: 1
}
model tiny = bert(layers: 1, hidden: 32, heads: 2, ffn: 64, vocab: 1000, positions: 64)
mapping one for tiny on tiny_pod {
  pipeline {
    ipu 0: embedding, encoder[0], mlm_head, nsp_head
  }
  replicas: 1
}
precision full {
  compute: fp32
}
training tiny_trial {
  mapping: one
  precision: full
  optimizer: lamb(weight_decay: 0.01, exclude: [bias, norm])
  seed: 1234
  phase short {
    seq_len: 32
    masked_tokens: 5
    micro_batch: 4
    gradient_accumulation: 1
    steps: 150
    lr: 0.002 warmup 6 steps then linear to 0
  }
}
sweep batch_speed for tiny_trial {
  method: grid
  metric: maximize(samples_per_s)
  parameters {
    phase.short.micro_batch: [1, 2, 4, 8]
  }
}
run tiny_trial
""")
    real = os.path.join(tmp, "real.db")
    run("sweep", script, "batch_speed", "--store", real, "--runs-dir", os.path.join(tmp, "runs"))
    rj = json.loads(run("report", "--sweep", "batch_speed", "--store", real, "--json").stdout)
    metrics = [t["metric"] for t in rj["trials"]]
    check(len(metrics) == 4 and all(m is not None for m in metrics) and metrics == sorted(metrics, reverse=True),
          "the real sweep's four trials, best (largest samples_per_s) first", metrics)
    check(all(t["steps"] == 150 for t in rj["trials"]), "each estimate covers the phase's 150 steps", [t["steps"] for t in rj["trials"]])
    check(rj["importance"]["model_fitted"] is False and rj["importance"]["notes"], "four trials: a note, not numbers", rj["importance"])
    check(rj["importance"]["parameters"][0]["spearman"] is None, "four trials: no correlation either")
    real_page = os.path.join(tmp, "real.html")
    run("report", "--sweep", "batch_speed", "--store", real, "-o", real_page)
    rtext = open(real_page, encoding="utf-8").read()
    check(embedded_json(rtext) == rj, "the real sweep's page carries its document")
    check("importance-note" in rtext, "the page shows why there is no importance")
    chromium_check(real_page, 4)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("sweep report test passed")
