#!/usr/bin/env python3
"""Checks an `ipu run --export-steps` export the way a user would: through
the documented reader (tools/ipu_export.py) and code of our own, never the
emulator's.

  export_check.py check DIR [CHECKPOINT_DIR]
      - the manifest: every tensor listed, shapes, the learning rate of each
        step from the documented schedule;
      - the batch: shapes, attention ids, positions, [CLS]/[SEP] layout, NSP
        labels exactly at the [CLS] rows, masked positions (80% [MASK], the
        rest random or kept words, never elsewhere), and the MLM labels are
        the original text: with them put back, every sentence A and B is a
        run of consecutive tokens of the corpus, tokenised here from the
        corpus files;
      - the gradients: the tiny BERT written in PyTorch
        (torch_crosscheck.py's model) from the exported weights and global
        batch gives the exported loss and gradients, at every step;
      - the optimizer: LAMB or AdamW, written here in NumPy from its
        definition, applied to the exported weights, gradients and learning
        rate, gives the exported weights and moments after each step;
      - GPT: windows whose labels are the next tokens; MLP: the network in
        PyTorch gives the exported loss and gradients;
      - with CHECKPOINT_DIR (the run's checkpoints/<phase>), the exported
        weights after step k are bit for bit the run's own checkpoint of
        step k: the export is what `ipu run` trained.
  export_check.py compare DIR_A DIR_B
      Two exports of the same training under different mappings: identical
      initial weights and batches, loss, gradients and weights within the
      reduction-order tolerance (docs/emulator.md, "Determinism").

Exit status 0 when everything holds; every failure is printed.
"""
import math
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import ipu_export  # noqa: E402  (the documented reader)

# Tolerances. PyTorch's side is evaluated in float64 from the exported fp32
# weights and batches, and the export's fp32 losses and gradients must be
# within the cross-checks' tolerances of it, derived from fp32 rounding
# (crosscheck_reference.py: losses 128 U relative, gradients of each
# tensor's largest element, U = 2^-24), but for gradients 4 times the
# cross-checks' 256 U: these runs go on for two steps on batches of 8
# samples, and at step 2 the NSP classifier's gradient is a sum over the 8
# samples that cancels to 1/34 of the step before, while its rounding error
# stays that of its terms (measured 282 U of the result). Still below a 1e-4
# error (1,678 U). Weights after an optimizer step written in float64 NumPy to
# 2e-6 absolute, 100x below one step's change.
from crosscheck_reference import GRAD_FLOOR, LOSS_RTOL  # noqa: E402
from crosscheck_reference import GRAD_RTOL as CROSSCHECK_GRAD_RTOL  # noqa: E402
GRAD_RTOL = 4 * CROSSCHECK_GRAD_RTOL
WEIGHT_ATOL = 2e-6
MOMENT_RTOL = 1e-4
# Two mappings of one global batch: the sums run in another order (replicas'
# ring instead of micro batches in order), a few ulp per sum; the emulator's
# mapping-invariance tests allow 2e-5 relative (docs/emulator.md,
# "Determinism"). Gradients relative to each tensor's largest element (floor:
# 1e-3 of the model's largest gradient); weights in absolute terms, as for the
# optimizer: an element whose exact gradient is 0 (the key bias's) moves by
# rounding noise that two orders of summation do not share, so a relative
# measure means nothing there, while 2e-6 is still 100x below one step's change.
MAPPING_RTOL = 2e-5
MAPPING_WEIGHT_ATOL = 2e-6

failures = []


def fail(message):
    failures.append(message)


# ------------------------------------------------------------------ manifest

def expected_lr(sched, step_index, phase_steps):
    """The documented schedule (docs/language.md): linear warmup to the peak, then the decay."""
    peak, warmup = sched["peak"], max(0.0, sched["warmup_steps"])
    s = float(step_index)
    if s < warmup:
        return peak * (s + 1) / warmup
    decay_steps = phase_steps - warmup
    if sched["decay"] == "constant":
        return peak
    progress = min(max((s - warmup) / decay_steps, 0.0), 1.0)
    span = peak - sched["end"]
    if sched["decay"] == "linear":
        return sched["end"] + span * (1 - progress)
    if sched["decay"] == "cosine":
        return sched["end"] + span * 0.5 * (1 + math.cos(math.pi * progress))
    raise ValueError("schedule not covered by this test: " + sched["decay"])


