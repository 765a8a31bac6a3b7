#!/usr/bin/env python3
"""Cross-check of the emulator against an independent implementation.

The same tiny BERT (2 post-norm encoder layers, MLM head tied to the word
embedding, NSP head), written directly in PyTorch, starts from the
emulator's initial weights and the emulator's data for step 1 (two micro
batches), and must give the same loss, the same gradients and, after one
optimizer step (LAMB written out from its definition, or torch.optim.AdamW),
the same weights, in fp32.

Usage: torch_crosscheck.py PATH/TO/ipu_emulator_crosscheck lamb|adamw
Exit status 0 when everything agrees within tolerance.
"""
import math
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

# Tolerances. Both sides compute in fp32 but in different orders (Eigen's
# blocked matmuls vs PyTorch's), so results agree to a few ulp per operation;
# through ~40 operations that is ~1e-6 relative. Gradients are compared per
# tensor relative to the tensor's largest element (small elements are sums of
# cancelling terms), with a floor of 1e-4 of the largest gradient of the
# model: the key bias's gradient is zero in exact arithmetic (softmax ignores
# a shift shared by all keys), so both sides hold only rounding noise there. Weights after the step: the update is lr * O(1), so an
# error of 1e-6 * lr * ratio would be invisible; 2e-6 absolute on weights of
# size ~0.02-1 is 100x tighter than one step's change (2e-3) yet above what
# reordering produces.
LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
WEIGHT_ATOL = 2e-6


def read_tensors(path):
    data = open(path, "rb").read()
    end = data.index(b"\nend\n") + len(b"\nend\n")
    lines = data[:end].decode().split("\n")
    assert lines[0] == "IPU-TENSORS 1", path
    meta, tensors = {}, {}
    payload = data[end:]
    for line in lines[1:]:
        if line.startswith("meta "):
            parts = line.split(" ", 2)
            meta[parts[1]] = parts[2] if len(parts) > 2 else ""
        elif line.startswith("tensor "):
            _, name, rows, cols, offset = line.split()
            rows, cols, offset = int(rows), int(cols), int(offset)
            raw = bytearray(payload[offset * 4:(offset + rows * cols) * 4])
            tensors[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(rows, cols).clone()
    return meta, tensors


def layer_norm(x, g, b):
    return F.layer_norm(x, (x.shape[-1],), g.reshape(-1), b.reshape(-1), eps=1e-5)


def loss_of(W, mb, layers=2, heads=4):
    tok = mb["tokens"].long()
    x = W["embedding.word"][tok] + W["embedding.position"][mb["positions"].long()] + W["embedding.type"][mb["segments"].long()]
    x = layer_norm(x, W["embedding.ln.gamma"], W["embedding.ln.beta"])
    B, S, H = mb["samples"], mb["seq"], x.shape[1]
    d = H // heads
    sid = mb["sequence_ids"].reshape(B, S)
    allowed = sid[:, :, None] == sid[:, None, :]
    for l in range(layers):
        p = f"encoder[{l}].attention."
        def split(t):
            return t.reshape(B, S, heads, d).transpose(1, 2)
        q = split(x @ W[p + "wq"] + W[p + "bq"])
        k = split(x @ W[p + "wk"] + W[p + "bk"])
        v = split(x @ W[p + "wv"] + W[p + "bv"])
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        ctx = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B * S, H)
        x = layer_norm(x + ctx @ W[p + "wo"] + W[p + "bo"], W[p + "ln.gamma"], W[p + "ln.beta"])
        f = f"encoder[{l}].ffn."
        h = F.gelu(x @ W[f + "w1"] + W[f + "b1"])
        x = layer_norm(x + h @ W[f + "w2"] + W[f + "b2"], W[f + "ln.gamma"], W[f + "ln.beta"])
    hm = x[mb["masked_row"].long()]
    t = F.gelu(hm @ W["mlm_head.transform.w"] + W["mlm_head.transform.b"])
    u = layer_norm(t, W["mlm_head.ln.gamma"], W["mlm_head.ln.beta"])
    logits = u @ W["embedding.word"].T + W["mlm_head.decoder.bias"]
    mlm = F.cross_entropy(logits, mb["masked_label"].long(), reduction="sum") / mb["mlm_count"]
    pooled = torch.tanh(x[mb["classified_row"].long()] @ W["nsp_head.pooler.w"] + W["nsp_head.pooler.b"])
    logits = pooled @ W["nsp_head.classifier.w"] + W["nsp_head.classifier.b"]
    nsp = F.cross_entropy(logits, mb["class_label"].long(), reduction="sum") / mb["class_count"]
    return mlm + nsp


