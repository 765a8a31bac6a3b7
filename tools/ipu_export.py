#!/usr/bin/env python3
"""Reader for the steps `ipu run --export-steps N DIR` writes.

The export is a directory: manifest.json (JSON) and NumPy .npy files, so
numpy.load reads any tensor on its own. This module loads the whole export
into dictionaries of arrays, checking every file against the manifest
(format, completeness, dtype, shape). It needs only NumPy.

    import ipu_export
    ex = ipu_export.load("DIR")
    ex.manifest["optimizer"]["kind"]      # "lamb", "adamw", ...
    ex.initial["embedding.word"]          # float32 array, the weights before step 1
    s = ex.steps[0]                       # step 1
    s.lr, s.loss, s.loss_scale, s.clip_factor, s.updates, s.skipped
    s.batch["tokens"]                     # int32 [global_batch, seq_len]
    s.gradients["embedding.word"]         # reduced, unscaled, before clipping
    s.weights["embedding.word"]           # after the optimizer step
    s.optimizer_state["m"]["embedding.word"]
    s.running_statistics["running_mean/stem.conv.norm"]   # batch norm, after the step ({} without)
    ex.param_class("encoder[0].attention.bq")   # "bias" (for `exclude` lists)
    ex.vocabulary[4]                      # "[MASK]"

Run as a script, it prints a summary of an export:

    python3 tools/ipu_export.py DIR

The format is documented in docs/emulator.md, "Exporting steps".
"""
import json
import os
import sys

import numpy as np

FORMAT = "ipu-export/1"


class ExportError(Exception):
    """The directory is not a complete export, or a file disagrees with the manifest."""


class Step:
    """One exported step: its manifest record and its tensors."""

    def __init__(self, record, batch, gradients, weights, optimizer_state, running_statistics):
        self.record = record
        self.step = record["step"]
        self.lr = record["lr"]
        self.loss = record["loss"]
        self.loss_scale = record["loss_scale"]
        self.skipped = record["skipped"]
        self.clip_factor = record["clip_factor"]
        self.updates = record["updates"]
        self.metrics = record["metrics"]
        self.batch_counts = record["batch_counts"]
        self.batch = batch
        self.gradients = gradients
        self.weights = weights
        self.optimizer_state = optimizer_state
        self.running_statistics = running_statistics


class Export:
    def __init__(self, directory, manifest, initial, steps, vocabulary):
        self.directory = directory
        self.manifest = manifest
        self.initial = initial
        self.steps = steps
        self.vocabulary = vocabulary
        self._classes = {p["name"]: p["class"] for p in manifest["parameters"]}

    def param_class(self, name):
        """weight, bias, norm or embedding: the class an optimizer's `exclude` names."""
        return self._classes[name]

    def excluded(self, name):
        """Whether the optimizer gives this parameter no weight decay and no trust ratio."""
        return self._classes[name] in self.manifest["optimizer"]["exclude"]


def _tensor(directory, entry, mmap_mode):
    path = os.path.join(directory, entry["file"])
    try:
        array = np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ExportError(f"{path}: {e}") from e
    if str(array.dtype) != entry["dtype"] or list(array.shape) != list(entry["shape"]):
        raise ExportError(f"{path} is {array.dtype} {list(array.shape)}, the manifest says "
                          f"{entry['dtype']} {entry['shape']}")
    return array


def _tensors(directory, entries, mmap_mode):
    return {name: _tensor(directory, entry, mmap_mode) for name, entry in entries.items()}


def load(directory, mmap_mode=None):
    """Load the export in `directory`. mmap_mode="r" maps the files instead of reading them."""
    path = os.path.join(directory, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise ExportError(f"{path}: {e}") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ExportError(f"{path} is not an export of format {FORMAT}")
    if not manifest.get("complete"):
        raise ExportError(f"{directory} holds an export that did not finish (interrupted); export again")
    initial = _tensors(directory, manifest["initial"], mmap_mode)
    steps = []
    for record in manifest["steps"]:
        state = {kind: _tensors(directory, entries, mmap_mode) for kind, entries in record["optimizer_state"].items()}
        steps.append(Step(record, _tensors(directory, record["batch"], mmap_mode),
                          _tensors(directory, record["gradients"], mmap_mode),
                          _tensors(directory, record["weights"], mmap_mode), state,
                          _tensors(directory, record.get("running_statistics", {}), mmap_mode)))
    vocabulary = None
    if "vocabulary" in manifest["data"]:
        # One token a line. Tokens are bytes (a byte of a multi-byte character
        # can be a token of its own); surrogateescape keeps them reversible:
        # token.encode("utf-8", "surrogateescape") gives the bytes back.
        with open(os.path.join(directory, manifest["data"]["vocabulary"]), "rb") as f:
            vocabulary = [w.decode("utf-8", "surrogateescape") for w in f.read().split(b"\n")[:-1]]
        if len(vocabulary) != manifest["data"]["vocabulary_size"]:
            raise ExportError(f"the vocabulary has {len(vocabulary)} tokens, the manifest says "
                              f"{manifest['data']['vocabulary_size']}")
    return Export(directory, manifest, initial, steps, vocabulary)


def main(argv):
    if len(argv) != 2:
        print("usage: ipu_export.py DIR", file=sys.stderr)
        return 2
    try:
        ex = load(argv[1])
    except ExportError as e:
        print(f"ipu_export.py: {e}", file=sys.stderr)
        return 1
    m = ex.manifest
    print(f"training {m['training']}, phase {m['phase']}, model {m['model']} ({m['family']}), seed {m['seed']}")
    print(f"optimizer {m['optimizer']['kind']}, precision: compute {m['precision']['compute']}, "
          f"weights {m['precision']['weights']}; mapping {m['mapping']['name']}: "
          f"{m['mapping']['replicas']} replica(s), global batch {m['mapping']['global_batch']}")
    print(f"{len(ex.initial)} parameters, "
          f"{sum(int(np.prod(a.shape)) for a in ex.initial.values())} values")
    for s in ex.steps:
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in s.batch.items())
        print(f"step {s.step}: loss {s.loss:.6g}, lr {s.lr:.6g}, loss scale {s.loss_scale:g}"
              f"{' (skipped)' if s.skipped else ''}; batch: {shapes}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
