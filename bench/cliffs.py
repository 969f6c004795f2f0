#!/usr/bin/env python3
"""The performance cliffs of unseen programs, flashgen beside FlexAttention and cuDNN in one run
(scripts/gpu_check cliffs). Each cliff is a ratio with a target:

  gather    bench/programs/rel_bias.attn (causal + a bias gathered from a [h, 129] table by a
            computed, clamped index) over examples/causal.attn: <= 1.25
  lengths   bench/programs/length_mask.attn with every length 1024 over
            bench/programs/index_square.attn (the same live tiles by an index rule): <= 1.25;
            with lengths 4096, 2048, 1024, 512 its time over every length 4096, against the
            fraction of live (row, key) pairs: <= 1.25x that fraction
  documents bench/programs/document_full.attn with 16 equal documents over
            bench/programs/index_blocks.attn (the same live tiles): <= 1.25; with 12 random
            documents against FlexAttention's kernel (block mask prebuilt; its build beside it)
  decode    examples/vanilla.attn at b8 h32 m1 n16K d128 against SDPA cuDNN: <= 0.45 ms
            (>= 3 TB/s of K and V)

flashgen rows are timed by bench/gpu/fg_bench (CUDA events, median of 30 warm runs), the
baselines by triton.testing.do_bench (median); run_bench.py's rows, table and summary.
Correctness of every program here is the GPU tests' job (tests/gpu), not this script's.

Usage: python3 bench/cliffs.py --flashgen build/fg_bench --tmp DIR [--results FILE] [--json F]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402  (its rows, timers, FlexAttention cases and results table)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIFFS = []  # (cliff, what, measured, target, ok)


def fg(args, variant, src, sizes, shape, extra=(), flops=None):
    """One flashgen row: `fg_bench bench SRC SIZES NAME=FILE.npy...`; returns its ms or None."""
    cmd = [args.flashgen, "bench", os.path.join(ROOT, src), sizes, *extra]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        line = [l for l in r.stdout.splitlines() if l.startswith("BENCH ")]
        if r.returncode != 0 or not line:
            raise RuntimeError((r.stderr or r.stdout).strip().replace("\n", " ")[:200])
        ms = float(line[-1].split()[3])
        rb.add(variant, shape, "flashgen", ms, flops)
        return ms
    except Exception as e:
        rb.add(variant, shape, "flashgen", note="FAILED " + str(e)[:200])
        return None


def npy(args, input_name, stem, array):
    """Saves array as DIR/STEM.npy; returns fg_bench's INPUT=FILE argument."""
    path = os.path.join(args.tmp, stem + ".npy")
    np.save(path, array)
    return f"{input_name}={path}"


def cliff(name, what, num, den, target, scale=1.0):
    """Records num / den against target (num <= target * scale * den passes)."""
    if num is None or den is None:
        CLIFFS.append((name, what, "n/a", f"<= {target:g}", "not measured"))
        return
    r = num / den
    CLIFFS.append((name, what, f"{r:.3f}" + (f" ({r / scale:.2f}x the live fraction {scale:.3f})"
                                             if scale != 1.0 else ""),
                   f"<= {target * scale:.3f}", "met" if r <= target * scale else "MISSED"))


def flex_mask_row(args, variant, shape, mask_mod, B, N, q, k, v, flops):
    """FlexAttention's kernel with its block mask prebuilt, and the build, as rows."""
    from torch.nn.attention.flex_attention import flex_attention, create_block_mask
    flex = torch.compile(flex_attention, dynamic=False)
    make = lambda: create_block_mask(mask_mod, B, None, N, N, device="cuda")
    bm = make()
    rb.add(variant, shape, "flex_block_mask", rb.timeit(make, 5, 20), None, None,
           "block-mask construction only")
    rb.measure(variant, shape, "flex", lambda: flex(q, k, v, block_mask=bm), flops)


def gather(args, B=4, H=16, N=4096, D=128):
    shape = f"b{B} h{H} n{N} d{D}"
    base = fg(args, "causal", "examples/causal.attn", f"b={B},h={H},m=n={N},d=e={D}", shape,
              flops=2 * B * H * N * N * D)
    rb.bench_std(args, "rel_bias", B, H, N, D)  # flashgen row (args.flashgen) and Flex's
    got = [r["ms"] for r in rb.ROWS if r["variant"] == "rel_bias" and r["backend"] == "flashgen"]
    cliff("gather", f"rel_bias / causal, {shape}", got[-1] if got else None, base, 1.25)


