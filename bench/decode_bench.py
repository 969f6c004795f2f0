#!/usr/bin/env python3
"""Few rows, long key loops (flash-decoding) on the GPU: flashgen beside the PyTorch baselines,
in one run (scripts/gpu_check decode).

Rows (bf16, median of triton.testing.do_bench, CUDA events, warm): flashgen.compile of
examples/vanilla.attn called with torch CUDA tensors, and SDPA with the cuDNN and flash
backends, at decode shapes (one query row, or a few, against a long K/V cache) and a long-key
prefill of few blocks. The K/V bytes each call must read give the bandwidth column.
Prints a markdown table (bench/RESULTS.md takes it with the date, GPU and commit).
"""
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

import flashgen

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [  # b, h, m, n, d
    (8, 32, 1, 16384, 128),
    (8, 32, 4, 16384, 128),
    (1, 32, 1, 65536, 128),
    (32, 16, 1, 4096, 64),
    (1, 16, 1024, 16384, 128),
]


def ms(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def main():
    kern = flashgen.compile(str(ROOT / "examples" / "vanilla.attn"))
    print("| b, h, m, n, d | backend | ms | K/V TB/s | max abs diff vs SDPA |")
    print("|---|---|---|---|---|")
    for b, h, m, n, d in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(b, h, m, d, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
        kv_bytes = 2 * b * h * n * d * 2
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            want = F.scaled_dot_product_attention(q, k, v)
        rows = [("flashgen", lambda: kern(q, k, v))]
        for name, be in (("SDPA cuDNN", SDPBackend.CUDNN_ATTENTION),
                         ("SDPA flash", SDPBackend.FLASH_ATTENTION)):
            def f(be=be):
                with sdpa_kernel([be]):
                    return F.scaled_dot_product_attention(q, k, v)
            rows.append((name, f))
        for name, fn in rows:
            try:
                out = fn()
                t = ms(fn)
                diff = (out.float() - want.float()).abs().max().item()
                print(f"| {b}, {h}, {m}, {n}, {d} | {name} | {t:.4f} | "
                      f"{kv_bytes / t / 1e9:.2f} | {diff:.2e} |", flush=True)
            except Exception as e:  # a baseline that does not take the shape says so
                print(f"| {b}, {h}, {m}, {n}, {d} | {name} | n/a | | {type(e).__name__}: "
                      f"{str(e).splitlines()[0][:80]} |", flush=True)


if __name__ == "__main__":
    main()