def check_manifest(ex):
    m = ex.manifest
    names = [p["name"] for p in m["parameters"]]
    if sorted(names) != sorted(ex.initial):
        fail("initial weights and the parameter list differ")
    for p in m["parameters"]:
        if list(ex.initial[p["name"]].shape) != p["shape"]:
            fail(f"{p['name']}: shape {ex.initial[p['name']].shape}, the parameter list says {p['shape']}")
    if len(ex.steps) != m["exported_steps"]:
        fail(f"{len(ex.steps)} steps, the manifest says {m['exported_steps']}")
    for s in ex.steps:
        for kind in ("gradients", "weights"):
            if sorted(getattr(s, kind)) != sorted(names):
                fail(f"step {s.step}: {kind} do not cover every parameter")
        want = expected_lr(m["lr_schedule"], s.step - 1, m["phase_steps"])
        if abs(s.lr - want) > 1e-12 * max(1.0, abs(want)):
            fail(f"step {s.step}: lr {s.lr!r}, the documented schedule gives {want!r}")


# ------------------------------------------------------------------ batch

def corpus_tokens(corpus_path, vocabulary):
    """The corpus as token ids, tokenised as docs/emulator.md ("Data") says,
    files in name order: lower-cased words of letters, digits and bytes from
    0x80 with inner apostrophes; every other non-space byte a token."""
    if os.path.isdir(corpus_path):
        files = sorted(os.path.join(corpus_path, f) for f in os.listdir(corpus_path) if f.endswith(".txt"))
    else:
        files = [corpus_path]
    ids = {w.encode("utf-8", "surrogateescape"): i for i, w in enumerate(vocabulary)}
    unk = 1
    word = rb"[A-Za-z0-9\x80-\xff]+(?:'[A-Za-z0-9\x80-\xff]+)*"
    pattern = re.compile(word + rb"|[^\s]")
    out = []
    for f in files:
        with open(f, "rb") as fh:
            for tok in pattern.findall(fh.read()):
                out.append(ids.get(tok.lower(), unk))
    return np.array(out, dtype=np.int64)


def find_run(stream, index, run):
    """Whether `run` (a list of ids) occurs as consecutive tokens of `stream`."""
    if len(run) < 3:
        return True  # too short to be evidence either way
    key = tuple(run[:3])
    for at in index.get(key, ()):
        if at + len(run) <= len(stream) and np.array_equal(stream[at:at + len(run)], run):
            return True
    return False


