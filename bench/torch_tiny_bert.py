#!/usr/bin/env python3
"""PyTorch side of the emulator benchmark (emulator_bench.cpp).

Trains the same tiny BERT as the emulator (the model code of
tests/emulator/torch_crosscheck.py), on the emulator's own batches, with
torch.optim.AdamW, in fp32 on the CPU, for at least SECONDS after two warm-up
steps, and prints samples per second and the BLAS library that PyTorch's
matrix products resolve to (the caller chooses it with LD_LIBRARY_PATH).

Usage: torch_tiny_bert.py BATCHES.ipt THREADS SECONDS
"""
import ctypes
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "emulator"))
from torch_crosscheck import loss_of, micro_batches, read_tensors  # noqa: E402


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def blas_in_use():
    """The library that defines the sgemm_ PyTorch calls, and what it is."""
    try:
        blas = ctypes.CDLL("libblas.so.3")   # the copy already loaded as PyTorch's dependency
        info = _DlInfo()
        libc = ctypes.CDLL(None)
        libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        libc.dladdr(ctypes.cast(blas.sgemm_, ctypes.c_void_p), ctypes.byref(info))
        path = os.path.realpath(info.dli_fname.decode())
    except (OSError, AttributeError) as e:
        return f"unknown ({e})"
    mapped = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and "openblas" in fields[-1]:
                mapped.add(fields[-1])
    for lib in sorted(mapped):
        if "libopenblas" in lib and "openblas" in path:
            ob = ctypes.CDLL(lib)
            ob.openblas_get_config.restype = ctypes.c_char_p
            ob.openblas_get_corename.restype = ctypes.c_char_p
            return (f"{path} = OpenBLAS ({ob.openblas_get_config().decode()}; kernels "
                    f"{ob.openblas_get_corename().decode()}; {ob.openblas_get_num_threads()} threads)")
    kind = "reference BLAS (netlib)" if "/blas/" in path else "unknown BLAS"
    return f"{path} = {kind}"


def main():
    path, threads, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    torch.set_num_threads(threads)
    meta, tensors = read_tensors(path)
    steps = int(meta["steps"])
    per_step = int(meta["micro_batches"]) // steps
    batches = micro_batches(meta, tensors)
    init_meta, init = read_tensors(meta["weights"])
    W = {name: t.clone().requires_grad_(True) for name, t in init.items()}
    heads, layers = int(meta["heads"]), int(meta["layers"])
    opt = torch.optim.AdamW(W.values(), lr=1e-3, weight_decay=0.01)
    samples = 0
    start = None
    warmup = 2
    s = 0
    while True:
        if s == warmup:
            start = time.perf_counter()
            samples = 0
        if start is not None and s >= warmup + 3 and time.perf_counter() - start >= seconds:
            break
        opt.zero_grad()
        k = s % steps
        for mb in batches[k * per_step:(k + 1) * per_step]:
            loss_of(W, mb, layers=layers, heads=heads).backward()
            samples += mb["samples"]
        opt.step()
        s += 1
    elapsed = time.perf_counter() - start
    print(f"blas {blas_in_use()}")
    print(f"torch {torch.__version__}")
    print(f"samples_per_second {samples / elapsed:.3f}")


if __name__ == "__main__":
    main()
