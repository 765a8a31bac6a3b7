#!/usr/bin/env python3
"""Cross-check of the emulator's ResNet against an independent implementation.

The tiny ResNet of resnet_crosscheck_export.cpp (the standard library's
resnet(): a 7x7/2 stem with max pool, one v1.5 bottleneck or basic block per
stage with projection shortcuts, global average pool and a classifier),
written here with torch.nn.functional (conv2d, batch_norm in training mode,
group_norm, max_pool2d, cross_entropy with label_smoothing), starts from the
emulator's initial weights and runs the emulator's data for three optimizer
steps (two micro batches of eight 64x64 images each), each step from the
emulator's weights after the previous one. It must give the same losses, the same
gradients at every step, and the same weights after each step, for SGD with
momentum or LARS written out from its definition; with batch norm, the same
running statistics after each step as BatchNorm2d's buffers. fp32.

Usage: torch_resnet_crosscheck.py PATH/TO/ipu_resnet_crosscheck momentum|lars batch|group bottleneck|basic
Exit status 0 when everything agrees within tolerance.
"""
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

from torch_crosscheck import read_tensors

# Tolerances. Both sides compute in fp32 in different orders (im2col and
# Eigen's blocked products against PyTorch's convolutions; statistics summed
# in double by the emulator, in float by PyTorch), so each operation agrees
# to a few ulp, ~1e-6 relative after the ~30 operations of the network.
# Normalisation divides by a standard deviation, which can amplify a
# difference where a channel's spread is small, so gradients get 2e-4 of
# their tensor's largest element (with a floor at 1e-4 of the model's
# largest gradient, for tensors whose gradient is rounding noise: a norm's
# shift before a normalisation). Weights: one step moves them by lr * O(1)
# ~ 1e-2; 2e-6 absolute per step (allowed to grow with the steps, as the
# momentum buffers carry each step's differences on) is 1000x below a step.
# The images are 64x64 (2x2 at the last stage), eight per micro batch: at
# 32x32 the last stage is 1x1 and batch norm of four images normalises 4
# values per channel, so two fp32 orders that
# put one ReLU input on either side of zero change a channel's statistics by
# a quarter, and the runs part after the first step (measured: step 2
# gradients 2% apart). That is the model's conditioning, not a bug; group
# norm agrees at either size. For the same reason each step starts from the
# emulator's weights after the previous one: the stem's max pool picks the
# larger of two nearly equal values, and weights 1e-7 apart can pick the
# other one, which moves that pixel's whole gradient elsewhere (measured:
# stem gradients 0.5% apart at step 2 when the two runs went on on their
# own). Restarting each step from the same weights compares every step's
# loss, gradients and update (with the momentum built up over the steps)
# without that chaos.
LOSS_RTOL = 2e-5
GRAD_RTOL = 2e-4
WEIGHT_ATOL = 2e-6


# Running statistics (batch norm): the emulator updates them once per step
# from the step's global batch (docs/emulator.md, "Running statistics"), which
# is BatchNorm2d's update after one forward pass over the step's samples
# (momentum 0.1, unbiased variance). Here: F.batch_norm in training mode on
# each unit's inputs of both micro batches together, with PyTorch's own
# running buffers carried from step to step. The inputs agree to ~1e-6
# relative (the tolerances above), and so do their moments.
RUNNING_RTOL = 2e-5


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


