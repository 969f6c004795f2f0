"""The CUDA path from Python (needs a GPU; skipped without one): torch CUDA tensors in place,
outputs from torch's allocator, the launch on torch's current stream, a torch.cuda.graph capture
replayed with new input values (and one whose call compiles the few-rows kernel), error words reported without a host synchronization, the
careful build, and flex_attention on the GPU. Shows python/flashgen/_kernel.py
(_run_torch_cuda) and cuda_launch_device (src/compiler/run_cuda.cpp)."""
from pathlib import Path
import warnings

import pytest
import torch
import torch.nn.functional as F

import flashgen

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and flashgen.cuda_available()),
    reason="no CUDA GPU (torch or flashgen cannot use one)")

TOL = 2e-2  # bf16 outputs (8 bits of mantissa) of f32 accumulations


def qkv(b=2, h=4, m=300, n=300, d=64, seed=0, dtype=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, h, L, d, device="cuda", generator=g).to(dtype) for L in (m, n, n)]


def test_causal_on_cuda_tensors_matches_sdpa_on_a_side_stream():
    kern = flashgen.compile(EX / "causal.attn")
    q, k, v = qkv()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        o = kern(q, k, v)
    s.synchronize()
    assert o.is_cuda and o.dtype == torch.bfloat16 and o.shape == q.shape
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    assert (o.float() - want).abs().max().item() < TOL
    flashgen.check_errors()


def test_a_cuda_graph_capture_replays_with_new_inputs():
    kern = flashgen.compile(EX / "causal.attn")
    q, k, v = qkv(seed=1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up: compile and load before the capture
        kern(q, k, v)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kern(q, k, v)
    for seed in (2, 3):
        nq, nk, nv = qkv(seed=seed)
        q.copy_(nq), k.copy_(nk), v.copy_(nv)
        graph.replay()
        torch.cuda.synchronize()
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        assert (out.float() - want).abs().max().item() < TOL
    kern.check_errors()


def test_a_decode_step_captured_after_a_prefill_warm_up():
    # The warm-up loads the program with a call of many rows; the captured call of one row is
    # the first to run the few-rows kernel, which compiles and loads inside the capture.
    kern = flashgen.compile(EX / "vanilla.attn")
    q, k, v = qkv(m=300, n=300, seed=4)
    kern(q, k, v)
    torch.cuda.synchronize()
    q1 = q[:, :, :1].clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kern(q1, k, v)
    for seed in (5, 6):
        nq, nk, nv = qkv(m=1, n=300, seed=seed)
        q1.copy_(nq), k.copy_(nk), v.copy_(nv)
        graph.replay()
        torch.cuda.synchronize()
        want = F.scaled_dot_product_attention(q1.float(), k.float(), v.float())
        assert (out.float() - want).abs().max().item() < TOL
    kern.check_errors()


RELATIVE_BIAS = """
program rel(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[u]) {
  s = sum(q * k, d) / sqrt(size(d)) + table[n - m + 8]
  out o: bf16[b, h, m, e] = sum(softmax(where(n <= m + 4, s, -inf), n) * v, n)
}
"""


def test_an_out_of_range_index_is_reported_later_without_a_host_sync():
    kern = flashgen.compile(RELATIVE_BIAS)
    q, k, v = qkv(m=256, n=256)
    table = torch.zeros(13, device="cuda")  # n - m + 8 reaches 12 (n <= m + 4) and -247
    kern(q, k, v, table)  # returns at once; the error word comes back asynchronously
    with pytest.raises(flashgen.CallError, match=r"out of range \[0, 13\).*'table'"):
        flashgen.check_errors()


def test_nan_behind_masked_keys_warns_plain_and_is_exact_careful():
    src = (EX / "causal.attn").read_text()
    q, k, v = qkv(m=128, n=128, seed=4)
    v[:, :, 100] = float("nan")  # keys 100.. are masked for rows < 100
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float().nan_to_num(0),
                                          is_causal=True)
    careful = flashgen.compile(src, careful=True)
    o = careful(q, k, v)
    careful.check_errors()
    assert torch.isfinite(o[:, :, :100]).all()
    assert (o[:, :, :100].float() - want[:, :, :100]).abs().max().item() < TOL
    plain = flashgen.compile(src)
    plain(q, k, v)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        plain.check_errors()
    assert any(issubclass(x.category, flashgen.FlashgenWarning) for x in w)


def test_f32_inputs_are_converted_and_strided_ones_packed():
    kern = flashgen.compile(EX / "causal.attn")
    q, k, v = qkv(seed=5, dtype=torch.float32)
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # strided view
    o = kern(qt, k, v)
    want = F.scaled_dot_product_attention(q.bfloat16().float(), k.bfloat16().float(),
                                          v.bfloat16().float(), is_causal=True)
    assert (o.float() - want).abs().max().item() < TOL


def test_strided_bf16_views_are_read_in_place():
    kern = flashgen.compile(EX / "causal.attn")
    g = torch.Generator(device="cuda").manual_seed(7)
    B, M, H, D = 2, 333, 4, 64
    proj = torch.randn(B, M, 3, H, D, device="cuda", generator=g).bfloat16()  # fused q/k/v
    q, k, v = (proj[:, :, i].transpose(1, 2) for i in range(3))  # [B, H, M, D] views
    assert not q.is_contiguous() and flashgen._kernel._gpu_in_place(q)
    o = kern(q, k, v)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    assert (o.float() - want).abs().max().item() < TOL
    odd = torch.randn(B, H, M, D + 8, device="cuda", generator=g).bfloat16()[..., 4:D + 4]
    assert not flashgen._kernel._gpu_in_place(odd)  # a start 8 bytes in: packed first
    o2 = kern(odd, k, v)
    want2 = F.scaled_dot_product_attention(odd.float(), k.float(), v.float(), is_causal=True)
    assert (o2.float() - want2).abs().max().item() < TOL
    flashgen.check_errors()


@pytest.mark.parametrize("variant", ["causal", "document", "alibi", "softcap", "gqa"])
def test_flex_attention_on_the_gpu(variant):
    from torch.nn.attention.flex_attention import flex_attention as torch_flex
    from flashgen.torch import flex_attention

    B, H, L, D = 2, 8, 512, 64
    hkv = 2 if variant == "gqa" else H
    g = torch.Generator(device="cuda").manual_seed(6)
    q = torch.randn(B, H, L, D, device="cuda", generator=g).bfloat16()
    k, v = (torch.randn(B, hkv, L, D, device="cuda", generator=g).bfloat16() for _ in range(2))
    doc = torch.sort(torch.randint(0, 4, (L,), device="cuda", generator=g)).values
    slopes = torch.rand(H, device="cuda", generator=g)
    sm = {"alibi": lambda s, b, h, qi, ki: s + slopes[h] * (ki - qi),
          "softcap": lambda s, b, h, qi, ki: 30.0 * torch.tanh(s / 30.0)}.get(variant)
    mm = {"causal": lambda b, h, qi, ki: qi >= ki,
          "gqa": lambda b, h, qi, ki: qi >= ki,
          "document": lambda b, h, qi, ki: doc[qi] == doc[ki]}.get(variant)
    o = flex_attention(q, k, v, score_mod=sm, mask_mod=mm, enable_gqa=hkv != H)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.nn.attention.flex_attention import create_block_mask
        bm = create_block_mask(mm, B, H, L, L, device="cuda") if mm else None
        want = torch_flex(q.float(), k.float(), v.float(), score_mod=sm, block_mask=bm,
                          enable_gqa=hkv != H)
    assert o.is_cuda and (o.float() - want).abs().max().item() < TOL
    flashgen.check_errors()
