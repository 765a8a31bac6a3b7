#!/usr/bin/env python3
"""Cross-check of the emulator's GroupBERT and ViT against PyTorch.

A tiny GroupBERT (2 layers of convolution module, grouped FFN, pre-norm
attention, grouped FFN; final LayerNorm; MLM and NSP heads) or a tiny ViT
(patch embedding, 2 pre-norm encoder layers, class-token head), written
directly in PyTorch from the architecture in docs/emulator.md ("What is
executed"), starts from the emulator's initial weights and trains on the
emulator's batches for a few steps (LAMB written out from its definition for
GroupBERT, torch.optim.AdamW for ViT). At every step the loss and the
gradients must agree with the emulator's, and after every step the weights.
The emulator computes in fp32, the reference in float64; each step starts
from the emulator's weights, the optimizer's moments are the reference's own.

The PyTorch side is built from other operations than the emulator's: the
depthwise convolution is torch's conv1d with padding="same" run on each
packed sequence cut out of its sample, grouped projections are products with
torch.block_diag of the blocks, patches come from conv2d with stride = patch.

Usage: torch_sequence_crosscheck.py PATH/TO/ipu_emulator_sequence_crosscheck groupbert|vit
Exit status 0 when everything agrees within tolerance.
"""
import math
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

from crosscheck_reference import Comparison, read_tensors

STEPS = 3
# The reference is evaluated in float64 from the emulator's fp32 weights and
# data, and compared with the emulator's fp32 results at tolerances derived
# from fp32 rounding (crosscheck_reference.py). Neither model has a kink
# (GELU, GLU, softmax, layer norm). Each step starts from the emulator's
# weights after the previous one, with the reference's own optimizer moments
# carried from step to step, so every step's gradients and update are
# compared from the same fp32 weights (the emulator's weights are rounded to
# fp32 after every step; the reference's would not be).


def layer_norm(x, W, p):
    return F.layer_norm(x, (x.shape[-1],), W[p + "gamma"].reshape(-1), W[p + "beta"].reshape(-1), eps=1e-5)


def block_diagonal(w, groups):
    """The [n, m] matrix of a grouped projection stored as [n, m / groups]."""
    n = w.shape[0] // groups
    return torch.block_diag(*[w[k * n:(k + 1) * n] for k in range(groups)])


def attention(x, W, p, B, S, heads, allowed):
    H = x.shape[1]
    d = H // heads

    def split(t):
        return t.reshape(B, S, heads, d).transpose(1, 2)
    q = split(x @ W[p + "wq"] + W[p + "bq"])
    k = split(x @ W[p + "wk"] + W[p + "bk"])
    v = split(x @ W[p + "wv"] + W[p + "bv"])
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    ctx = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B * S, H)
    return ctx @ W[p + "wo"] + W[p + "bo"]


def depthwise_conv(x, w, b, sid, B, S):
    """Per sample, per run of equal sequence ids: conv1d, "same" padding."""
    H, K = x.shape[1], w.shape[0]
    weight = w.T.reshape(H, 1, K)
    rows = []
    for s in range(B):
        ids = sid[s].tolist()
        start = 0
        for i in range(1, S + 1):
            if i == S or ids[i] != ids[start]:
                seg = x[s * S + start:s * S + i].T.unsqueeze(0)        # [1, H, length]
                rows.append(F.conv1d(seg, weight, b.reshape(-1), padding="same", groups=H)[0].T)
                start = i
    return torch.cat(rows)


def grouped_ffn(x, W, p, groups):
    h = F.gelu(layer_norm(x, W, p + "ln.") @ W[p + "w1"] + W[p + "b1"])
    return x + h @ block_diagonal(W[p + "w2"], groups) + W[p + "b2"]


def groupbert_loss(W, mb, layers=2, heads=4, groups=4):
    tok = mb["tokens"].long()
    x = W["embedding.word"][tok] + W["embedding.position"][mb["positions"].long()] + W["embedding.type"][mb["segments"].long()]
    x = layer_norm(x, W, "embedding.ln.")
    B, S = mb["samples"], mb["seq"]
    sid = mb["sequence_ids"].reshape(B, S)
    allowed = sid[:, :, None] == sid[:, None, :]
    for l in range(layers):
        e = f"encoder[{l}]."
        c = e + "conv."
        a = layer_norm(x, W, c + "ln.") @ W[c + "glu.w"] + W[c + "glu.b"]
        g = F.glu(a, dim=-1)
        g = F.gelu(depthwise_conv(g, W[c + "conv.w"], W[c + "conv.b"], sid, B, S))
        x = x + g @ block_diagonal(W[c + "proj.w"], groups) + W[c + "proj.b"]
        x = grouped_ffn(x, W, e + "ffn1.", groups)
        x = x + attention(layer_norm(x, W, e + "attention.ln."), W, e + "attention.", B, S, heads, allowed)
        x = grouped_ffn(x, W, e + "ffn2.", groups)
    x = layer_norm(x, W, "final_norm.")
    hm = x[mb["masked_row"].long()]
    t = F.gelu(hm @ W["mlm_head.transform.w"] + W["mlm_head.transform.b"])
    u = layer_norm(t, W, "mlm_head.ln.")
    logits = u @ W["embedding.word"].T + W["mlm_head.decoder.bias"]
    mlm = F.cross_entropy(logits, mb["masked_label"].long(), reduction="sum") / mb["mlm_count"]
    pooled = torch.tanh(x[mb["classified_row"].long()] @ W["nsp_head.pooler.w"] + W["nsp_head.pooler.b"])
    logits = pooled @ W["nsp_head.classifier.w"] + W["nsp_head.classifier.b"]
    nsp = F.cross_entropy(logits, mb["class_label"].long(), reduction="sum") / mb["class_count"]
    return mlm + nsp


