#!/usr/bin/env python3
"""flashgen from Python on the GPU: what a PyTorch user pays per call, beside the baselines,
in one run (scripts/gpu_check python).

Rows (bf16, median of triton.testing.do_bench, CUDA events around each call, warm):
  - flashgen.compile(examples/X.attn) called with torch CUDA tensors (the whole Python call:
    argument checks, output allocation by torch, the error word, the launch on the current
    stream);
  - the same call replayed from a torch.cuda.graph capture (the launch alone);
  - flashgen.torch.flex_attention with the mask or score mod (its trace cached);
  - SDPA (cuDNN and flash backends) and torch.compile'd FlexAttention with its block mask
    prebuilt, for the same shape.
A last row times a tiny call (b1 h1 n128 d64) to show the fixed per-call cost.
Prints a markdown table (bench/RESULTS.md takes it with the date, GPU and commit).
"""
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention as torch_flex
from triton.testing import do_bench

import flashgen
from flashgen.torch import flex_attention

ROOT = Path(__file__).resolve().parents[1]


def ms(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def graphed(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def main():
    commit = os.environ.get("FLASHGEN_COMMIT", "?")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, flashgen "
          f"{flashgen.__version__}, commit {commit}\n")
    print("| case | shape | flashgen call | flashgen graph replay | flashgen flex_attention "
          "| SDPA cuDNN | SDPA flash | Flex (compiled, mask prebuilt) |")
    print("|---|---|---|---|---|---|---|---|")
    cflex = torch.compile(torch_flex)
    for case, (B, H, L, D) in [("vanilla", (4, 16, 4096, 128)), ("causal", (4, 16, 4096, 128)),
                               ("causal", (1, 1, 128, 64))]:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, L, D, device="cuda", generator=g).bfloat16()
                   for _ in range(3))
        kern = flashgen.compile(ROOT / "examples" / f"{case}.attn")
        causal = case == "causal"
        mm = (lambda b, h, qi, ki: qi >= ki) if causal else None
        row = [ms(lambda: kern(q, k, v)), ms(graphed(lambda: kern(q, k, v))),
               ms(lambda: flex_attention(q, k, v, mask_mod=mm))]
        for be in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            try:
                with sdpa_kernel(be):
                    row.append(ms(lambda: F.scaled_dot_product_attention(q, k, v,
                                                                         is_causal=causal)))
            except RuntimeError:
                row.append(float("nan"))
        bm = create_block_mask(mm, B, H, L, L, device="cuda") if mm else None
        row.append(ms(lambda: cflex(q, k, v, block_mask=bm)))
        flashgen.check_errors()
        print(f"| {case} | b{B} h{H} n{L} d{D} | " + " | ".join(f"{x:.3f} ms" for x in row) +
              " |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
