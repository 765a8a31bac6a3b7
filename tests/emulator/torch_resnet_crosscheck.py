#!/usr/bin/env python3
"""Cross-check of the emulator's ResNet against an independent implementation.

The tiny ResNet of resnet_crosscheck_export.cpp (the standard library's
resnet(): a 7x7/2 stem with max pool, one v1.5 bottleneck or basic block per
stage with projection shortcuts, global average pool and a classifier),
written here with torch.nn.functional (conv2d, batch_norm in training mode,
group_norm, cross_entropy with label_smoothing; max pool from unfolded
windows), evaluated in float64, starts from the
emulator's initial weights and runs the emulator's data for three optimizer
steps (two micro batches of eight 64x64 images each), each step from the
emulator's weights after the previous one. It must give the same losses, the same
gradients at every step, and the same weights after each step, for SGD with
momentum or LARS written out from its definition; with batch norm, the same
running statistics after each step as BatchNorm2d's buffers. The emulator
computes in fp32; the reference in float64 (crosscheck_reference.py says why
and how close they must be). At a ReLU input or a pooling window within
rounding of its kink the reference decides as the emulator did, which the
exporter writes; everywhere else they must decide alike.

Usage: torch_resnet_crosscheck.py PATH/TO/ipu_resnet_crosscheck momentum|lars batch|group bottleneck|basic
Exit status 0 when everything agrees within tolerance.
"""
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

from crosscheck_reference import Comparison, Kinks, U, read_tensors

# Why float64, the tolerances and the kinks: crosscheck_reference.py. Two
# things specific to this network:
# - The images are 64x64 (2x2 at the last stage), eight per micro batch: at
#   32x32 the last stage is 1x1 and batch norm of four images normalises 4
#   values per channel, which makes the gradients hinge on single ReLU
#   decisions.
# - Each step starts from the emulator's weights after the previous one (the
#   momentum buffers stay the reference's own), so every step's loss,
#   gradients and update are compared from the same fp32 weights: a kink
#   decided differently at step 1 would otherwise part the two runs for good.
# - Batch norm divides by a channel's standard deviation, which amplifies
#   rounding where a channel's spread is small; the measured gradient
#   differences stay within a few tens of U all the same (printed below).
# Running statistics (batch norm): the emulator updates them once per step
# from the step's global batch (docs/emulator.md, "Running statistics"),
# which is BatchNorm2d's update after one forward pass over the step's
# samples (momentum 0.1, unbiased variance); here F.batch_norm in training
# mode on each unit's inputs of both micro batches together, in float64, with
# the reference's own running buffers carried from step to step. The emulator
# sums the moments in double and rounds the statistics to fp32 once per step:
# a few U relative of max(|value|, 1) per step.
RUNNING_RTOL = 16 * U


def norm(x, W, prefix, kind, groups, seen=None):
    g, b = W[prefix + ".norm.gamma"].reshape(-1), W[prefix + ".norm.beta"].reshape(-1)
    if kind == "batch":
        if seen is not None:
            seen.setdefault(prefix + ".norm", []).append(x.detach())
        return F.batch_norm(x, None, None, g, b, training=True, eps=1e-5)
    return F.group_norm(x, groups, g, b, eps=1e-5)


