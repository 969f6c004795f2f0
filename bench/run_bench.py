#!/usr/bin/env python3
"""flashgen GPU benchmark: PyTorch baselines and flashgen kernels in ONE run, one table.

Backends per (variant, shape): SDPA flash / cuDNN / efficient (where they apply),
FlexAttention (torch.compile'd; kernel time, and block-mask construction timed separately),
torch.compile of the naive code, eager naive. flashgen rows (--flashgen BIN) are kernels
compiled from the .attn programs (examples/, bench/programs/ for the non-causal alibi and
document forms the baselines use) and timed by BIN (bench/gpu/fg_bench or `flashgen bench`:
CUDA events, median of 30 warm runs) in the same device call. The older hand-written-Spec
harness rows (--harness-log) are still accepted.

Timing: triton.testing.do_bench median (events, warm-up first). TF/s counts only unmasked work
(causal halves the FLOPs; window/prefix/document use the mask's density). Error: max |out - ref|
against an f32 reference on the first batch element.

Usage (on the GPU machine, via scripts/gpu_check):
  python3 bench/run_bench.py --parts sdpa,flex,compile,eager --variants vanilla,causal \
      --shapes 8x16x4096 --dims 128,64 [--harness-log FILE] [--json FILE] [--results FILE]
"""
import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys

import torch
import torch._dynamo
import torch.nn.functional as F

ROWS = []


def timeit(fn, warm=25, rep=100):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=warm, rep=rep, return_mode="median")


def add(variant, shape, backend, ms=None, flops=None, err=None, note=""):
    tf = flops / (ms * 1e-3) / 1e12 if (ms and flops) else None
    ROWS.append(dict(variant=variant, shape=shape, backend=backend, ms=ms, tflops=tf, err=err,
                     note=note))
    print(f"{variant:14s} {shape:26s} {backend:20s} "
          f"{(f'{ms:9.3f} ms' if ms else '      n/a   ')} "
          f"{(f'{tf:7.1f} TF/s' if tf else '    n/a     ')} "
          f"{(f'err {err:.2e}' if err is not None else '')} {note}", flush=True)


def measure(variant, shape, backend, fn, flops, ref=None, slice0=None):
    """Run fn once (error vs ref on the first batch element), then time it."""
    try:
        out = fn()
        torch.cuda.synchronize()
        err = None
        if ref is not None:
            o = out if slice0 is None else slice0(out)
            err = (o.float() - ref).abs().max().item()
        add(variant, shape, backend, timeit(fn), flops, err)
    except Exception as e:  # a backend that cannot take the case is a row, not a crash
        add(variant, shape, backend, note="FAILED " + (type(e).__name__ + ": " + str(e))
            .replace("\n", " ")[:140])
    finally:
        torch.cuda.empty_cache()


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


def doc_ids(n):
    """The 12 contiguous documents of mask_cases, as int32 (same generator)."""
    g = torch.Generator().manual_seed(0)
    doc = torch.zeros(n, dtype=torch.int32)
    for c in sorted(torch.randint(1, n, (11,), generator=g).tolist()):
        doc[c:] += 1
    return doc


