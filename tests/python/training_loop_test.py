"""examples/python_training_loop.py runs (a PyTorch model on the CPU), records
a measured run of tiny_bert's phase `short` beside the estimate of its plan,
and `ipu runs compare` sets predicted against measured.

Environment: IPU, IPU_ROOT; PYTHONPATH has build/python."""

import os
import re
import subprocess
import sys
import tempfile

import ipu

IPU, ROOT = os.environ["IPU"], os.environ["IPU_ROOT"]

with tempfile.TemporaryDirectory() as d:
    db = os.path.join(d, "ipu.db")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python_training_loop.py"), "--store", db, "--steps", "8"],
                       capture_output=True, text=True)
    failures = []
    if r.returncode != 0:
        failures.append(f"the example exited {r.returncode}: {r.stderr}")
    else:
        m = re.search(r"ipu runs compare (\d+) (\d+)", r.stdout)
        est, run = int(m.group(1)), int(m.group(2))
        rec = ipu.Store(db).run(run)
        if (rec["status"], rec["parameters"]["source"], rec["metrics"]["loss"]["count"]) != ("finished", "measured", 8):
            failures.append(f"the run: {rec['status']} {rec['metrics']}")
        losses = [p["value"] for p in ipu.Store(db).metrics(run, "loss")]
        if not losses[-1] < losses[0]:
            failures.append(f"the loss did not fall: {losses}")
        out = subprocess.run([IPU, "runs", "compare", str(est), str(run), "--store", db], capture_output=True, text=True).stdout
        if f"predicted (estimate {est}) against measured (run {run})" not in out or "samples_per_s" not in out:
            failures.append(f"runs compare:\n{out}")
    for f in failures:
        print("FAIL:", f)
    print("training loop example:", "failed" if failures else "passed")
    sys.exit(1 if failures else 0)
