"""One process logging a measured run (ipu_test.py starts two at once):
log_worker.py SCRIPT STORE STEPS TAG. Prints the run's id."""

import sys

import ipu

script, store, steps, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
run = ipu.start_run(script, store=store, parameters={"worker": tag})
for step in range(1, steps + 1):
    run.log(step, loss=1.0 / step, samples_per_s=100.0 + step)
    if step % 50 == 0:
        run.flush()  # many short transactions, interleaved with the other process's
run.finish()
print(run.id)