def check_batch(ex):
    m = ex.manifest
    sp = m["data"]["special_tokens"]
    PAD, CLS, SEP, MASK = sp["pad"], sp["cls"], sp["sep"], sp["mask"]
    GB, S = m["mapping"]["global_batch"], m["data"]["seq_len"]
    vocab = len(ex.vocabulary)
    stream = corpus_tokens(m["data"]["corpus"], ex.vocabulary)
    index = {}
    for i in range(len(stream) - 2):
        index.setdefault((int(stream[i]), int(stream[i + 1]), int(stream[i + 2])), []).append(i)
    masked = replaced = kept = found = checked = 0
    for s in ex.steps:
        b = s.batch
        for name in ("tokens", "segments", "positions", "sequence_ids", "mlm_labels", "nsp_labels"):
            if b[name].shape != (GB, S) or b[name].dtype != np.int32:
                fail(f"step {s.step}: batch {name} is {b[name].dtype} {b[name].shape}, expected int32 {(GB, S)}")
                return
        tok, seg, pos, sid, mlm, nsp = (b[k].astype(np.int64) for k in
                                        ("tokens", "segments", "positions", "sequence_ids", "mlm_labels", "nsp_labels"))
        if int((mlm >= 0).sum()) != s.batch_counts["mlm_count"]:
            fail(f"step {s.step}: {(mlm >= 0).sum()} MLM labels, mlm_count {s.batch_counts['mlm_count']}")
        if int((nsp >= 0).sum()) != s.batch_counts["nsp_count"]:
            fail(f"step {s.step}: {(nsp >= 0).sum()} NSP labels, nsp_count {s.batch_counts['nsp_count']}")
        if not np.array_equal(nsp >= 0, tok == CLS):
            fail(f"step {s.step}: NSP labels are not exactly at the [CLS] rows")
        if not set(np.unique(nsp[nsp >= 0])) <= {0, 1}:
            fail(f"step {s.step}: NSP labels other than 0 and 1")
        if np.any(tok[mlm < 0] == MASK):
            fail(f"step {s.step}: [MASK] where no MLM label is")
        labels = mlm[mlm >= 0]
        if np.any(np.isin(labels, [PAD, CLS, SEP, MASK])) or np.any(labels >= vocab):
            fail(f"step {s.step}: MLM labels that are not words")
        at_masked = tok[mlm >= 0]
        masked += int((at_masked == MASK).sum())
        kept += int((at_masked == labels).sum())
        replaced += int(((at_masked != MASK) & (at_masked != labels)).sum())
        restored = np.where(mlm >= 0, mlm, tok)
        for r in range(GB):
            real = sid[r] >= 0
            if not np.all(tok[r][~real] == PAD) or real.sum() == 0 or not np.all(real[:real.sum()]):
                fail(f"step {s.step} sample {r}: padding is not after the text")
                continue
            n = int(real.sum())
            if not np.array_equal(pos[r][:n], np.arange(n)) or np.any(sid[r][:n] != 0):
                fail(f"step {s.step} sample {r}: positions or attention ids of one sequence are wrong")
            seps = np.nonzero(restored[r][:n] == SEP)[0]
            if tok[r][0] != CLS or len(seps) != 2 or seps[1] != n - 1:
                fail(f"step {s.step} sample {r}: not [CLS] A [SEP] B [SEP]")
                continue
            if np.any(seg[r][:seps[0] + 1] != 0) or np.any(seg[r][seps[0] + 1:n] != 1):
                fail(f"step {s.step} sample {r}: segments do not follow [SEP]")
            for part in (restored[r][1:seps[0]], restored[r][seps[0] + 1:n - 1]):
                checked += 1
                found += find_run(stream, index, [int(t) for t in part])
    total = masked + replaced + kept
    print(f"batch: {total} masked positions ({masked} [MASK], {replaced} random, {kept} kept); "
          f"{found} of {checked} sentences found in the corpus with the labels put back")
    if total == 0 or not 0.6 < masked / total < 0.95:
        fail(f"[MASK] makes {masked} of {total} masked positions, expected about 80%")
    if found != checked:
        fail(f"{checked - found} of {checked} sentences (labels put back) are not text of the corpus")


def check_gpt_batch(ex):
    m = ex.manifest
    GB, S = m["mapping"]["global_batch"], m["data"]["seq_len"]
    for s in ex.steps:
        b = s.batch
        if sorted(b) != ["next_tokens", "positions", "sequence_ids", "tokens"]:
            fail(f"step {s.step}: GPT batch arrays {sorted(b)}")
            return
        tok, nxt = b["tokens"], b["next_tokens"]
        if tok.shape != (GB, S) or nxt.shape != (GB, S):
            fail(f"step {s.step}: GPT batch shapes {tok.shape} {nxt.shape}")
            return
        # Each position predicts the token that follows it in the text: the next position's, within the window.
        if not np.array_equal(nxt[:, :-1], tok[:, 1:]):
            fail(f"step {s.step}: next_tokens are not the tokens shifted by one")
        if np.any(nxt[:, -1] < 0) or int((nxt >= 0).sum()) != s.batch_counts["lm_count"]:
            fail(f"step {s.step}: labels missing, or lm_count is not their number")
        if not np.array_equal(b["positions"], np.tile(np.arange(S, dtype=np.int32), (GB, 1))) or np.any(b["sequence_ids"] != 0):
            fail(f"step {s.step}: GPT positions or attention ids")
    print(f"batch: GPT windows of {S} tokens, next tokens shifted by one")


