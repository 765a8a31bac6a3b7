"""ipu from Python: plan, price and track trainings of .ipu scripts.

The engine is the C++ one `ipu` uses (the extension ipu._ipu); this package
adds what is easier in Python: pandas frames, run ids as ints, and context
managers. docs/python.md documents the API with a walkthrough.

    import ipu
    script = ipu.load("examples/bert_large_pod16.ipu")
    script.check()                                  # [Diagnostic, ...]
    script.estimate()["runs"][0]["phases"][0]["samples_per_s"]
    script.estimate(mapping=script.with_(replicas=2))
"""

from ._ipu import Diagnostic, IpuError, Mapping, Script, StoreError, fmt
from . import _ipu

__all__ = ["Diagnostic", "IpuError", "StoreError", "Mapping", "Script", "Store", "Run",
           "load", "fmt", "start_run"]


def load(path):
    """The script at `path` (raises IpuError when it cannot be read)."""
    return Script(str(path))


def _frame(rows, name):
    try:
        import pandas
    except ImportError as e:
        raise ImportError(f"{name}(frame=True) needs pandas (Debian: python3-pandas)") from e
    return pandas.DataFrame(rows)


def _flat(run):
    """A run as one row: its fields, each parameter under its own name, and
    each metric's latest value under the metric's name (as `ipu runs` shows)."""
    row = {k: v for k, v in run.items() if k not in ("parameters", "metrics", "tags", "script", "artifacts")}
    row["tags"] = ",".join(run["tags"])
    for k, v in run["parameters"].items():
        row[k] = v
    for k, v in run["metrics"].items():
        row[k] = v["last"]
    return row


class Store:
    """The run store at a path (SQLite) or a postgresql:// URI; None: $IPU_STORE,
    else runs/ipu.db, as the CLI records by default."""

    def __init__(self, location=None, create=True):
        self._store = _ipu.Store(None if location is None else str(location), create)

    @property
    def location(self):
        return self._store.location

    def __fspath__(self):
        return self._store.location

    def __repr__(self):
        return f"ipu.Store({self.location!r})"

    def runs(self, where=None, frame=False):
        """Runs and estimates, newest first; `where` in the language of
        `ipu runs --where` (e.g. "kind = run and mapping.replicas >= 4").
        frame=True: a pandas DataFrame, one row per run."""
        rows = self._store.runs(where)
        return _frame([_flat(r) for r in rows], "runs") if frame else rows

    def run(self, run):
        """One run by id or name, with its script and artifacts."""
        return self._store.run(str(run))

    def metrics(self, run, key="", frame=False):
        """A run's metric points (key, step, value, time); frame=True: a
        DataFrame with a column per key, indexed by step."""
        rows = self._store.metrics(str(run), key)
        if not frame:
            return rows
        df = _frame(rows, "metrics")
        if df.empty:
            return df
        return df.pivot_table(index="step", columns="key", values="value", aggfunc="last")

    def sweeps(self, frame=False):
        """Sweeps, oldest first, each with its spec and trials; frame=True: a
        DataFrame of every trial (sweep, index, state, metric, run_id and the
        assignment's values as columns)."""
        rows = self._store.sweeps()
        if not frame:
            return rows
        trials = []
        for s in rows:
            for t in s["trials"]:
                row = {"sweep": s["name"]}
                row.update({k: v for k, v in t.items() if k != "assignment"})
                row.update(t["assignment"])
                trials.append(row)
        return _frame(trials, "sweeps")

    def tag(self, run, *tags):
        self._store.tag(str(run), *tags)

    def untag(self, run, *tags):
        self._store.untag(str(run), *tags)

    def note(self, run, text):
        self._store.note(str(run), text)


class Run:
    """A training measured outside ipu, being recorded (see start_run).
    A context manager: leaving the block finishes it, `failed` on an exception."""

    def __init__(self, run):
        self._run = run

    id = property(lambda self: self._run.id)
    name = property(lambda self: self._run.name)
    plan_hash = property(lambda self: self._run.plan_hash)
    store = property(lambda self: self._run.store)

    def log(self, step, **metrics):
        """Record metrics at a global step: run.log(step, loss=..., samples_per_s=...)."""
        self._run.log(int(step), **metrics)

    def flush(self):
        self._run.flush()

    def finish(self, status="finished", reason=""):
        self._run.finish(status, reason)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        if kind is None:
            self.finish()
        elif issubclass(kind, KeyboardInterrupt):
            self.finish("stopped", "interrupted")
        else:
            self.finish("failed", f"{kind.__name__}: {value}")
        return False

    def __repr__(self):
        return f"<ipu.Run {self.name} plan {self.plan_hash} in {self.store}>"


def start_run(script, mapping=None, phase=None, store=None, run=None, label=None, parameters=None):
    """Start recording a real training as the plan `script` declares.

    script: a path or an ipu.Script; mapping: None (as written), an
    ipu.Mapping (script.with_(replicas=8)) or a dict of fields; phase and run:
    names (the first by default); store: a path, a postgresql:// URI, an
    ipu.Store, or None ($IPU_STORE, else runs/ipu.db); label: the row's name
    for `ipu calibrate --store`; parameters: more str -> str parameters.
    """
    path = script.path if isinstance(script, Script) else str(script)
    if isinstance(mapping, dict):
        mapping = Script(path).mapping(run or "", phase or "").with_(**mapping)
    if isinstance(store, Store):
        store = store.location
    return Run(_ipu.start_run(path, mapping, phase or "", None if store is None else str(store), run or "", label or "",
                              {str(k): str(v) for k, v in (parameters or {}).items()}))