def flashgen_case(args, variant, B, H, N, D):
    """(program file, sizes, shape label, extra NAME=FILE.npy inputs) of one flashgen row."""
    src = os.path.join(EXAMPLES, variant + ".attn")
    extra = []
    sizes = f"b={B},h={H},m=n={N},d=e={D}"
    shape = f"b{B} h{H} n{N} d{D}"
    if variant == "alibi":  # the baselines time non-causal ALiBi
        src = os.path.join(PROGRAMS, "alibi_bias.attn")
    elif variant == "rel_bias":  # causal plus table[h, clamp(n - m + 64, 0, r - 1)], r = 129
        src = os.path.join(PROGRAMS, "rel_bias.attn")
        sizes += ",r=129"
    elif variant == "document":  # non-causal, 12 contiguous documents like mask_cases
        src = os.path.join(PROGRAMS, "document_full.attn")
        sizes += f",t={N}"
        import numpy as np
        path = os.path.join(args.tmp, f"doc{N}.npy")
        np.save(path, doc_ids(N).numpy())
        extra = [f"doc={path}"]
    elif variant == "gqa":
        sizes = f"b={B},g={max(H // 8, 1)},r=8,m=n={N},d=e={D}"
        shape = f"b{B} h{max(H // 8, 1) * 8}/{max(H // 8, 1)} n{N} d{D}"
    elif variant == "diff_attn":
        sizes = f"b={B},h={H},m=n={N},d={D},e={2 * D}"
        shape = f"b{B} h{H} n{N} d{D} dv{2 * D}"
    elif variant == "cross":
        sizes = f"b={B},h={H},m=333,n={N},d=e={D}"
        shape = f"b{B} h{H} m333 n{N} d{D}"
    elif variant == "evoformer_row":
        sizes, shape = f"b={B},s=256,h=4,m=n=i=j=256,d=32", f"b{B} s256 h4 r256 d32"
    elif variant == "evoformer_col":
        sizes, shape = f"b={B},i=256,h=4,m=n=256,d=32", f"b{B} i256 h4 s256 d32"
    return src, sizes, shape, extra


def add_fg(variant, shape, fields):
    ms, tf = float(fields[3]), float(fields[4])
    ROWS.append(dict(variant=variant, shape=shape, backend="flashgen", ms=ms, tflops=tf,
                     err=None, note=f"{float(fields[5]):.2f} of peak"))
    print(f"{variant:14s} {shape:26s} {'flashgen':20s} {ms:9.3f} ms {tf:7.1f} TF/s", flush=True)


def flashgen_sweep(args, variant, cases):
    """flashgen rows of one variant at several (B, H, N, D) in one fg_bench process (one
    compile per head dim; the kernel serves every other extent)."""
    if not args.flashgen or not args.flashgen.endswith("fg_bench"):
        for c in cases:
            flashgen_row(args, variant, *c, force=True)
        return
    specs = [flashgen_case(args, variant, *c) for c in cases]
    cmd = [args.flashgen, "sweep", specs[0][0]] + \
        [";".join([sz] + ex) for (_, sz, _, ex) in specs]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        by_sizes = {}  # "BENCH name SIZES ..." / "BENCHFAIL SIZES why"
        for l in r.stdout.splitlines():
            f = l.split()
            if f[:1] == ["BENCH"] and len(f) >= 6:
                by_sizes[f[2]] = l
            elif f[:1] == ["BENCHFAIL"] and len(f) >= 2:
                by_sizes[f[1]] = l
        for (_, sz, shape, _) in specs:
            line = [by_sizes[sz]] if sz in by_sizes else []
            if line and line[-1].startswith("BENCH "):
                add_fg(variant, shape, line[-1].split())
            else:
                why = line[-1] if line else (r.stderr or "no output").strip()[:200]
                add(variant, shape, "flashgen", note="FAILED " + why.replace("\n", " ")[:200])
    except Exception as e:
        for (_, _, shape, _) in specs:
            add(variant, shape, "flashgen", note="FAILED " + str(e)[:200])


def flashgen_row(args, variant, B, H, N, D, force=False):
    """Times the flashgen kernel of one variant with args.flashgen (fg_bench / flashgen bench)."""
    if not args.flashgen or (args.sweep and not force):
        return
    src, sizes, shape, extra = flashgen_case(args, variant, B, H, N, D)
    cmd = [args.flashgen, "bench", src, sizes] if args.flashgen.endswith("fg_bench") else \
        [args.flashgen, "bench", src, "--sizes", sizes, "--backend", "cuda"] + \
        [a for e in extra for a in ("--input", e)]
    if args.flashgen.endswith("fg_bench"):
        cmd += extra
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        line = [l for l in r.stdout.splitlines() if l.startswith("BENCH ")]
        if r.returncode != 0 or not line:
            raise RuntimeError((r.stderr or r.stdout).strip().replace("\n", " ")[:200])
        add_fg(variant, shape, line[-1].split())
    except Exception as e:
        add(variant, shape, "flashgen", note="FAILED " + str(e)[:200])


