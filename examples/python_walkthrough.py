# A notebook-style walkthrough of the Python module `ipu` (docs/python.md):
# from estimating a mapping to logging a real run and comparing it with the
# estimate. Each step shows its output as it printed (`# >` lines), from
#
#   PYTHONPATH=build/python python3 examples/python_walkthrough.py
#
# run in the source tree with a fresh store in /tmp/walkthrough.db.
import os
import subprocess

import ipu

STORE = "/tmp/walkthrough.db"
if os.path.exists(STORE):
    os.remove(STORE)

# %% 1. Load a script and check it: diagnostics are objects.
script = ipu.load("examples/bert_large_pod16.ipu")
print(script.check())
# > []

# %% 2. Estimate its mapping as written: the document `ipu estimate --json` prints.
est = script.estimate()
phase = est["runs"][0]["phases"][0]
print(phase["name"], round(phase["throughput_samples_per_s"]), "samples/s,", round(phase["step_time_s"] * 1e3, 1), "ms a step")
# > one 3401 samples/s, 19267.3 ms a step

# %% 3. Vary the mapping as a value (no script text is written) and estimate again.
m = script.mapping()
print(m.fields()["settings"]["replicas"], m.fields()["pipeline_ipus"])
# > 4 4
for replicas in (1, 2):
    v = script.estimate(mapping=m.with_(replicas=replicas))["runs"][0]["phases"][0]
    print(f"replicas {replicas}: {v['throughput_samples_per_s']:.0f} samples/s, fits: {v['fits']}")
# > replicas 1: 855 samples/s, fits: True
# > replicas 2: 1706 samples/s, fits: True

# %% 4. A mapping the checker refuses is an exception with its code and place.
try:
    script.plan(mapping=m.with_(replicas=64))
except ipu.IpuError as e:
    print(e.code, f"{e.file}:{e.line}:{e.column}")
# > IPU1101 examples/bert_large_pod16.ipu:19:3

# %% 5. Search the mappings of the first phase: each result carries its mapping value.
best = script.search(phase=phase["name"], top=3, threads=1)[0]["top"]
for c in best:
    print(c["ipus"], "IPUs", c["replicas"], "replicas", f"{c['samples_per_s']:.0f} samples/s")
# > 16 IPUs 2 replicas 3876 samples/s
# > 16 IPUs 2 replicas 3868 samples/s
# > 16 IPUs 2 replicas 3769 samples/s

# %% 6. Record the estimate of the tiny BERT's plan, then log a "real" training
# of it: here a loop that only sleeps, standing in for PyTorch or PopTorch
# (examples/python_training_loop.py trains a real PyTorch model on the CPU).
tiny = ipu.load("examples/tiny_bert.ipu")
recorded = tiny.estimate(store=STORE)["recorded"][0]
import time
with ipu.start_run(tiny, phase="long", store=STORE) as run:  # its last phase (see docs/python.md)
    for step in range(1, 6):
        started = time.perf_counter()
        time.sleep(0.01)  # the step
        run.log(step, loss=5.0 / step, samples_per_s=16 / (time.perf_counter() - started))
print(run, run.plan_hash == ipu.Store(STORE).run(recorded)["plan_hash"])
# > <ipu.Run tiny_pretrain-2 plan 8935fbae4bdd5160 in /tmp/walkthrough.db> True

# %% 7. The store: runs as dicts or a pandas DataFrame, filtered as `ipu runs --where` filters.
store = ipu.Store(STORE)
print(store.runs(where="kind = run", frame=True)[["id", "kind", "status", "mapping.replicas", "loss"]])
# >    id kind    status mapping.replicas  loss
# > 0   2  run  finished                2   1.0

# %% 8. Predicted against measured, as `ipu runs compare` shows it.
out = subprocess.run([os.environ.get("IPU", "build/ipu"), "runs", "compare", str(recorded), str(run.id), "--store", STORE, "--color", "never"],
                     capture_output=True, text=True).stdout
print(out[out.index("predicted ("):].rstrip())
# > predicted (estimate 1) against measured (run 2), same plan 8935fbae4bdd5160
# >   metric         predicted  measured (mean)  ratio
# >   samples_per_s  5011.32    1468.85          2.4079
# >   (measured by the training that logged it, on its own hardware)
