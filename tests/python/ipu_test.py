"""The Python module `ipu` (docs/python.md), end to end against the `ipu`
command: scripts (check, plan, estimate, search, mapping values, fmt), stores
(runs, filters, frames, metrics, sweeps, tags, notes), measured runs logged
with ipu.start_run and set beside estimates by `ipu runs compare`, from two
processes at once into one SQLite store and into PostgreSQL.

Environment: IPU (the `ipu` binary), IPU_ROOT (the source tree),
IPU_SWEEP_FIXTURE (ipu_sweep_report_fixture); PYTHONPATH has build/python."""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

import ipu

IPU = os.environ["IPU"]
ROOT = os.environ["IPU_ROOT"]
TINY = os.path.join(ROOT, "examples", "tiny_bert.ipu")
HERE = os.path.dirname(os.path.abspath(__file__))


def read(path):
    with open(path) as f:
        return f.read()


def cli(*args, check=True):
    r = subprocess.run([IPU, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"ipu {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


def same(a, b, path="$"):
    """Documents equal, numbers to the ten significant digits the CLI prints
    (ir::canonicalNumber); returns the first difference or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            d = same(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, bool) or isinstance(b, bool):
        return None if a == b else f"{path}: {a!r} != {b!r}"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return None if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300) else f"{path}: {a!r} != {b!r}"
    return None if a == b else f"{path}: {a!r} != {b!r}"


class ScriptTest(unittest.TestCase):
    def test_check_gives_the_diagnostics_of_ipu_check(self):
        bad = os.path.join(ROOT, "tests", "diagnostics", "IPU1005_unknown_field.ipu")
        got = ipu.load(bad).check()
        want = json.loads(cli("check", "--json", bad, check=False).stdout)["diagnostics"]
        self.assertEqual([(d.code, d.severity, d.message, d.file, d.line, d.column) for d in got],
                         [(d["code"], d["severity"], d["message"], d["file"], d["line"], d["column"]) for d in want])
        self.assertEqual(got[0].code, "IPU1005")
        self.assertIn("IPU1005", repr(got[0]))
        self.assertEqual(ipu.load(TINY).check(), [])

    def test_errors_are_exceptions_with_code_and_location(self):
        bad = os.path.join(ROOT, "tests", "diagnostics", "IPU1005_unknown_field.ipu")
        first = json.loads(cli("check", "--json", bad, check=False).stdout)["diagnostics"][0]
        for call in (lambda s: s.plan(), lambda s: s.estimate(), lambda s: s.mapping()):
            with self.assertRaises(ipu.IpuError) as e:
                call(ipu.load(bad))
            self.assertEqual((e.exception.code, e.exception.file, e.exception.line, e.exception.column),
                             (first["code"], first["file"], first["line"], first["column"]))
            self.assertTrue(any(d.code == "IPU1005" for d in e.exception.diagnostics))
        with self.assertRaises(ipu.IpuError) as e:
            ipu.load(os.path.join(ROOT, "no_such_script.ipu"))
        self.assertEqual(e.exception.code, "IPU0011")
        uncalibrated = os.path.join(ROOT, "tests", "diagnostics", "IPU3001_uncalibrated_chip.ipu")
        with self.assertRaises(ipu.IpuError) as e:
            ipu.load(uncalibrated).estimate()
        self.assertEqual(e.exception.code, "IPU3001")

    def test_plan_and_estimate_are_the_cli_documents(self):
        s = ipu.load(TINY)
        plan = s.plan()
        self.assertEqual(plan["format"], "ipu-plan/1")
        self.assertIsNone(same(plan, json.loads(cli("plan", "--json", TINY).stdout)))
        est = s.estimate()
        self.assertEqual(est["format"], "ipu-estimate/1")
        self.assertIsNone(same(est, json.loads(cli("estimate", "--json", "--no-store", TINY).stdout)))

    def test_mapping_values_vary_fields_without_script_text(self):
        s = ipu.load(TINY)
        m = s.mapping(phase="long")
        self.assertTrue(m.as_written)
        self.assertEqual((m.run, m.phase), ("tiny_pretrain", "long"))
        self.assertEqual(m.fields()["settings"]["replicas"], "2")
        one = m.with_(replicas=1)
        self.assertFalse(one.as_written)
        self.assertEqual(one.fields()["settings"]["replicas"], "1")
        self.assertEqual(m.fields()["settings"]["replicas"], "2", "with_ returns a copy")
        plan = s.plan(mapping=one)
        phases = plan["runs"][0]["phases"]
        self.assertEqual([p["mapping"]["replicas"] for p in phases], [2, 1])
        base = s.estimate()["runs"][0]["phases"][1]
        varied = s.estimate(mapping=one)["runs"][0]["phases"][1]
        self.assertLess(varied["throughput_samples_per_s"], base["throughput_samples_per_s"])
        # The same variant written as a script plans alike (session/variant.h).
        with tempfile.TemporaryDirectory() as d:
            text = read(TINY).replace("  replicas: 2\n", "  replicas: 1\n", 1)
            path = os.path.join(d, "tiny_one.ipu")
            with open(path, "w") as f:
                f.write(text)
            written = ipu.load(path).estimate()["runs"][0]["phases"][1]
        self.assertAlmostEqual(written["throughput_samples_per_s"], varied["throughput_samples_per_s"], delta=1e-9 * varied["throughput_samples_per_s"])
        self.assertEqual(s.with_(replicas=1).phase, "short")
        with self.assertRaises(ipu.IpuError) as e:
            m.with_(replicaz=1)
        self.assertIn("no mapping field `replicaz`", str(e.exception))
        with self.assertRaises(ipu.IpuError):
            m.with_(recompute="sometimes")
        other = ipu.load(os.path.join(ROOT, "examples", "tiny_gpt.ipu"))
        with self.assertRaises(ipu.IpuError) as e:
            other.estimate(mapping=one)
        self.assertIn("the mapping is of", str(e.exception))
        with self.assertRaises(ipu.IpuError) as e:
            s.plan(mapping=m.with_(replicas=4))  # 2 pipeline IPUs x 4 replicas on a 4-IPU pod
        self.assertTrue(e.exception.code.startswith("IPU"))

    def test_search_returns_mappings_that_estimate_as_found(self):
        s = ipu.load(TINY)
        res = s.search(phase="short", top=2, threads=1)
        self.assertEqual(len(res), 1)
        r = res[0]
        self.assertEqual((r["run"], r["phase"]), ("tiny_pretrain", "short"))
        self.assertIsNone(r["error"])
        self.assertGreater(r["counts"]["evaluated"], 0)
        self.assertTrue(1 <= len(r["top"]) <= 2)
        best = r["top"][0]
        self.assertTrue(best["fits"])
        self.assertIsInstance(best["mapping"], ipu.Mapping)
        est = s.estimate(mapping=best["mapping"])["runs"][0]["phases"][0]
        self.assertTrue(math.isclose(est["throughput_samples_per_s"], best["samples_per_s"], rel_tol=1e-9),
                        (est["throughput_samples_per_s"], best["samples_per_s"]))
        self.assertGreaterEqual(best["samples_per_s"], r["declared"]["samples_per_s"] * (1 - 1e-12))
        with self.assertRaises(ipu.IpuError):
            s.search(objective="speed")

    def test_fmt_is_ipu_fmt(self):
        text = read(TINY)
        messy = text.replace("  replicas: 2\n", "  replicas:    2\n")
        self.assertNotEqual(messy, text)
        self.assertEqual(ipu.fmt(messy), text)
        with self.assertRaises(ipu.IpuError) as e:
            ipu.fmt("model m = bert(\n", "broken.ipu")
        self.assertEqual(e.exception.file, "broken.ipu")
        self.assertEqual(e.exception.code[:4], "IPU0")


class WalkthroughTest(unittest.TestCase):
    def test_the_walkthrough_prints_what_it_shows(self):
        """examples/python_walkthrough.py shows its output as `# >` lines
        (docs/python.md copies it): it still prints them, but for the one
        figure measured on this host (the logged samples_per_s)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            self.skipTest("the walkthrough shows a pandas frame; pandas is not installed (python3-pandas)")
        path = os.path.join(ROOT, "examples", "python_walkthrough.py")
        shown = [l[4:] for l in read(path).splitlines() if l.startswith("# > ")]
        r = subprocess.run([sys.executable, path], cwd=ROOT, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        printed = r.stdout.splitlines()
        self.assertEqual(len(printed), len(shown))
        for got, want in zip(printed, shown):
            if got.lstrip().startswith("samples_per_s"):
                self.assertEqual(got.split()[:2], want.split()[:2])  # the predicted figure, not the measured
            else:
                self.assertEqual(got, want)
        self.assertIn(read(path)[read(path).index("import os"):].rstrip(), read(os.path.join(ROOT, "docs", "python.md")))


class StoreTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.db = os.path.join(self.dir.name, "ipu.db")

    def tearDown(self):
        self.dir.cleanup()

    def test_measured_run_beside_its_estimate(self):
        s = ipu.load(TINY)
        est = s.estimate(store=self.db)
        self.assertEqual(len(est["recorded"]), 1)
        store = ipu.Store(self.db)
        # The last phase: `ipu runs compare` sets an estimate's latest value
        # (its last phase's) beside the mean of what the run logged.
        with ipu.start_run(TINY, phase="long", store=store, label="tiny on CPU") as run:
            self.assertEqual(run.plan_hash, store.run(est["recorded"][0])["plan_hash"])
            for step in range(1, 11):
                run.log(step, loss=2.0 / step, samples_per_s=50.0 + step)
        rec = store.run(run.id)
        self.assertEqual((rec["kind"], rec["status"]), ("run", "finished"))
        self.assertEqual(rec["parameters"]["source"], "measured")
        self.assertEqual(rec["parameters"]["measured.phase"], "long")
        self.assertEqual(rec["parameters"]["measured.label"], "tiny on CPU")
        self.assertEqual(rec["metrics"]["loss"]["count"], 10)
        self.assertEqual(rec["script"], read(TINY))
        out = cli("runs", "compare", str(est["recorded"][0]), str(run.id), "--store", self.db).stdout
        self.assertIn(f"predicted (estimate {est['recorded'][0]}) against measured (run {run.id})", out)
        compared = json.loads(cli("runs", "compare", str(est["recorded"][0]), str(run.id), "--store", self.db, "--json").stdout)
        pvm = compared["predicted_vs_measured"][0]["metrics"]["samples_per_s"]
        self.assertAlmostEqual(pvm["measured_mean"], 55.5)
        self.assertAlmostEqual(pvm["predicted"], est["runs"][0]["phases"][1]["throughput_samples_per_s"], delta=1e-6 * pvm["predicted"])

        # `ipu report` draws the measured run beside the estimate.
        html = os.path.join(self.dir.name, "report.html")
        self.assertIn("wrote " + html + ": 2 runs", cli("report", "--store", self.db, "-o", html).stderr)
        self.assertIn(run.name, read(html))

        # A varied mapping: its own plan hash, that of an estimate of the same variant.
        one = s.mapping(phase="long").with_(replicas=1)
        est1 = s.estimate(mapping=one, store=store)
        run1 = ipu.start_run(s, mapping=one, store=store)
        run1.log(1, samples_per_s=10.0)
        run1.finish()
        self.assertEqual(store.run(run1.id)["plan_hash"], store.run(est1["recorded"][0])["plan_hash"])
        self.assertNotEqual(run1.plan_hash, run.plan_hash)
        self.assertIn("measured.mapping", store.run(run1.id)["parameters"])
        # A dict of fields is the same mapping.
        run2 = ipu.start_run(TINY, mapping={"replicas": 1}, phase="long", store=store)
        run2.finish("stopped", "enough")
        self.assertEqual(run2.plan_hash, run1.plan_hash)
        self.assertEqual(store.run(run2.id)["status"], "stopped")

        # Runs, filtered with the --where language, as lists and frames.
        kinds = [(r["id"], r["kind"]) for r in store.runs()]
        self.assertEqual(kinds, [(run2.id, "run"), (run1.id, "run"), (est1["recorded"][0], "estimate"),
                                 (run.id, "run"), (est["recorded"][0], "estimate")])
        measured = store.runs(where="kind = run and source = measured and status = finished")
        self.assertEqual([r["id"] for r in measured], [run1.id, run.id])
        cli_ids = cli("runs", "--store", self.db, "--where", "kind = run and source = measured and status = finished",
                      "--columns", "id", "--csv").stdout.split()[1:]
        self.assertEqual([int(x) for x in cli_ids], [run1.id, run.id])
        with self.assertRaises(ipu.IpuError) as e:
            store.runs(where="kind = = run")
        self.assertIn("--where", str(e.exception))
        points = store.metrics(run.id, "loss")
        self.assertEqual([(p["step"], p["value"]) for p in points], [(i, 2.0 / i) for i in range(1, 11)])
        self.assertEqual(len(store.metrics(run.id)), 20)

        store.tag(run.id, "cpu", "baseline")
        store.untag(run.id, "baseline")
        store.note(run.name, "a CPU stands in for the IPU")
        rec = store.run(run.id)
        self.assertEqual((rec["tags"], rec["note"]), (["cpu"], "a CPU stands in for the IPU"))
        self.assertEqual([r["id"] for r in store.runs(where="tag = cpu")], [run.id])
        with self.assertRaises(ipu.IpuError):
            store.tag(run.id, "two words")
        with self.assertRaises(ipu.StoreError):
            store.run(9999)

        try:
            import pandas  # noqa: F401
        except ImportError:
            # Without pandas (./dev test installs python3-pandas), frames say what they need.
            with self.assertRaisesRegex(ImportError, "needs pandas"):
                store.runs(frame=True)
            return
        frame = store.runs(where="kind = run", frame=True)
        self.assertEqual(list(frame["id"]), [run2.id, run1.id, run.id])
        self.assertEqual(frame.loc[frame["id"] == run.id, "mapping.replicas"].item(), "2")
        self.assertEqual(frame.loc[frame["id"] == run.id, "loss"].item(), 0.2)
        curves = store.metrics(run.id, frame=True)
        self.assertEqual(list(curves.columns), ["loss", "samples_per_s"])
        self.assertEqual(curves.loc[4, "samples_per_s"], 54.0)

    def test_sweeps(self):
        self.assertEqual(ipu.Store(self.db).sweeps(), [])
        fixture = os.environ["IPU_SWEEP_FIXTURE"]
        subprocess.run([fixture, self.db, "lr sweep"], check=True, capture_output=True)
        sweeps = ipu.Store(self.db).sweeps()
        self.assertEqual([s["name"] for s in sweeps], ["lr sweep", "empty_sweep"])  # the fixture's two
        self.assertEqual(sweeps[0]["spec"]["name"], "lr sweep")
        self.assertEqual(len(sweeps[0]["trials"]), 24)
        try:
            import pandas  # noqa: F401
        except ImportError:
            return  # frames without pandas: test_measured_run_beside_its_estimate
        frame = ipu.Store(self.db).sweeps(frame=True)
        self.assertEqual(len(frame), 24 + len(sweeps[1]["trials"]))
        self.assertIn("metric", frame.columns)

    def test_finish_once_and_a_dropped_run(self):
        dropped = ipu.start_run(TINY, store=self.db)
        dropped.log(1, loss=3.0)
        dropped_id = dropped.id
        del dropped
        import gc
        gc.collect()
        rec = ipu.Store(self.db).run(dropped_id)
        self.assertEqual((rec["status"], rec["stop_reason"], rec["metrics"]["loss"]["count"]), ("failed", "ended without finish()", 1))
        run = ipu.start_run(TINY, store=self.db)
        run.log(1, loss=float("nan"), samples_per_s=3.0)
        rid = run.id
        run.finish()
        run.finish()  # twice is once
        with self.assertRaises(ipu.IpuError):
            run.log(2, loss=1.0)
        store = ipu.Store(self.db)
        self.assertIsNone(store.metrics(rid, "loss")[0]["value"])
        with self.assertRaises(ipu.IpuError):
            ipu.start_run(TINY, phase="no_such_phase", store=self.db)
        with self.assertRaises(ipu.IpuError):
            run.finish("exploded")

    def _two_processes(self, location):
        workers = [subprocess.Popen([sys.executable, os.path.join(HERE, "log_worker.py"), TINY, location, "300", tag],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for tag in ("a", "b")]
        ids = []
        for w in workers:
            out, err = w.communicate(timeout=300)
            self.assertEqual(w.returncode, 0, err)
            ids.append(int(out))
        store = ipu.Store(location)
        self.assertEqual(len(set(ids)), 2)
        for rid, tag in zip(ids, ("a", "b")):
            rec = store.run(rid)
            self.assertEqual((rec["status"], rec["parameters"]["worker"]), ("finished", tag))
            self.assertEqual(rec["metrics"]["loss"]["count"], 300)
            self.assertEqual(rec["metrics"]["samples_per_s"]["last"], 400.0)
        self.assertEqual(sorted(r["id"] for r in store.runs(where="kind = run")), sorted(ids))

    def test_two_processes_log_into_one_sqlite_store(self):
        self._two_processes(self.db)

    def test_two_processes_log_into_postgresql(self):
        sys.path.insert(0, HERE)
        from postgres import PostgresServer
        server = PostgresServer()
        try:
            self._two_processes(server.uri)
            ids = [r["id"] for r in ipu.Store(server.uri).runs()]
            out = cli("runs", "--store", server.uri, "--where", "worker = a", "--columns", "id", "--csv").stdout.split()[1:]
            self.assertEqual(len(out), 1)
            self.assertIn(int(out[0]), ids)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