def naive_attn(q, k, v, scale, mask=None, bias=None, cap=None):
    s = (q @ k.transpose(-2, -1)) * scale
    if cap is not None:
        s = cap * torch.tanh(s / cap)
    if bias is not None:
        s = s + bias
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s.float(), -1).to(q.dtype) @ v


def ref_attn(q, k, v, scale, mask=None, bias=None, cap=None):
    q, k, v = q[:1].float(), k[:1].float(), v[:1].float()
    if bias is not None and bias.dim() == 4:
        bias = bias[:1]
    return naive_attn(q, k, v, scale, mask, None if bias is None else bias.float(), cap)


def mask_cases(n, dev):
    """name -> (mask_mod for Flex, dense bool mask [n, n]) for the index/data masks."""
    i = torch.arange(n, device=dev)
    g = torch.Generator().manual_seed(0)
    doc = torch.zeros(n, dtype=torch.int32)
    for c in sorted(torch.randint(1, n, (11,), generator=g).tolist()):
        doc[c:] += 1
    doc = doc.to(dev)
    w, pre = 256, 256
    return {
        "causal": (lambda b, h, qi, ki: qi >= ki, i[:, None] >= i[None, :]),
        "sliding_window": (lambda b, h, qi, ki: (qi >= ki) & (qi - ki <= w),
                           (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] <= w)),
        "prefix_lm": (lambda b, h, qi, ki: (qi >= ki) | (ki < pre),
                      (i[:, None] >= i[None, :]) | (i[None, :] < pre)),
        "document": (lambda b, h, qi, ki: doc[qi] == doc[ki], doc[:, None] == doc[None, :]),
    }