def conv(x, W, prefix, stride, pad):
    w = W[prefix + ".w"]
    cout, cols = w.shape
    cin = x.shape[1]
    k = int(round((cols // cin) ** 0.5))
    return F.conv2d(x, w.reshape(cout, cin, k, k), stride=stride, padding=pad)


def forward(W, layers, x, labels, count, smoothing, kind, groups, seen, kinks, mb):
    for name, op, stride in layers:
        site = f"mb{mb}.{name}."
        if op == "conv_stem":
            x = kinks.relu(norm(conv(x, W, name + ".conv", 2, 3), W, name + ".conv", kind, groups, seen), site + "relu0")
            x = kinks.max_pool(x, site + "pool")
        elif op in ("bottleneck", "basic_block"):
            units = [("conv1", 1, 0), ("conv2", stride, 1), ("conv3", 1, 0)] if op == "bottleneck" else [("conv1", stride, 1), ("conv2", 1, 1)]
            h = x
            for i, (u, s, p) in enumerate(units):
                h = norm(conv(h, W, f"{name}.{u}", s, p), W, f"{name}.{u}", kind, groups, seen)
                if i + 1 < len(units):
                    h = kinks.relu(h, site + f"relu{i}")
            if name + ".shortcut.w" in W:
                sc = norm(conv(x, W, name + ".shortcut", stride, 0), W, name + ".shortcut", kind, groups, seen)
            else:
                sc = x
            x = kinks.relu(h + sc, site + f"relu{len(units) - 1}")
        elif op == "pooled_fc":
            pooled = x.mean(dim=(2, 3))
            logits = pooled @ W[name + ".fc.w"] + W[name + ".fc.b"]
            return F.cross_entropy(logits, labels, label_smoothing=smoothing, reduction="sum") / count
        else:
            raise ValueError(op)
    raise ValueError("no pooled_fc head")


def step(W, state, classes, meta, lr, optimizer):
    """SGD with momentum (v = m v + g + wd w; w -= lr v) or LARS (You et al.
    2017: per tensor, ratio = eta |w| / (|g| + wd |w|); v = m v + lr ratio
    (g + wd w); w -= v), bias and norm excluded from decay and the ratio."""
    mom, wd, eta = float(meta["momentum"]), float(meta["weight_decay"]), float(meta["trust_coefficient"])
    with torch.no_grad():
        for name, w in W.items():
            g = w.grad
            excluded = classes[name] in ("bias", "norm")
            d = g + (0.0 if excluded else wd) * w
            v = state.setdefault(name, torch.zeros_like(w))
            if optimizer == "lars":
                wn, gn = w.norm().item(), g.norm().item()
                denom = gn + wd * wn
                ratio = 1.0 if excluded or wn == 0 or denom == 0 else eta * wn / denom
                v.mul_(mom).add_(lr * ratio * d)
                w -= v
            else:
                v.mul_(mom).add_(d)
                w -= lr * v
            w.grad = None


def main():
    exe, optimizer, kind, block = sys.argv[1:5]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([exe, tmp, optimizer, kind, block], check=True)
        meta, init = read_tensors(f"{tmp}/initial.ipt")
        batches = [read_tensors(f"{tmp}/batch{k}.ipt") for k in range(3)]
        steps = [read_tensors(f"{tmp}/step{k}.ipt") for k in range(3)]
        decisions = [read_tensors(f"{tmp}/kinks{k}.ipt")[1] for k in range(3)]
    cmp = Comparison()
    kinks = Kinks(cmp)
    classes = {k[len("class."):]: v for k, v in meta.items() if k.startswith("class.")}
    layers = []
    for i in range(int(meta["layers"])):
        name, op, stride = meta[f"layer.{i}"].split(" ")
        layers.append((name, op, int(float(stride))))
    groups = int(meta["norm_groups"])
    W = {name: t.clone().requires_grad_(True) for name, t in init.items()}
    state = {}
    running = {}
    side = None
    report = []
    worst_running = 0.0
    for k in range(3):
        bmeta, bt = batches[k]
        smeta, st = steps[k]
        if k > 0:
            with torch.no_grad():
                for name, w in W.items():
                    w.copy_(steps[k - 1][1]["after/" + name])
        kinks.use(decisions[k], f"step {k + 1}")
        loss = 0
        seen = {}
        for m in range(int(bmeta["micro_batches"])):
            p = f"mb{m}."
            feats = bt[p + "features"]
            channels = W[layers[0][0] + ".conv.w"].shape[1] // 49
            side = side or int(round((feats.shape[1] // channels) ** 0.5))
            x = feats.reshape(feats.shape[0], channels, side, side)
            labels = bt[p + "labels"].reshape(-1).long()
            loss = loss + forward(W, layers, x, labels, float(bmeta[p + "class_count"]), float(bmeta[p + "label_smoothing"]),
                                  kind, groups, seen, kinks, m)
        loss.backward()
        emu_loss = float(smeta["loss"])
        cmp.loss(f"step {k + 1}", loss.item(), emu_loss)
        cmp.gradients(f"step {k + 1}", W, st)
        emu_units = sorted(n[len("running_mean/"):] for n in st if n.startswith("running_mean/"))
        if sorted(seen) != emu_units:
            cmp.fail(f"step {k + 1}: batch-norm units {sorted(seen)} here, {emu_units} in the emulator")
        for unit, inputs in seen.items():
            rm, rv = running.setdefault(unit, (torch.zeros(inputs[0].shape[1]), torch.ones(inputs[0].shape[1])))
            F.batch_norm(torch.cat(inputs), rm, rv, training=True, momentum=0.1, eps=1e-5)
            for what, ours in (("running_mean", rm), ("running_var", rv)):
                theirs = st.get(f"{what}/{unit}")
                if theirs is None:
                    continue
                err = ((ours - theirs.reshape(-1)).abs() / ours.abs().clamp(min=1)).max().item()
                worst_running = max(worst_running, err)
                if err > RUNNING_RTOL * (k + 1):
                    cmp.fail(f"step {k + 1}: {what} of {unit}: relative difference {err:.3g}")
        cmp.take_gradients(W, st)
        before = {name: w.detach().clone() for name, w in W.items()}
        step(W, state, classes, meta, float(smeta["lr"]), optimizer)
        moved = cmp.weights(f"step {k + 1}", W, st, before)
        if moved < 1e3 * U:
            cmp.fail(f"step {k + 1} barely moved the weights ({moved:.3g}): the comparison would prove nothing")
        report.append(f"step {k + 1}: loss reference {loss.item():.12g}, emulator {emu_loss:.9g}; largest weight change {moved:.3g}")
    report.append(f"running statistics: worst difference {worst_running:.3g} ({worst_running / U:.1f} U)")
    report.append(kinks.report())
    return cmp.finish(f"{optimizer} {kind} {block}, 3 steps against a float64 reference:", report)


if __name__ == "__main__":
    sys.exit(main())
