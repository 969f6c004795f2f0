#!/usr/bin/env python3
"""f32 attention on the GPU: flashgen (q, k, v as three bf16 pieces on the tensor cores) beside
SDPA in f32, in one run (scripts/gpu_check f32).

flashgen rows come from `flashgen bench` (median over warm runs, CUDA events; the split of the
inputs into pieces included) on bench/programs/causal_f32.attn and, for scale, the bf16
examples/causal.attn at the same sizes. SDPA rows: the mem-efficient and math backends on f32
tensors with TF32 off (torch's default for SDPA's f32 matmuls), median of
triton.testing.do_bench; `err` is the largest |out - ref| / max |ref| against SDPA's math
backend in f64 on the same inputs. Prints a markdown table (bench/RESULTS.md takes it).
Usage: f32_bench.py FLASHGEN_BINARY
"""
import re
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(4, 16, 1024, 64), (8, 16, 4096, 128), (32, 16, 512, 128)]  # b, h, n, d


def flashgen_ms(binary, program, b, h, n, d):
    sizes = f"b={b},h={h},m=n={n},d=e={d}"
    r = subprocess.run([binary, "bench", str(program), "--sizes", sizes],
                       capture_output=True, text=True)
    m = re.search(r"median ([0-9.]+) ms", r.stdout)
    return float(m.group(1)) if m else f"failed: {(r.stdout + r.stderr).strip()[-200:]}"


def main():
    binary = sys.argv[1]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("| b, h, n, d (causal) | backend | ms | TF/s | err vs f64 |")
    print("|---|---|---|---|---|")
    for b, h, n, d in SHAPES:
        flops = 4 * b * h * n * n * d / 2
        for name, prog in (("flashgen f32 (3 bf16 pieces)", ROOT / "bench/programs/causal_f32.attn"),
                           ("flashgen bf16 (for scale)", ROOT / "examples/causal.attn")):
            t = flashgen_ms(binary, prog, b, h, n, d)
            if isinstance(t, float):
                print(f"| {b}, {h}, {n}, {d} | {name} | {t:.4f} | {flops / t / 1e9:.1f} |  |",
                      flush=True)
            else:
                print(f"| {b}, {h}, {n}, {d} | {name} | n/a |  | {t} |", flush=True)
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float32, generator=g)
                   for _ in range(3))
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(q[:1].double(), k[:1].double(), v[:1].double(),
                                                 is_causal=True)
        scale = ref.abs().max().item()
        for name, be in (("SDPA mem-efficient f32", SDPBackend.EFFICIENT_ATTENTION),
                         ("SDPA math f32", SDPBackend.MATH)):
            def f(be=be):
                with sdpa_kernel([be]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            try:
                out = f()
                err = (out[:1].double() - ref).abs().max().item() / scale
                t = do_bench(f, warmup=10, rep=100, return_mode="median")
                print(f"| {b}, {h}, {n}, {d} | {name} | {t:.4f} | {flops / t / 1e9:.1f} | "
                      f"{err:.2e} |", flush=True)
            except Exception as e:  # a backend that does not take the shape says so
                print(f"| {b}, {h}, {n}, {d} | {name} | n/a |  | {type(e).__name__}: "
                      f"{str(e)[:80]} |", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