def check_mlp(ex):
    """The MLP of dense layers and a softmax loss, in PyTorch: loss and gradients."""
    import torch
    import torch.nn.functional as F

    m = ex.manifest
    dense = [l for l in m["layers"] if l["op"] == "dense"]
    before = ex.initial
    worst = 0.0
    for s in ex.steps:
        x = torch.from_numpy(np.array(s.batch["features"], dtype=np.float64))
        y = torch.from_numpy(np.array(s.batch["labels"], dtype=np.int64))
        if tuple(x.shape) != (m["mapping"]["global_batch"], m["data"]["features"]) or y.min() < 0 or y.max() >= m["data"]["classes"]:
            fail(f"step {s.step}: MLP batch {tuple(x.shape)}, labels {int(y.min())}..{int(y.max())}")
            return
        W = {n: torch.from_numpy(np.array(w, dtype=np.float64)).requires_grad_(True) for n, w in before.items()}
        h = x
        for l in dense:
            h = h @ W[l["name"] + ".w"] + W[l["name"] + ".b"]
            act = l["attributes"].get("activation", "gelu")
            h = {"gelu": F.gelu, "relu": F.relu, "tanh": torch.tanh, "none": lambda t: t}[act](h)
        loss = F.cross_entropy(h, y, reduction="sum") / s.batch_counts["class_count"]
        loss.backward()
        if abs(loss.item() - s.loss) > LOSS_RTOL * abs(s.loss):
            fail(f"step {s.step}: loss torch {loss.item():.9g}, export {s.loss:.9g}")
        largest = max(w.grad.abs().max().item() for w in W.values())
        for n, w in W.items():
            scale = max(w.grad.abs().max().item(), GRAD_FLOOR * largest)
            err = (w.grad - torch.from_numpy(np.array(s.gradients[n], dtype=np.float64))).abs().max().item() / scale
            worst = max(worst, err)
            if err > GRAD_RTOL:
                fail(f"step {s.step}: gradient of {n} differs by {err:.3g} of its largest element")
        before = s.weights
    print(f"gradients: the MLP in PyTorch; worst difference {worst:.3g} (relative)")


# ------------------------------------------------------------------ gradients

def check_gradients(ex):
    import torch
    from torch_crosscheck import loss_of

    m = ex.manifest
    layers = sum(1 for l in m["layers"] if l["op"] == "attention")
    heads = int(next(l["attributes"]["heads"] for l in m["layers"] if l["op"] == "attention"))
    sp = m["data"]["special_tokens"]
    worst = 0.0
    before = ex.initial
    for s in ex.steps:
        b = {k: torch.from_numpy(np.array(v, dtype=np.int64)).reshape(-1) for k, v in s.batch.items()}
        mb = {"tokens": b["tokens"], "segments": b["segments"], "positions": b["positions"],
              "sequence_ids": b["sequence_ids"],
              "masked_row": torch.nonzero(b["mlm_labels"] >= 0).reshape(-1),
              "classified_row": torch.nonzero(b["nsp_labels"] >= 0).reshape(-1),
              "samples": s.batch["tokens"].shape[0], "seq": s.batch["tokens"].shape[1],
              "mlm_count": s.batch_counts["mlm_count"], "class_count": s.batch_counts["nsp_count"]}
        mb["masked_label"] = b["mlm_labels"][mb["masked_row"]]
        mb["class_label"] = b["nsp_labels"][mb["classified_row"]]
        assert int(b["tokens"][mb["classified_row"][0]]) == sp["cls"]
        W = {n: torch.from_numpy(np.array(w, dtype=np.float64)).requires_grad_(True) for n, w in before.items()}
        loss = loss_of(W, mb, layers=layers, heads=heads)
        loss.backward()
        if abs(loss.item() - s.loss) > LOSS_RTOL * abs(s.loss):
            fail(f"step {s.step}: loss torch {loss.item():.9g}, export {s.loss:.9g}")
        largest = max(w.grad.abs().max().item() for w in W.values())
        for n, w in W.items():
            scale = max(w.grad.abs().max().item(), GRAD_FLOOR * largest)
            err = (w.grad - torch.from_numpy(np.array(s.gradients[n], dtype=np.float64))).abs().max().item() / scale
            worst = max(worst, err)
            if err > GRAD_RTOL:
                fail(f"step {s.step}: gradient of {n} differs by {err:.3g} of its largest element")
        before = s.weights
    print(f"gradients: PyTorch from the exported weights and batches; worst difference {worst:.3g} (relative)")