def bench_std(args, variant, B, H, N, D, dev="cuda"):
    """vanilla, causal, alibi, softcap and the mask variants at one shape."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    dt = torch.bfloat16
    q, k, v = (torch.randn(B, H, N, D, device=dev, dtype=dt) for _ in range(3))
    scale = 1 / math.sqrt(D)
    shape = f"b{B} h{H} n{N} d{D}"
    masks = mask_cases(N, dev)
    mask_mod, mask, bias, cap, score_mod = None, None, None, None, None
    if variant in masks:
        mask_mod, mask = masks[variant]
    if variant == "alibi":
        slopes = torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)], device=dev)
        idx = torch.arange(N, device=dev)
        # The reference adds the bias in f32: rounded to bf16, slope * (n - m) (up to ~2K) is
        # off by up to 8 and the reference by up to ~4 in the output. SDPA needs the bf16 one.
        bias_f32 = slopes.view(H, 1, 1) * (idx.view(1, 1, N) - idx.view(1, N, 1)).float()
        bias = bias_f32.to(dt)
        score_mod = lambda s, b, h, qi, ki: s + slopes[h] * (ki - qi)
    if variant == "rel_bias":  # bench/programs/rel_bias.attn: causal, a gathered bias
        mask_mod, mask = masks["causal"]
        table = torch.randn(H, 129, device=dev)
        idx = torch.arange(N, device=dev)
        rel = (idx.view(1, N) - idx.view(N, 1) + 64).clamp(0, 128)  # [m, n]: n - m + 64
        bias_f32 = table[:, rel]  # [h, m, n]
        bias = bias_f32.to(dt)
        score_mod = lambda s, b, h, qi, ki: s + table[h, (ki - qi + 64).clamp(0, 128)]
    if variant == "softcap":
        cap = 30.0
        score_mod = lambda s, b, h, qi, ki: cap * torch.tanh(s / cap)
    flashgen_row(args, variant, B, H, N, D)
    dens = mask.float().mean().item() if mask is not None else 1.0
    flops = 4 * B * H * N * N * D * dens
    ref = ref_attn(q, k, v, scale, mask, bias_f32 if variant in ("alibi", "rel_bias") else bias,
                   cap)
    first = lambda o: o[:1]
    parts = args.parts
    if "sdpa" in parts and variant in ("vanilla", "causal"):
        for name, be in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                         ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                         ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)):
            def f(be=be):
                with sdpa_kernel([be]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=variant == "causal")
            measure(variant, shape, name, f, flops, ref, first)
    elif "sdpa" in parts and cap is None:
        am = bias if bias is not None else mask
        if bias is not None and mask is not None:  # rel_bias: the bias, -inf where masked
            am = bias.masked_fill(~mask, float("-inf"))
        for name, be in (("sdpa_efficient_mask", SDPBackend.EFFICIENT_ATTENTION),
                         ("sdpa_cudnn_mask", SDPBackend.CUDNN_ATTENTION)):
            def f(be=be):
                with sdpa_kernel([be]):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=am)
            measure(variant, shape, name, f, flops, ref, first)
    if "flex" in parts:
        from torch.nn.attention.flex_attention import flex_attention, create_block_mask
        flex = torch.compile(flex_attention, dynamic=False)
        bm = None
        if mask_mod is not None:
            mk = lambda: create_block_mask(mask_mod, None, None, N, N, device=dev)
            bm = mk()
            add(variant, shape, "flex_block_mask", timeit(mk, 5, 20), None, None,
                "block-mask construction only")
        measure(variant, shape, "flex", lambda: flex(q, k, v, score_mod=score_mod, block_mask=bm),
                flops, ref, first)
        if bm is not None:  # kernel + mask construction, the fair cost when the mask changes
            mk_ms = ROWS[-2]["ms"]
            if ROWS[-1]["ms"] and mk_ms:
                add(variant, shape, "flex+block_mask", ROWS[-1]["ms"] + mk_ms, flops, None)
    if "compile" in parts and N <= args.max_naive_n:
        cn = torch.compile(naive_attn)
        measure(variant, shape, "compile_naive", lambda: cn(q, k, v, scale, mask, bias, cap),
                flops, ref, first)
    if "eager" in parts and N <= args.max_naive_n:
        measure(variant, shape, "eager_naive", lambda: naive_attn(q, k, v, scale, mask, bias, cap),
                flops, ref, first)
    del q, k, v
    torch.cuda.empty_cache()


def bench_diff(args, B, H, N, d, lam=0.8, dev="cuda"):
    """diff_attn: (softmax(q1 k1^T s) - lam softmax(q2 k2^T s)) v, v of width 2d."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    dt = torch.bfloat16
    q1, k1, q2, k2 = (torch.randn(B, H, N, d, device=dev, dtype=dt) for _ in range(4))
    v = torch.randn(B, H, N, 2 * d, device=dev, dtype=dt)
    sc = 1 / math.sqrt(d)
    flops = 2 * (2 * B * H * N * N * d + 2 * B * H * N * N * 2 * d)
    shape = f"b{B} h{H} n{N} d{d} dv{2 * d}"
    flashgen_row(args, "diff_attn", B, H, N, d)

    def naive(q1, k1, q2, k2, v):
        a1 = torch.softmax((q1 @ k1.transpose(-2, -1)).float() * sc, -1)
        a2 = torch.softmax((q2 @ k2.transpose(-2, -1)).float() * sc, -1)
        return (a1 - lam * a2).to(v.dtype) @ v
    ref = naive(*(t[:1].float() for t in (q1, k1, q2, k2, v)))
    first = lambda o: o[:1]
    if "sdpa" in args.parts:
        def f():
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return (F.scaled_dot_product_attention(q1, k1, v)
                        - lam * F.scaled_dot_product_attention(q2, k2, v))
        measure("diff_attn", shape, "sdpa_flash_x2", f, flops, ref, first)
    if "flex" in args.parts:
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
        measure("diff_attn", shape, "flex_x2", lambda: flex(q1, k1, v) - lam * flex(q2, k2, v),
                flops, ref, first)
    if "compile" in args.parts and N <= args.max_naive_n:
        cn = torch.compile(naive)
        measure("diff_attn", shape, "compile_naive", lambda: cn(q1, k1, q2, k2, v), flops, ref,
                first)
    if "eager" in args.parts and N <= args.max_naive_n:
        measure("diff_attn", shape, "eager_naive", lambda: naive(q1, k1, q2, k2, v), flops, ref,
                first)


