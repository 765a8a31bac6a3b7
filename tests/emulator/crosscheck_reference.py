"""What the PyTorch cross-checks share: reading the emulator's tensor files,
the float64 reference, the tolerances and the comparisons.

Why float64. The emulator computes in fp32; so does PyTorch by default, in
another order of operations that depends on the CPU and on which kernels
PyTorch picks for it (AVX2, AVX-512, oneDNN). Two fp32 programs can differ by
far more than either differs from the exact result, wherever the function
has a kink (ReLU, max pool) and an input lies within rounding of it: one puts
it on one side, the other on the other, and a gradient moves by 1% (seen:
a ResNet ReLU input at -1.4e-6 in float64 that PyTorch's AVX-512 kernels put
at +1.3e-7). So the reference is evaluated in float64 from the emulator's own
fp32 inputs (exact in float64), and the emulator's fp32 result is compared
with it at tolerances derived from fp32 rounding.

Kinks. Where an input lies within KINK_MARGIN of the tensor's largest
element from a kink, either side is right for an fp32 program, so the
reference follows the emulator's decision there (the ResNet exporter writes
them) and says how many elements it followed. Everywhere else the two must
decide alike, and a different decision is a failure.

Tolerances, in units of fp32's unit roundoff U = 2^-24 (~6e-8), the largest
relative error of one rounding. The emulator rounds every product, sum and
elementwise result to fp32: a value computed through d dependent operations,
each a sum of n terms, is within about d sqrt(n) U of exact in practice (the
errors of a sum are independent and of both signs; Eigen sums in blocks).
The networks here are 20-40 operations deep with sums of up to a few thousand
terms, so ~40 x 50 = 2000 U ~ 1.2e-4 is the bound and the measured errors
are 10-60x below it (the drivers print them). The tolerances sit between:
losses at 128 U (7.6e-6) relative, gradients at 256 U (1.5e-5) of each
tensor's largest element, weights after a step at 32 U of one step's
largest change. A real error of 1e-4 in any kernel is 6x or more above them
(tested by perturbing a kernel: docs/emulator.md, "Cross-checks").
"""
import torch

U = 2.0 ** -24
LOSS_RTOL = 128 * U
GRAD_RTOL = 256 * U
# Gradients are compared relative to their tensor's largest element, with a
# floor of 1e-4 of the model's largest gradient: a tensor whose exact
# gradient is 0 (the attention key bias; a norm's shift before a
# normalisation) holds rounding noise only.
GRAD_FLOOR = 1e-4
# Weights after a step: the emulator's fp32 update (a few operations per
# element, lr * ratio * O(1)) against the exact update of the same fp32
# weights and gradients, relative to the step's largest change, plus the
# roundings at the weights' magnitude, each at most U of the tensor's
# largest weight: with decoupled weight decay (AdamW: w (1 - lr wd), then
# the update, as torch.optim.AdamW computes it in fp32) the factor
# 1 - lr wd rounded to fp32, the decayed weights and the updated weights,
# three; one otherwise. They are counted for every optimizer alike.
WEIGHT_STEP_RTOL = 32 * U
WEIGHT_ROUNDINGS = 3
# A kink input this close to the kink, relative to its tensor's largest
# element, may land on either side in fp32: 1e-5 is ~170 U, above the ~1e-6
# relative error of an activation computed through the network.
KINK_MARGIN = 1e-5

torch.set_default_dtype(torch.float64)