def forward(W, layers, x, labels, count, smoothing, kind, groups, seen):
    for name, op, stride in layers:
        if op == "conv_stem":
            x = F.relu(norm(conv(x, W, name + ".conv", 2, 3), W, name + ".conv", kind, groups, seen))
            x = F.max_pool2d(x, 3, stride=2, padding=1)
        elif op in ("bottleneck", "basic_block"):
            units = [("conv1", 1, 0), ("conv2", stride, 1), ("conv3", 1, 0)] if op == "bottleneck" else [("conv1", stride, 1), ("conv2", 1, 1)]
            h = x
            for i, (u, s, p) in enumerate(units):
                h = norm(conv(h, W, f"{name}.{u}", s, p), W, f"{name}.{u}", kind, groups, seen)
                if i + 1 < len(units):
                    h = F.relu(h)
            if name + ".shortcut.w" in W:
                sc = norm(conv(x, W, name + ".shortcut", stride, 0), W, name + ".shortcut", kind, groups, seen)
            else:
                sc = x
            x = F.relu(h + sc)
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
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([exe, tmp, optimizer, kind, block], check=True)
        meta, init = read_tensors(f"{tmp}/initial.ipt")
        batches = [read_tensors(f"{tmp}/batch{k}.ipt") for k in range(3)]
        steps = [read_tensors(f"{tmp}/step{k}.ipt") for k in range(3)]
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
    for k in range(3):
        bmeta, bt = batches[k]
        smeta, st = steps[k]
        if k > 0:
            # Each step starts from the emulator's weights (the momentum
            # buffers stay PyTorch's own): see the note on max pool above.
            with torch.no_grad():
                for name, w in W.items():
                    w.copy_(steps[k - 1][1]["after/" + name])
        loss = 0
        seen = {}
        for m in range(int(bmeta["micro_batches"])):
            p = f"mb{m}."
            feats = bt[p + "features"]
            channels = W[layers[0][0] + ".conv.w"].shape[1] // 49
            side = side or int(round((feats.shape[1] // channels) ** 0.5))
            x = feats.reshape(feats.shape[0], channels, side, side)
            labels = bt[p + "labels"].reshape(-1).long()
            loss = loss + forward(W, layers, x, labels, float(bmeta[p + "class_count"]), float(bmeta[p + "label_smoothing"]), kind, groups, seen)
        loss.backward()
        emu_loss = float(smeta["loss"])
        if abs(loss.item() - emu_loss) > LOSS_RTOL * (k + 1) * abs(emu_loss):
            failures.append(f"step {k + 1} loss: torch {loss.item():.9g}, emulator {emu_loss:.9g}")
        largest = max(w.grad.abs().max().item() for w in W.values())
        worst_grad = 0.0
        for name, w in W.items():
            scale = max(w.grad.abs().max().item(), 1e-4 * largest)
            err = (w.grad - st["grad/" + name]).abs().max().item() / scale
            worst_grad = max(worst_grad, err)
            if err > GRAD_RTOL * (k + 1):
                failures.append(f"step {k + 1} gradient of {name}: max difference {err:.3g} of its largest element")
        worst_running = 0.0
        emu_units = sorted(n[len("running_mean/"):] for n in st if n.startswith("running_mean/"))
        if sorted(seen) != emu_units:
            failures.append(f"step {k + 1}: batch-norm units {sorted(seen)} here, {emu_units} in the emulator")
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
                    failures.append(f"step {k + 1}: {what} of {unit}: relative difference {err:.3g}")
        before = {name: w.detach().clone() for name, w in W.items()}
        step(W, state, classes, meta, float(smeta["lr"]), optimizer)
        worst_weight, moved = 0.0, 0.0
        for name, w in W.items():
            after = st["after/" + name]
            err = (w.detach() - after).abs().max().item()
            worst_weight = max(worst_weight, err)
            moved = max(moved, (after - before[name]).abs().max().item())
            if err > WEIGHT_ATOL * (k + 1):
                failures.append(f"step {k + 1}: {name} after the {optimizer} step: max difference {err:.3g}")
        if moved < 100 * WEIGHT_ATOL:
            failures.append(f"step {k + 1} barely moved the weights ({moved:.3g}): the comparison would prove nothing")
        report.append(f"step {k + 1}: loss torch {loss.item():.9g} emulator {emu_loss:.9g}, gradient {worst_grad:.3g}, "
                      f"weights {worst_weight:.3g} (largest change {moved:.3g}), running statistics {worst_running:.3g}")
    print(f"{optimizer} {kind} {block}:")
    for r in report:
        print("  " + r)
    for f in failures:
        print("FAIL:", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