def bench_evoformer_row(args, B, S=256, H=4, R=256, D=32, dev="cuda"):
    """evoformer_row: softmax(q k^T / sqrt(d) + pair[h, m, n] + keep-mask bias) v * sigmoid(g)."""
    dt = torch.bfloat16
    q, k, v, g = (torch.randn(B, S, H, R, D, device=dev, dtype=dt) for _ in range(4))
    pair = torch.randn(B, H, R, R, device=dev, dtype=dt)
    keep = torch.rand(B, S, R, device=dev) < 0.8
    sc = 1 / math.sqrt(D)
    # FLOPs: 4 * b * s * h * r * r * d (two contractions; the mask keeps every key in the count)
    flops = 4 * B * S * H * R * R * D
    shape = f"b{B} s{S} h{H} r{R} d{D}"
    flashgen_row(args, "evoformer_row", B, H, R, D)

    def naive(q, k, v, g, pair, keep):
        s = (q @ k.transpose(-2, -1)).float() * sc + pair[:, None].float() \
            + torch.where(keep, 0.0, -1e9)[:, :, None, None, :]
        return (torch.softmax(s, -1).to(v.dtype) @ v) * torch.sigmoid(g)
    ref = naive(*(t[:1].float() if t.dtype != torch.bool else t[:1]
                  for t in (q, k, v, g, pair, keep)))
    first = lambda o: o[:1]
    if "compile" in args.parts:
        cn = torch.compile(naive)
        measure("evoformer_row", shape, "compile_naive", lambda: cn(q, k, v, g, pair, keep),
                flops, ref, first)
    if "eager" in args.parts:
        measure("evoformer_row", shape, "eager_naive", lambda: naive(q, k, v, g, pair, keep),
                flops, ref, first)