def read_tensors(path):
    """An emulator tensor file (docs/emulator.md, "Files"): its meta values
    and its fp32 tensors, as float64 (exact)."""
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
            tensors[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(rows, cols).to(torch.float64)
    return meta, tensors


class Comparison:
    """Failures and the worst differences seen, for one driver's report."""

    def __init__(self):
        self.failures = []
        self.worst_loss = self.worst_grad = self.worst_weight = 0.0

    def fail(self, what):
        self.failures.append(what)

    def loss(self, where, reference, emulator):
        err = abs(reference - emulator) / max(abs(reference), 1e-30)
        self.worst_loss = max(self.worst_loss, err)
        if err > LOSS_RTOL:
            self.fail(f"{where} loss: reference {reference:.12g}, emulator {emulator:.9g} ({err:.3g} relative)")

    def gradients(self, where, W, emulator, prefix="grad/"):
        """W: name -> float64 leaf with .grad; emulator: name -> tensor."""
        largest = max(w.grad.abs().max().item() for w in W.values())
        for name, w in W.items():
            scale = max(w.grad.abs().max().item(), GRAD_FLOOR * largest)
            err = (w.grad - emulator[prefix + name].reshape(w.grad.shape)).abs().max().item() / scale
            self.worst_grad = max(self.worst_grad, err)
            if err > GRAD_RTOL:
                self.fail(f"{where} gradient of {name}: max difference {err:.3g} of its largest element")

    @staticmethod
    def take_gradients(W, emulator, prefix="grad/"):
        """The emulator's gradients into the reference's .grad, for its
        optimizer step: the step is then compared on its own, from the same
        weights and gradients. (Adam's m / sqrt(v) is about the sign of an
        element's gradient where that gradient is near 0, such as rounding
        noise in a gradient that is 0 exactly: a sign kink, at which the
        reference's own gradients would decide otherwise.)"""
        with torch.no_grad():
            for name, w in W.items():
                w.grad = emulator[prefix + name].reshape(w.shape).clone()

    def weights(self, where, W, emulator, before, prefix="after/"):
        """The reference's weights after a step against the emulator's;
        `before`: the weights the step started from. Returns the step's
        largest change (the emulator's)."""
        moved = max((emulator[prefix + n].reshape(w.shape) - before[n].reshape(w.shape)).abs().max().item() for n, w in W.items())
        for name, w in W.items():
            theirs = emulator[prefix + name].reshape(w.shape)
            tol = WEIGHT_STEP_RTOL * moved + WEIGHT_ROUNDINGS * U * theirs.abs().max().item()
            err = (w.detach() - theirs).abs().max().item()
            self.worst_weight = max(self.worst_weight, err / tol)
            if err > tol:
                self.fail(f"{where}: {name} after the step: max difference {err:.3g} (tolerance {tol:.3g})")
        return moved

    def summary(self):
        return (f"worst differences from the float64 reference: loss {self.worst_loss:.3g} relative "
                f"({self.worst_loss / U:.1f} U), gradients {self.worst_grad:.3g} of their largest element "
                f"({self.worst_grad / U:.1f} U), weights {self.worst_weight:.2f} of their tolerance; "
                f"tolerances {LOSS_RTOL / U:.0f} U, {GRAD_RTOL / U:.0f} U, {WEIGHT_STEP_RTOL / U:.0f} U of a step's "
                f"largest change + {WEIGHT_ROUNDINGS} U of the largest weight")

    def finish(self, title, lines):
        print(title)
        for line in lines:
            print("  " + line)
        print("  " + self.summary())
        for f in self.failures[:40]:
            print("FAIL:", f)
        if len(self.failures) > 40:
            print(f"FAIL: ... and {len(self.failures) - 40} more")
        print(f"{0 if self.failures else 1} passed, {1 if self.failures else 0} failed")
        return 1 if self.failures else 0


class Kinks:
    """The reference's ReLU and max pool, deciding as the emulator did where
    an input lies within KINK_MARGIN (of its tensor's largest element) of the
    kink, and as float64 does elsewhere, where the emulator must agree."""

    def __init__(self, comparison):
        self.comparison = comparison
        self.decisions = None   # name -> the emulator's tensor ("mb0.stem.relu0", ...)
        self.where = ""
        self.followed = 0       # decisions taken from the emulator where float64 decides otherwise
        self.near = 0           # inputs within the margin
        self.elements = 0

    def use(self, decisions, where):
        self.decisions, self.where = decisions, where

    def relu(self, x, site):
        emulator = self.decisions[site].reshape(x.shape[0], -1) > 0
        flat = x.detach().reshape(x.shape[0], -1)
        near = flat.abs() <= KINK_MARGIN * flat.abs().max()
        ours = flat > 0
        far_disagree = (~near & (ours != emulator)).sum().item()
        if far_disagree:
            self.comparison.fail(f"{self.where} {site}: {far_disagree} ReLU decisions differ away from the kink")
        self.near += near.sum().item()
        # An input exactly at the kink (0) has no side in float64 either.
        self.followed += (near & (ours != emulator) & (flat != 0)).sum().item()
        self.elements += flat.numel()
        mask = torch.where(near, emulator, ours).to(x.dtype).reshape(x.shape)
        return x * mask

    def max_pool(self, x, site):
        """3x3, stride 2, padding 1 (the stem's). The emulator's choice is an
        input column c * S * S + iy * S + ix per output."""
        N, C, S, _ = x.shape
        o = (S + 2 - 3) // 2 + 1
        padded = torch.nn.functional.pad(x, (1, 1, 1, 1), value=float("-inf"))
        windows = padded.unfold(2, 3, 2).unfold(3, 3, 2).reshape(N, C, o, o, 9)   # [N, C, oy, ox, ky*3+kx]
        values = windows.detach()
        top2 = values.topk(2, dim=-1)
        ours = top2.indices[..., 0]
        gap = top2.values[..., 0] - top2.values[..., 1]
        near = gap <= KINK_MARGIN * x.detach().abs().max()
        chosen = self.decisions[site].reshape(N, C, o, o).long() % (S * S)
        oy = torch.arange(o).reshape(1, 1, o, 1)
        ox = torch.arange(o).reshape(1, 1, 1, o)
        emulator = (chosen // S - (2 * oy - 1)) * 3 + (chosen % S - (2 * ox - 1))
        if ((emulator < 0) | (emulator > 8)).any():
            self.comparison.fail(f"{self.where} {site}: the emulator chose an input outside its window")
            emulator = emulator.clamp(0, 8)
        far_disagree = (~near & (ours != emulator)).sum().item()
        if far_disagree:
            self.comparison.fail(f"{self.where} {site}: {far_disagree} max pool choices differ away from a tie")
        self.near += near.sum().item()
        # An exact tie (a window of ReLU zeros) has no side in float64 either.
        self.followed += (near & (ours != emulator) & (gap > 0)).sum().item()
        self.elements += near.numel()
        pick = torch.where(near, emulator, ours)
        return windows.gather(-1, pick.unsqueeze(-1)).squeeze(-1)

    def report(self):
        return (f"kinks: {self.elements} ReLU and max pool decisions, {self.near} within {KINK_MARGIN:g} of their "
                f"tensor's largest element of the kink (exact ties included), {self.followed} of those decided as "
                f"the emulator did where float64 is on the other side")