def lengths(args, B=4, H=16, N=4096, D=128):
    shape = f"b{B} h{H} n{N} d{D}"
    sizes = f"b={B},h={H},m=n={N},d=e={D}"
    lens = np.array([4096, 2048, 1024, 512], np.int32)[:B]
    live = float((lens.astype(np.float64) ** 2).sum() / (B * N * N))
    full = fg(args, "length_mask (all 4096)", "bench/programs/length_mask.attn", sizes, shape,
              [npy(args, "len", "len_full", np.full(B, N, np.int32))], 4 * B * H * N * N * D)
    mixed = fg(args, "length_mask (4096..512)", "bench/programs/length_mask.attn", sizes, shape,
               [npy(args, "len", "len_mixed", lens)], 4 * H * D * float((lens.astype(float) ** 2).sum()))
    cliff("lengths", f"lengths {'/'.join(map(str, lens))} / all {N}, {shape}", mixed, full, 1.25,
          live)
    sq = 4 * B * H * 1024 * 1024 * D
    data = fg(args, "length_mask (all 1024)", "bench/programs/length_mask.attn", sizes, shape,
              [npy(args, "len", "len_1024", np.full(B, 1024, np.int32))], sq)
    index = fg(args, "index_square", "bench/programs/index_square.attn", sizes, shape, flops=sq)
    cliff("lengths", f"length_mask (all 1024) / index_square, {shape}", data, index, 1.25)
    if "flex" in args.parts:  # the mixed lengths on FlexAttention (a block mask per batch)
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        ln = torch.tensor(lens, device="cuda")
        flex_mask_row(args, "length_mask (4096..512)", shape,
                      lambda b, h, qi, ki: (qi < ln[b]) & (ki < ln[b]), B, N, q, k, v,
                      4 * H * D * float((lens.astype(float) ** 2).sum()))
        del q, k, v
        torch.cuda.empty_cache()


def documents(args, B=4, H=16, N=4096, D=128):
    shape = f"b{B} h{H} n{N} d{D}"
    sizes = f"b={B},h={H},m=n={N},d=e={D}"
    flops = 4 * B * H * N * 256 * D
    data = fg(args, "document (16 equal)", "bench/programs/document_full.attn", sizes + f",t={N}",
              shape, [npy(args, "doc", "doc_equal", (np.arange(N) // 256).astype(np.int32))], flops)
    index = fg(args, "index_blocks", "bench/programs/index_blocks.attn", sizes, shape, flops=flops)
    cliff("documents", f"document (16 equal) / index_blocks, {shape}", data, index, 1.25)
    rb.bench_std(args, "document", B, H, N, D)  # 12 random documents: flashgen and Flex
    by = {r["backend"]: r["ms"] for r in rb.ROWS if r["variant"] == "document"}
    cliff("documents", f"document (12 random) / Flex's kernel, {shape} (issue target <= 1/1.3)",
          by.get("flashgen"), by.get("flex"), 1 / 1.3)


def decode(args, B=8, H=32, N=16384, D=128):
    from torch.nn.attention import sdpa_kernel, SDPBackend
    import torch.nn.functional as F
    shape = f"b{B} h{H} m1 n{N} d{D}"
    kv = 2 * B * H * N * D * 2
    ms = fg(args, "decode", "examples/vanilla.attn", f"b={B},h={H},m=1,n={N},d=e={D}", shape,
            flops=4 * B * H * N * D)
    q = torch.randn(B, H, 1, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for name, be in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                     ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
        def f(be=be):
            with sdpa_kernel([be]):
                return F.scaled_dot_product_attention(q, k, v)
        rb.measure("decode", shape, name, f, 4 * B * H * N * D)
    for r in rb.ROWS:
        if r["variant"] == "decode" and r["ms"]:
            r["note"] = f"{kv / r['ms'] / 1e9:.2f} TB/s of K/V"
    cliff("decode", f"flashgen ms, {shape} ({kv / 1e9:.2f} GB of K/V)", ms, 1.0, 0.45)
    del q, k, v
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flashgen", required=True, help="bench/gpu/fg_bench binary")
    ap.add_argument("--tmp", default="/tmp")
    ap.add_argument("--parts", default="flex", help="'flex' adds FlexAttention rows; 'none'")
    ap.add_argument("--cliffs", default="gather,lengths,documents,decode")
    ap.add_argument("--results", help="append the tables to this markdown file")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.parts = set(args.parts.split(","))
    args.sweep = False
    args.max_naive_n = 0
    torch.backends.cuda.matmul.allow_tf32 = False
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    steps = dict(gather=gather, lengths=lengths, documents=documents, decode=decode)
    for c in args.cliffs.split(","):
        try:
            steps[c](args)
        except Exception as e:  # one cliff that fails to run is a row, not the end of the run
            CLIFFS.append((c, "the step failed", type(e).__name__ + ": " + str(e)[:160], "", "FAILED"))
    table = ["| cliff | ratio | measured | target | |", "|---|---|---|---|---|"] + \
        [f"| {c} | {w} | {m} | {t} | {ok} |" for (c, w, m, t, ok) in CLIFFS]
    print("\n".join(table))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rb.ROWS, cliffs=CLIFFS), f, indent=1)
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n### Cliffs (bench/cliffs.py)\n\n" + "\n".join(table) + "\n")
        rb.write_results(args.results, args)


if __name__ == "__main__":
    main()