# ------------------------------------------------------------------ optimizer

def lamb(w, g, m, v, t, lr, o, excluded):
    b1, b2, eps, wd = o["beta1"], o["beta2"], o["epsilon"], o["weight_decay"]
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mh, vh = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if o["bias_correction"] else (m, v)
    u = mh / (np.sqrt(vh) + eps) + (0.0 if excluded else wd) * w
    wn, un = np.linalg.norm(w), np.linalg.norm(u)
    ratio = 1.0 if excluded or wn == 0 or un == 0 else wn / un
    return w - lr * ratio * u, m, v


def adamw(w, g, m, v, t, lr, o, excluded):
    b1, b2, eps, wd = o["beta1"], o["beta2"], o["epsilon"], o["weight_decay"]
    w = w * (1 - lr * (0.0 if excluded else wd))
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    bc1, bc2 = (1 - b1 ** t, 1 - b2 ** t) if o["bias_correction"] else (1.0, 1.0)
    return w - (lr / bc1) * m / (np.sqrt(v) / math.sqrt(bc2) + eps), m, v


def check_optimizer(ex):
    o = ex.manifest["optimizer"]
    update = {"lamb": lamb, "adamw": adamw}.get(o["kind"])
    if update is None:
        fail("this test re-implements lamb and adamw, not " + o["kind"])
        return
    w = {n: np.array(a, dtype=np.float64) for n, a in ex.initial.items()}
    mom = {n: np.zeros_like(a) for n, a in w.items()}
    vel = {n: np.zeros_like(a) for n, a in w.items()}
    worst = moved = 0.0
    for s in ex.steps:
        if s.skipped:
            fail(f"step {s.step} was skipped (overflow) in an fp32 test")
            continue
        if o["clip_norm"] > 0:
            # docs/emulator.md, "Optimizers": min(1, clip / (norm + 1e-6)), the norm over every parameter once.
            norm = math.sqrt(sum(float((np.array(g, dtype=np.float64) ** 2).sum()) for g in s.gradients.values()))
            want = min(1.0, o["clip_norm"] / (norm + 1e-6))
            if abs(s.clip_factor - want) > 1e-5 * want:
                fail(f"step {s.step}: clip_factor {s.clip_factor!r}, the gradients' norm {norm:.6g} gives {want!r}")
            if s.clip_factor >= 1:
                fail(f"step {s.step}: clipping did not engage (norm {norm:.6g}): the test would prove nothing")
        for n in w:
            g = np.array(s.gradients[n], dtype=np.float64) * s.clip_factor
            w[n], mom[n], vel[n] = update(w[n], g, mom[n], vel[n], s.updates, s.lr, o, ex.excluded(n))
            after = np.array(s.weights[n], dtype=np.float64)
            err = np.abs(w[n] - after).max()
            worst = max(worst, err)
            if err > WEIGHT_ATOL:
                fail(f"step {s.step}: {n} after the {o['kind']} step differs by {err:.3g}")
            before = ex.initial[n] if s.step == 1 else ex.steps[s.step - 2].weights[n]
            moved = max(moved, np.abs(after - before).max())
            for kind, ours in (("m", mom[n]), ("v", vel[n])):
                theirs = np.array(s.optimizer_state[kind][n], dtype=np.float64)
                scale = max(np.abs(ours).max(), 1e-30)
                if np.abs(theirs - ours).max() > MOMENT_RTOL * scale:
                    fail(f"step {s.step}: moment {kind} of {n} differs")
            # Continue from the emulator's weights, so that an error shows at the step that made it.
            w[n] = after
    clipped = f", gradients clipped by {', '.join(f'{s.clip_factor:.3g}' for s in ex.steps)}" if o["clip_norm"] > 0 else ""
    print(f"optimizer: {o['kind']} in NumPy{clipped}; worst weight difference {worst:.3g}, largest change in a step {moved:.3g}")
    if moved < 100 * WEIGHT_ATOL:
        fail(f"the steps barely moved the weights ({moved:.3g}): the comparison would prove nothing")


