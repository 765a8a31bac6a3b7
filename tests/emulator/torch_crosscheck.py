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

from crosscheck_reference import Comparison, read_tensors  # noqa: F401  (read_tensors: also for export_check.py)

# The reference is evaluated in float64 from the emulator's fp32 weights and
# data, and the emulator's fp32 results are compared with it at tolerances
# derived from fp32 rounding (crosscheck_reference.py). The model has no kink
# (GELU, tanh, softmax, layer norm), so no decisions are needed.


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
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([exe, tmp, optimizer], check=True)
        init_meta, init = read_tensors(f"{tmp}/initial.ipt")
        batch_meta, batch = read_tensors(f"{tmp}/batch.ipt")
        step_meta, step = read_tensors(f"{tmp}/step.ipt")
    cmp = Comparison()
    classes = {k[len("class."):]: v for k, v in init_meta.items() if k.startswith("class.")}
    W = {name: t.clone().requires_grad_(True) for name, t in init.items()}
    loss = sum(loss_of(W, mb) for mb in micro_batches(batch_meta, batch))
    loss.backward()
    emu_loss = float(step_meta["loss"])
    cmp.loss("step 1", loss.item(), emu_loss)
    cmp.gradients("step 1", W, step)
    cmp.take_gradients(W, step)
    lr = float(step_meta["lr"])
    if optimizer == "lamb":
        lamb_step(W, classes, lr)
    else:
        opt = torch.optim.AdamW(W.values(), lr=lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
        opt.step()
    moved = cmp.weights("step 1", W, step, init)
    if moved < 1e-4:
        cmp.fail(f"the step barely moved the weights ({moved:.3g}): the comparison would prove nothing")
    return cmp.finish(f"{optimizer}, one step against a float64 reference:",
                      [f"loss reference {loss.item():.12g}, emulator {emu_loss:.9g}; largest weight change {moved:.3g}"])


if __name__ == "__main__":
    sys.exit(main())