def vit_loss(W, mb, layers=2, heads=4, patch=4, image=16, channels=3):
    B = mb["samples"]
    images = mb["features"].reshape(B, channels, image, image)
    H = W["patches.proj.w"].shape[1]
    kernel = W["patches.proj.w"].T.reshape(H, channels, patch, patch)
    p = F.conv2d(images, kernel, W["patches.proj.b"].reshape(-1), stride=patch)   # [B, H, side, side]
    p = p.flatten(2).transpose(1, 2)                                               # [B, patches, H]
    cls = W["patches.cls"].reshape(1, 1, H).expand(B, 1, H)
    x = torch.cat([cls, p], 1) + W["patches.position"].unsqueeze(0)
    S = x.shape[1]
    x = x.reshape(B * S, H)
    allowed = torch.ones(B, S, S, dtype=torch.bool)
    for l in range(layers):
        e = f"encoder[{l}]."
        x = x + attention(layer_norm(x, W, e + "attention.ln."), W, e + "attention.", B, S, heads, allowed)
        f = e + "ffn."
        x = x + F.gelu(layer_norm(x, W, f + "ln.") @ W[f + "w1"] + W[f + "b1"]) @ W[f + "w2"] + W[f + "b2"]
    first = layer_norm(x.reshape(B, S, H)[:, 0], W, "head.ln.")
    logits = first @ W["head.w"] + W["head.b"]
    return F.cross_entropy(logits, mb["class_label"].long(), label_smoothing=mb["label_smoothing"], reduction="sum") / mb["class_count"]


def micro_batches(meta, tensors):
    out = []
    for k in range(int(meta["micro_batches"])):
        p = f"mb{k}."
        mb = {name[len(p):]: (t if name == p + "features" else t.reshape(-1)) for name, t in tensors.items() if name.startswith(p)}
        mb["samples"] = int(meta[p + "samples"])
        mb["seq"] = int(meta[p + "seq"])
        mb["mlm_count"] = float(meta[p + "mlm_count"])
        mb["class_count"] = float(meta[p + "class_count"])
        mb["label_smoothing"] = float(meta[p + "label_smoothing"])
        out.append(mb)
    return out


class Lamb:
    """LAMB (You et al. 2020) from its definition, bias correction on; bias and norm excluded."""

    def __init__(self, W, classes, wd=0.01, b1=0.9, b2=0.999, eps=1e-6):
        self.W, self.classes, self.wd, self.b1, self.b2, self.eps = W, classes, wd, b1, b2, eps
        self.m = {n: torch.zeros_like(w) for n, w in W.items()}
        self.v = {n: torch.zeros_like(w) for n, w in W.items()}
        self.t = 0

    def step(self, lr):
        self.t += 1
        bc1, bc2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        with torch.no_grad():
            for name, w in self.W.items():
                g = w.grad
                excluded = self.classes[name] in ("bias", "norm")
                self.m[name] = self.b1 * self.m[name] + (1 - self.b1) * g
                self.v[name] = self.b2 * self.v[name] + (1 - self.b2) * g * g
                u = (self.m[name] / bc1) / ((self.v[name] / bc2).sqrt() + self.eps) + (0.0 if excluded else self.wd) * w
                wn, un = w.norm().item(), u.norm().item()
                ratio = 1.0 if excluded or wn == 0 or un == 0 else wn / un
                w -= lr * ratio * u


def main():
    exe, model = sys.argv[1], sys.argv[2]
    loss_of = groupbert_loss if model == "groupbert" else vit_loss
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([exe, tmp, model, str(STEPS)], check=True)
        init_meta, init = read_tensors(f"{tmp}/initial.ipt")
        steps = [read_tensors(f"{tmp}/step{k + 1}.ipt") for k in range(STEPS)]
    cmp = Comparison()
    classes = {k[len("class."):]: v for k, v in init_meta.items() if k.startswith("class.")}
    W = {name: t.clone().requires_grad_(True) for name, t in init.items()}
    if model == "groupbert":
        lamb = Lamb(W, classes)
    else:
        adamw = torch.optim.AdamW(W.values(), lr=1.0, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
    if model == "groupbert":
        # The batches must be packed, or the convolution's boundaries inside a sample go unchecked.
        ids = steps[0][1]["mb0.sequence_ids"]
        if ids.max().item() < 1:
            cmp.fail("the GroupBERT batches are not packed")
    report = []
    before = init
    for k, (meta, tensors) in enumerate(steps):
        with torch.no_grad():
            for name, w in W.items():
                w.copy_(before[name])
                w.grad = None
        loss = sum(loss_of(W, mb) for mb in micro_batches(meta, tensors))
        loss.backward()
        emu_loss = float(meta["loss"])
        cmp.loss(f"step {k + 1}", loss.item(), emu_loss)
        cmp.gradients(f"step {k + 1}", W, tensors)
        cmp.take_gradients(W, tensors)
        lr = float(meta["lr"])
        if model == "groupbert":
            lamb.step(lr)
        else:
            for group in adamw.param_groups:
                group["lr"] = lr
            adamw.step()
        moved = cmp.weights(f"step {k + 1}", W, tensors, before)
        if moved < 1e-4:
            cmp.fail(f"step {k + 1} barely moved the weights ({moved:.3g}): the comparison would prove nothing")
        report.append(f"step {k + 1}: loss reference {loss.item():.12g}, emulator {emu_loss:.9g}; largest weight change {moved:.3g}")
        before = {name: tensors["after/" + name].reshape(w.shape) for name, w in W.items()}
    return cmp.finish(f"{model}, {STEPS} steps against a float64 reference:", report)


if __name__ == "__main__":
    sys.exit(main())