def micro_batches(meta, tensors):
    out = []
    for k in range(int(meta["micro_batches"])):
        p = f"mb{k}."
        mb = {name[len(p):]: t.reshape(-1) for name, t in tensors.items() if name.startswith(p)}
        mb["samples"] = int(meta[p + "samples"])
        mb["seq"] = int(meta[p + "seq"])
        mb["mlm_count"] = float(meta[p + "mlm_count"])
        mb["class_count"] = float(meta[p + "class_count"])
        out.append(mb)
    return out


def lamb_step(W, classes, lr, wd=0.01, b1=0.9, b2=0.999, eps=1e-6):
    """LAMB (You et al. 2020), first step from zero moments, bias and norm excluded."""
    with torch.no_grad():
        for name, w in W.items():
            g = w.grad
            excluded = classes[name] in ("bias", "norm")
            m = (1 - b1) * g
            v = (1 - b2) * g * g
            u = (m / (1 - b1)) / ((v / (1 - b2)).sqrt() + eps) + (0.0 if excluded else wd) * w
            wn, un = w.norm().item(), u.norm().item()
            ratio = 1.0 if excluded or wn == 0 or un == 0 else wn / un
            w -= lr * ratio * u


def main():
    exe, optimizer = sys.argv[1], sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([exe, tmp, optimizer], check=True)
        init_meta, init = read_tensors(f"{tmp}/initial.ipt")
        batch_meta, batch = read_tensors(f"{tmp}/batch.ipt")
        step_meta, step = read_tensors(f"{tmp}/step.ipt")
    classes = {k[len("class."):]: v for k, v in init_meta.items() if k.startswith("class.")}
    W = {name: t.clone().requires_grad_(True) for name, t in init.items()}
    loss = sum(loss_of(W, mb) for mb in micro_batches(batch_meta, batch))
    loss.backward()

    emu_loss = float(step_meta["loss"])
    if abs(loss.item() - emu_loss) > LOSS_RTOL * abs(emu_loss):
        failures.append(f"loss: torch {loss.item():.9g}, emulator {emu_loss:.9g}")
    worst_grad = 0.0
    largest = max(w.grad.abs().max().item() for w in W.values())
    for name, w in W.items():
        g_emu = step["grad/" + name]
        scale = max(w.grad.abs().max().item(), 1e-4 * largest)
        err = (w.grad - g_emu).abs().max().item() / scale
        worst_grad = max(worst_grad, err)
        if err > GRAD_RTOL:
            failures.append(f"gradient of {name}: max difference {err:.3g} of its largest element")

    lr = float(step_meta["lr"])
    if optimizer == "lamb":
        lamb_step(W, classes, lr)
    else:
        opt = torch.optim.AdamW(W.values(), lr=lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
        opt.step()
    worst_weight = 0.0
    moved = 0.0
    for name, w in W.items():
        after = step["after/" + name]
        err = (w.detach() - after).abs().max().item()
        moved = max(moved, (after - init[name]).abs().max().item())
        worst_weight = max(worst_weight, err)
        if err > WEIGHT_ATOL:
            failures.append(f"{name} after the {optimizer} step: max difference {err:.3g}")
    if moved < 100 * WEIGHT_ATOL:
        failures.append(f"the step barely moved the weights ({moved:.3g}): the comparison would prove nothing")

    print(f"{optimizer}: loss torch {loss.item():.9g} emulator {emu_loss:.9g}; "
          f"worst gradient difference {worst_grad:.3g} (relative), worst weight difference {worst_weight:.3g} "
          f"(largest change in the step {moved:.3g})")
    for f in failures:
        print("FAIL:", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