# ------------------------------------------------------------------ the run's checkpoints

def read_tensors(path):
    """The checkpoint reader of docs/emulator.md ("Files")."""
    data = open(path, "rb").read()
    end = data.index(b"\nend\n") + 5
    meta, tensors = {}, {}
    for line in data[:end].decode().split("\n")[1:]:
        if line.startswith("meta "):
            _, k, v = line.split(" ", 2)
            meta[k] = v
        elif line.startswith("tensor "):
            _, name, r, c, off = line.split()
            r, c, off = int(r), int(c), int(off)
            tensors[name] = np.frombuffer(data, "<f4", r * c, end + 4 * off).reshape(r, c)
    return meta, tensors


def check_against_run(ex, checkpoints):
    compared = 0
    for name in sorted(os.listdir(checkpoints)):
        meta, tensors = read_tensors(os.path.join(checkpoints, name))
        k = int(meta["step"])
        if k > len(ex.steps):
            continue
        for n, a in ex.steps[k - 1].weights.items():
            if not np.array_equal(a, tensors[n]):
                fail(f"{name}: {n} differs from the exported weights after step {k}")
        compared += 1
    print(f"run: {compared} checkpoint(s) of the run equal the exported weights bit for bit")
    if compared == 0:
        fail(f"no checkpoint of the exported steps in {checkpoints}")


# ------------------------------------------------------------------ two mappings

def compare(a, b):
    if a.manifest["mapping"] == b.manifest["mapping"]:
        fail("the two exports have the same mapping: the comparison would prove nothing")
    for n in a.initial:
        if not np.array_equal(a.initial[n], b.initial[n]):
            fail(f"initial {n} differs between the mappings")
    worst_grad = worst_weight = 0.0
    for sa, sb in zip(a.steps, b.steps):
        for k in sa.batch:
            if not np.array_equal(sa.batch[k], sb.batch[k]):
                fail(f"step {sa.step}: batch {k} differs between the mappings")
        if sa.lr != sb.lr:
            fail(f"step {sa.step}: lr differs")
        if abs(sa.loss - sb.loss) > MAPPING_RTOL * abs(sa.loss):
            fail(f"step {sa.step}: loss {sa.loss!r} and {sb.loss!r}")
        largest = max(np.abs(t).max() for t in sa.gradients.values())
        for n, ga in sa.gradients.items():
            err = np.abs(ga.astype(np.float64) - sb.gradients[n]).max() / max(np.abs(ga).max(), 1e-3 * largest)
            worst_grad = max(worst_grad, err)
            if err > MAPPING_RTOL:
                fail(f"step {sa.step}: gradients of {n} differ by {err:.3g} (relative) between the mappings")
        for n, wa in sa.weights.items():
            err = np.abs(wa.astype(np.float64) - sb.weights[n]).max()
            worst_weight = max(worst_weight, err)
            if err > MAPPING_WEIGHT_ATOL:
                fail(f"step {sa.step}: weights {n} differ by {err:.3g} between the mappings")
    if len(a.steps) != len(b.steps):
        fail("the exports have different numbers of steps")
    def described(ex):
        mp = ex.manifest["mapping"]
        return (f"{mp['name']} ({mp['pipeline_ipus']} pipeline IPUs, {mp['replicas']} replicas, "
                f"micro batch {mp['micro_batch']}, GA {mp['gradient_accumulation']})")
    print(f"mappings {described(a)} and {described(b)}: initial weights and batches identical; worst gradient "
          f"difference {worst_grad:.3g} (relative), worst weight difference {worst_weight:.3g}")


def main(argv):
    if len(argv) >= 3 and argv[1] == "check":
        ex = ipu_export.load(argv[2])
        check_manifest(ex)
        family = ex.manifest["family"]
        if family == "bert":
            check_batch(ex)
            check_gradients(ex)
        elif family == "gpt":
            check_gpt_batch(ex)
        else:
            check_mlp(ex)
        check_optimizer(ex)
        if len(argv) > 3:
            check_against_run(ex, argv[3])
    elif len(argv) == 4 and argv[1] == "compare":
        compare(ipu_export.load(argv[2]), ipu_export.load(argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for f in failures:
        print("FAIL:", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