def bench_gqa_lse_cross(args, variant, B, H, N, D, dev="cuda"):
    """gqa (causal, 16 query heads over 2 kv heads), lse (causal o and logsumexp) and cross
    (333 queries over N keys) against SDPA and FlexAttention."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    from torch.nn.attention.flex_attention import flex_attention, create_block_mask
    dt = torch.bfloat16
    M = 333 if variant == "cross" else N
    hk = max(H // 8, 1) if variant == "gqa" else H
    hq = hk * 8 if variant == "gqa" else H
    q = torch.randn(B, hq, M, D, device=dev, dtype=dt)
    k, v = (torch.randn(B, hk, N, D, device=dev, dtype=dt) for _ in range(2))
    causal = variant != "cross"
    flops = 4 * B * hq * M * N * D * (0.5 if causal else 1.0)
    shape = (f"b{B} h{hq}/{hk} n{N} d{D}" if variant == "gqa" else
             f"b{B} h{H} m333 n{N} d{D}" if variant == "cross" else f"b{B} h{H} n{N} d{D}")
    flashgen_row(args, variant, B, H, N, D)
    rep_kv = lambda t: t[:1].float().repeat_interleave(hq // hk, dim=1)
    i = torch.arange(N, device=dev)
    mask = (i[:, None] >= i[None, :]) if causal else None
    ref = naive_attn(q[:1].float(), rep_kv(k), rep_kv(v), 1 / math.sqrt(D), mask)
    first = lambda o: (o[0] if isinstance(o, tuple) else o)[:1]
    gqa = dict(enable_gqa=True) if variant == "gqa" else {}
    if "sdpa" in args.parts:
        for name, be in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                         ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
            def f(be=be):
                with sdpa_kernel([be]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
            measure(variant, shape, name + ("" if variant != "lse" else " (no lse output)"), f,
                    flops, ref, first)
    if "flex" in args.parts:
        flex = torch.compile(flex_attention, dynamic=False)
        bm = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, M, N, device=dev) \
            if causal else None
        measure(variant, shape, "flex", lambda: flex(q, k, v, block_mask=bm,
                                                     return_lse=variant == "lse", **gqa),
                flops, ref, first)
    del q, k, v
    torch.cuda.empty_cache()


def read_harness(path):
    """flashgen rows from the harness log of the same device call."""
    pat = re.compile(r"^TIME\s+(.+?)\s+(b\d+ h[\d/]+ m\d+ .+?)\s+([\d.]+) ms\s+([\d.]+) TF/s")
    for line in open(path):
        m = pat.match(line.strip())
        if m:
            name, shape = m.group(1), m.group(2).strip()
            ms, tf = float(m.group(3)), float(m.group(4))
            ROWS.append(dict(variant=name.split()[0], shape=shape, backend="flashgen " +
                             " ".join(name.split()[1:]), ms=ms, tflops=tf, err=None, note=""))


def write_results(path, args):
    commit = os.environ.get("FLASHGEN_COMMIT", "")  # the device copy may have no .git
    try:
        commit = commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                          capture_output=True, text=True).stdout.strip()
    except Exception:
        pass
    commit = commit or "unknown (set FLASHGEN_COMMIT)"
    gpu = torch.cuda.get_device_name()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"\n## {when} — {gpu}, torch {torch.__version__}, commit {commit}\n",
             f"`{' '.join(sys.argv[1:])}`; median ms (do_bench / CUDA events); TF/s counts "
             "unmasked work only; err = max abs vs f32 reference (first batch element).\n",
             "| variant | shape | backend | ms | TF/s | err |", "|---|---|---|---|---|---|"]
    if getattr(args, "skipped", None):
        lines[1] += (f" Time limit of the device call: baselines not run for {len(args.skipped)} "
                     f"cases ({', '.join(args.skipped)}).\n")
    for r in ROWS:
        lines.append(f"| {r['variant']} | {r['shape']} | {r['backend']} | "
                     f"{'%.3f' % r['ms'] if r['ms'] else 'n/a'} | "
                     f"{'%.1f' % r['tflops'] if r['tflops'] else ''} | "
                     f"{'%.1e' % r['err'] if r['err'] is not None else ''} {r['note']} |")
    with open(path, "a") as f:
        f.write("\n".join(lines[:2] + summary_lines() +
                          ["", "<details><summary>every row</summary>", ""] +
                          lines[2:] + ["", "</details>"]) + "\n")


def summary_lines():
    """One line per (variant, shape): flashgen against the fastest baseline kernel, and for
    masks against FlexAttention including its block-mask construction."""
    cases = {}
    for r in ROWS:
        cases.setdefault((r["variant"], r["shape"]), {})[r["backend"]] = r["ms"]
    out = ["| variant | shape | flashgen ms | fastest baseline (ms) | baseline / flashgen | "
           "flex+block_mask ms |", "|---|---|---|---|---|---|"]
    for (var, shape), b in cases.items():
        fg = b.get("flashgen")
        base = {k: v for k, v in b.items() if v and k != "flashgen" and
                not k.startswith("flex_block_mask") and k != "flex+block_mask"}
        best = min(base, key=base.get) if base else None
        ratio = f"{base[best] / fg:.2f}" if (best and fg) else ""
        fm = b.get("flex+block_mask")
        out.append(f"| {var} | {shape} | {('%.3f' % fg) if fg else 'n/a'} | "
                   f"{(best + ' %.3f' % base[best]) if best else ''} | {ratio} | "
                   f"{('%.3f' % fm) if fm else ''} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="sdpa,flex,compile,eager")
    ap.add_argument("--variants", default="vanilla,causal")
    ap.add_argument("--shapes", default="8x16x4096", help="BxHxN list, comma separated")
    ap.add_argument("--dims", default="128")
    ap.add_argument("--max-naive-n", type=int, default=4096)
    ap.add_argument("--sweep", action="store_true",
                    help="time every flashgen case first (fg_bench sweep), then the baselines")
    ap.add_argument("--deadline", type=float, default=0,
                    help="unix time after which no new baseline case starts (results still written)")
    ap.add_argument("--evo-batches", default="1", help="evoformer batch sizes, comma separated")
    ap.add_argument("--harness-log")
    ap.add_argument("--flashgen", help="fg_bench or flashgen binary: adds flashgen rows")
    ap.add_argument("--tmp", default="/tmp", help="where generated inputs (doc ids) go")
    ap.add_argument("--json")
    ap.add_argument("--results", help="append a markdown table to this file")
    args = ap.parse_args()
    args.parts = set(args.parts.split(","))
    args.evo_batches = [int(x) for x in args.evo_batches.split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch._dynamo.config.cache_size_limit = 256
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    if args.harness_log and os.path.exists(args.harness_log):
        read_harness(args.harness_log)
    shapes = [tuple(int(x) for x in shp.split("x")) for shp in args.shapes.split(",")]
    dims = [int(x) for x in args.dims.split(",")]
    if args.sweep:  # flashgen rows of every case first: one process per variant and head dim
        for var in args.variants.split(","):
            if var.startswith("evoformer"):
                flashgen_sweep(args, var, [(B, 4, 256, 32) for B in args.evo_batches])
                continue
            for D in dims:
                flashgen_sweep(args, var, [(B, H, N, D) for (B, H, N) in shapes])
    import time
    skipped = []
    if args.sweep and not (args.parts & {"sdpa", "flex", "compile", "eager"}):
        shapes = []  # flashgen rows only: all timed above
    for (B, H, N) in shapes:
        for D in dims:
            for var in args.variants.split(","):
                if args.deadline and time.time() > args.deadline:
                    skipped.append(f"{var} b{B} h{H} n{N} d{D}")
                    continue
                if var == "diff_attn":
                    bench_diff(args, B, H, N, D)
                elif var == "evoformer_row":
                    if str(D) == args.dims.split(",")[0] and (B, H, N) == shapes[0]:
                        for eb in args.evo_batches:
                            bench_evoformer_row(args, eb)
                elif var in ("gqa", "lse", "cross"):
                    bench_gqa_lse_cross(args, var, B, H, N, D)
                elif var == "evoformer_col":
                    # flashgen only (no baseline written for it yet)
                    if str(D) == args.dims.split(",")[0]:
                        flashgen_row(args, var, 1, H, N, D)
                else:
                    bench_std(args, var, B, H, N, D)
    if skipped:
        print(f"deadline: skipped the baselines of {len(skipped)} cases: {', '.join(skipped)}")
        args.skipped = skipped
    print("\n=== table ===")
    for r in ROWS:
        print(f"{r['variant']:14s} {r['shape']:26s} {r['backend']:24s} "
              f"{(('%9.3f' % r['ms']) if r['ms'] else '      n/a')} "
              f"{(('%7.1f' % r['tflops']) if r['tflops'] else '       ')} {r['note']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(ROWS, f, indent=1)
    if args.results:
        write_results(args.results, args)


if __name__ == "__main__":
    main()
