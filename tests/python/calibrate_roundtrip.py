"""Calibration from measured runs (issue 35): the rows of the published
table logged as measured runs through the Python module, then
`ipu calibrate --store` fits them and writes the same module, byte for byte,
as `ipu calibrate` on the table itself.

    calibrate_roundtrip.py [ROWS]   the first ROWS rows (default: all)

Environment: IPU (the `ipu` binary), IPU_ROOT; PYTHONPATH has build/python."""

import csv
import os
import subprocess
import sys
import tempfile

import ipu

IPU = os.environ["IPU"]
ROOT = os.environ["IPU_ROOT"]
TABLE = os.path.join(ROOT, "tests", "published", "published.csv")


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else None
    with open(TABLE, newline="") as f:
        rows = list(csv.DictReader(f))[:limit]
    failures = []
    with tempfile.TemporaryDirectory() as d:
        table = os.path.join(d, "published.csv")
        if limit is None:
            table = TABLE
        else:
            with open(table, "w", newline="") as f:
                w = csv.writer(f, lineterminator="\n")
                w.writerow(["label", "script", "run", "phase", "samples_per_s"])
                for r in rows:
                    w.writerow([r["label"], os.path.join(ROOT, "tests", "published", r["script"]), r["run"], r["phase"], r["samples_per_s"]])
        db = os.path.join(d, "measured.db")
        store = ipu.Store(db)
        # An estimate and an emulator-like run that is not measured: neither is fitted.
        ipu.load(os.path.join(ROOT, "examples", "tiny_bert.ipu")).estimate(store=store)
        for r in rows:
            run = ipu.start_run(os.path.join(ROOT, "tests", "published", r["script"]), run=r["run"] or None,
                                phase=r["phase"] or None, store=store, label=r["label"], parameters={"table": "published"})
            run.log(1, samples_per_s=float(r["samples_per_s"]))
            run.finish()
        # One more measured run the filter leaves out.
        stray = ipu.start_run(os.path.join(ROOT, "tests", "published", rows[0]["script"]), store=store, label="stray")
        stray.log(1, samples_per_s=1.0)
        stray.finish()

        from_table = os.path.join(d, "from_table.ipu")
        from_store = os.path.join(d, "from_store.ipu")
        # The whole table's own fit is stdlib/calibration.ipu (cli.tests checks
        # that `ipu calibrate` on it writes exactly that file): compared with
        # it, not fitted again, since a fit of all 46 rows takes minutes.
        if limit is None:
            t = subprocess.CompletedProcess([], 0, "", None)
            with open(os.path.join(ROOT, "stdlib", "calibration.ipu"), "rb") as src, open(from_table, "wb") as dst:
                dst.write(src.read())
        else:
            t = subprocess.run([IPU, "calibrate", table, "-o", from_table], capture_output=True, text=True)
        s = subprocess.run([IPU, "calibrate", "--store", db, "--where", "table = published", "--name", "published.csv",
                            "-o", from_store], capture_output=True, text=True)
        if t.returncode != 0 or s.returncode != 0:
            failures.append(f"calibrate exited {t.returncode} (table), {s.returncode} (store): {t.stderr}\n{s.stderr}")
        else:
            if open(from_table, "rb").read() != open(from_store, "rb").read():
                failures.append("the module fitted on the store differs from the table's")
            # The residuals and the three errors, as printed.
            strip = lambda text: [l for l in text.splitlines() if not l.startswith("wrote ")]
            if t.stderr is not None and strip(t.stderr) != strip(s.stderr):
                failures.append(f"printed errors differ:\n{t.stderr}\n---\n{s.stderr}")
            if "leave-one-group-out" not in s.stderr:
                failures.append("no leave-one-group-out error printed")
            if limit is None:
                committed = open(os.path.join(ROOT, "stdlib", "calibration.ipu"), "rb").read()
                if open(from_store, "rb").read() != committed:
                    failures.append("the store's fit is not stdlib/calibration.ipu")
        # Without --name the module says what it was fitted on (checked on a
        # few rows: the whole table's fit takes minutes and is the same code).
        if limit is not None:
            named = os.path.join(d, "named.ipu")
            s = subprocess.run([IPU, "calibrate", "--store", db, "--where", "table = published", "-o", named],
                               capture_output=True, text=True)
            if s.returncode != 0 or "fitted by `ipu calibrate` on measured runs of measured.db" not in open(named).read():
                failures.append(f"the default name: {s.stderr}")
        # A filter that keeps nothing, and --where without --store.
        s = subprocess.run([IPU, "calibrate", "--store", db, "--where", "table = other"], capture_output=True, text=True)
        if s.returncode != 1 or "no finished measured run matches" not in s.stderr:
            failures.append(f"an empty selection: {s.returncode} {s.stderr}")
        s = subprocess.run([IPU, "calibrate", "--where", "table = other"], capture_output=True, text=True)
        if s.returncode != 2:
            failures.append(f"--where without --store exited {s.returncode}")
    for f in failures:
        print("FAIL:", f)
    print(f"calibration round trip over {len(rows)} rows: {'failed' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
