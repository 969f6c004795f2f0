"""flashgen.torch.flex_attention against torch.nn.attention.flex_attention: the FlexAttention
variants (causal, sliding window, prefix LM, document ids, ALiBi, soft-capping, a bias gathered
from a table, GQA), return_lse, block_mask, rows that attend nothing, and the errors for mods it
cannot translate. Shows python/flashgen/torch/_flex.py."""
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask
from torch.nn.attention.flex_attention import flex_attention as torch_flex

import flashgen
from flashgen.torch import flex_attention

warnings.filterwarnings("ignore", message=".*flex_attention.*")

B, H, M, N, D = 2, 4, 80, 72, 16
G = torch.Generator().manual_seed(0)
BIAS = torch.randn(H, 256, generator=G)
DOC = torch.sort(torch.randint(0, 3, (max(M, N),), generator=G)).values
SLOPES = torch.rand(H, generator=G)
LENGTHS = torch.tensor([50, 72])

VARIANTS = {
    "vanilla": (None, None),
    "causal": (None, lambda b, h, qi, ki: qi >= ki),
    "sliding_window": (None, lambda b, h, qi, ki: (qi - ki).abs() <= 8),
    "prefix_lm": (None, lambda b, h, qi, ki: (ki <= qi) | (ki < 10)),
    "document": (None, lambda b, h, qi, ki: DOC[qi] == DOC[ki]),
    "alibi": (lambda s, b, h, qi, ki: s + SLOPES[h] * (ki - qi), None),
    "softcap": (lambda s, b, h, qi, ki: 20.0 * torch.tanh(s / 20.0), None),
    "table_bias": (lambda s, b, h, qi, ki: s + BIAS[h, torch.clamp(qi - ki + 128, 0, 255)],
                   lambda b, h, qi, ki: qi >= ki),
    "lengths": (None, lambda b, h, qi, ki: (ki < LENGTHS[b]) & (qi < LENGTHS[b])),
}


def qkv(hq=H, hkv=H, dtype=torch.float32, seed=1):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, hq, M, D, generator=g).to(dtype),
            torch.randn(B, hkv, N, D, generator=g).to(dtype),
            torch.randn(B, hkv, N, D, generator=g).to(dtype))


def reference(q, k, v, sm, mm, **kw):
    bm = create_block_mask(mm, B, q.shape[1], M, N, device="cpu") if mm else None
    return torch_flex(q, k, v, score_mod=sm, block_mask=bm, return_lse=True, **kw)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_matches_flex_attention(name):
    sm, mm = VARIANTS[name]
    q, k, v = qkv()
    want, want_lse = reference(q, k, v, sm, mm)
    o, lse = flex_attention(q, k, v, score_mod=sm, mask_mod=mm, return_lse=True)
    assert o.shape == want.shape and o.dtype == torch.float32
    assert torch.allclose(o, want, atol=2e-5, rtol=1e-4)
    live = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), live)
    assert torch.allclose(lse[live], want_lse[live], atol=2e-5, rtol=1e-4)


W = 8
OFFSET = torch.tensor(5)
MORE = {  # mods nobody here wrote first: attention-gym style masks and scores
    "natten_2d": (None, lambda b, h, qi, ki: ((qi // W - ki // W).abs() <= 1)
                  & ((qi % W - ki % W).abs() <= 1)),
    "dilated_causal": (None, lambda b, h, qi, ki: ((qi - ki) % 3 == 0) & (ki <= qi)),
    "causal_offset_tensor": (None, lambda b, h, qi, ki: qi + OFFSET >= ki),
    "xor_blocks": (None, lambda b, h, qi, ki: ((qi < 32) ^ (ki < 32)) | (qi == ki)),
    "squared_distance": (lambda s, b, h, qi, ki: s - ((qi - ki).float() ** 2) * 0.01, None),
    "per_head_temperature": (lambda s, b, h, qi, ki: s * (h + 1).float() / 2, None),
    "sign_bias": (lambda s, b, h, qi, ki: s + torch.sign(qi - ki).float()
                  + torch.sign(s) * 0.1, None),
    "softplus_scores": (lambda s, b, h, qi, ki: torch.log1p(torch.exp(s)), None),
    "clipped_both_ways": (lambda s, b, h, qi, ki: torch.maximum(s, torch.tensor(-1.0))
                          + torch.minimum(s, torch.tensor(1.0)), None),
}


@pytest.mark.parametrize("name", list(MORE))
def test_more_mods_match_flex_attention(name):
    sm, mm = MORE[name]
    q, k, v = qkv()
    want, _ = reference(q, k, v, sm, mm)
    o = flex_attention(q, k, v, score_mod=sm, mask_mod=mm)
    assert torch.allclose(o, want, atol=2e-5, rtol=1e-4)


def test_rows_that_attend_nothing_are_zero_with_lse_minus_inf():
    q, k, v = qkv()
    mm = VARIANTS["lengths"][1]
    o, lse = flex_attention(q, k, v, mask_mod=mm, return_lse=True)
    assert torch.all(o[0, :, 50:] == 0)
    assert torch.all(lse[0, :, 50:] == -float("inf"))
    assert torch.all(torch.isfinite(lse[1, :, :72])) and torch.all(o[1, :, 72:] == 0)
    assert torch.all(lse[1, :, 72:] == -float("inf"))


@pytest.mark.parametrize("hkv", [1, 2])
def test_gqa_matches_flex_attention(hkv):
    sm, mm = VARIANTS["alibi"][0], VARIANTS["causal"][1]
    q, k, v = qkv(hq=H, hkv=hkv)
    want, _ = reference(q, k, v, sm, mm, enable_gqa=True)
    o = flex_attention(q, k, v, score_mod=sm, mask_mod=mm, enable_gqa=True)
    assert torch.allclose(o, want, atol=2e-5, rtol=1e-4)
    with pytest.raises(flashgen.CallError, match="enable_gqa"):
        flex_attention(q, k, v)


def test_scale_block_mask_and_bf16():
    q, k, v = qkv(dtype=torch.bfloat16)
    mm = VARIANTS["sliding_window"][1]
    bm = create_block_mask(mm, B, H, M, N, device="cpu")
    want = torch_flex(q.float(), k.float(), v.float(), block_mask=bm, scale=0.3)
    o = flex_attention(q, k, v, block_mask=bm, scale=0.3)
    assert o.dtype == torch.bfloat16
    assert (o.float() - want).abs().max().item() < 2e-2


def test_identical_mods_share_one_kernel():
    q, k, v = qkv()
    before = len(flashgen._kernel._KERNELS)
    flex_attention(q, k, v, mask_mod=lambda b, h, qi, ki: qi >= ki)
    flex_attention(q, k, v, mask_mod=lambda b, h, x, y: x >= y)
    assert len(flashgen._kernel._KERNELS) - before <= 1


def test_a_captured_tensor_is_read_at_call_time():
    q, k, v = qkv()
    table = torch.zeros(H)
    sm = lambda s, b, h, qi, ki: s + table[h] * ki  # noqa: E731
    o1 = flex_attention(q, k, v, score_mod=sm)
    table += 0.5
    o2 = flex_attention(q, k, v, score_mod=sm)
    want2, _ = reference(q, k, v, sm, None)
    assert not torch.allclose(o1, o2)
    assert torch.allclose(o2, want2, atol=2e-5, rtol=1e-4)


def test_a_rebound_capture_is_traced_again():
    q, k, v = qkv()
    table = torch.zeros(H)

    def sm(s, b, h, qi, ki):
        return s + table[h]
    o1 = flex_attention(q, k, v, score_mod=sm)
    table = torch.ones(H)  # a new object in sm's closure cell: the cached trace is stale
    o2 = flex_attention(q, k, v, score_mod=sm)
    assert torch.allclose(o2, o1, atol=1e-6)  # softmax is shift-invariant per row ...
    sm2 = lambda s, b, h, qi, ki: s + table[h] * ki  # noqa: E731
    o3 = flex_attention(q, k, v, score_mod=sm2)
    table = torch.full((H,), -0.5)
    o4 = flex_attention(q, k, v, score_mod=sm2)
    want4, _ = reference(q, k, v, sm2, None)
    assert not torch.allclose(o3, o4)  # ... but not to a per-key bias
    assert torch.allclose(o4, want4, atol=2e-5, rtol=1e-4)


def test_clamp_bounds_of_zero_are_kept():
    q, k, v = qkv()
    sm = lambda s, b, h, qi, ki: s + 0.1 * torch.clamp(ki - qi, max=0)  # noqa: E731
    sm2 = lambda s, b, h, qi, ki: s.clamp_max(0.0) + s.clamp_min(0.0) * 0.5  # noqa: E731
    for mod in (sm, sm2):
        want, _ = reference(q, k, v, mod, None)
        assert torch.allclose(flex_attention(q, k, v, score_mod=mod), want, atol=2e-5, rtol=1e-4)


def test_negative_indices_read_from_the_end_as_in_pytorch():
    q, k, v = qkv()
    sm = lambda s, b, h, qi, ki: s + BIAS[h, (qi - ki) % 7 - 7]  # noqa: E731  (-7 .. -1)
    want, _ = reference(q, k, v, sm, None)
    assert torch.allclose(flex_attention(q, k, v, score_mod=sm), want, atol=2e-5, rtol=1e-4)


def test_an_f64_capture_changed_in_place_is_seen():
    q, k, v = qkv()
    table = torch.zeros(H, dtype=torch.float64)
    sm = lambda s, b, h, qi, ki: s + table[h] * ki  # noqa: E731
    flex_attention(q, k, v, score_mod=sm)
    table += 0.25
    want, _ = reference(q, k, v, sm, None)
    assert torch.allclose(flex_attention(q, k, v, score_mod=sm), want, atol=2e-5, rtol=1e-4)


class _Config:
    width = 4


CFG = _Config()


def test_state_a_mod_reads_is_part_of_its_trace():
    q, k, v = qkv()
    mm = lambda b, h, qi, ki: (qi - ki).abs() < CFG.width  # noqa: E731
    o4 = flex_attention(q, k, v, mask_mod=mm)
    CFG.width = 9
    try:
        want, _ = reference(q, k, v, None, mm)
        o9 = flex_attention(q, k, v, mask_mod=mm)
        assert torch.allclose(o9, want, atol=2e-5, rtol=1e-4) and not torch.allclose(o4, o9)
    finally:
        CFG.width = 4


def test_the_trace_cache_is_bounded():
    from flashgen.torch import _flex

    q, k, v = qkv()
    for i in range(_flex._TRACE_CAP + 5):
        doc = torch.full((max(M, N),), i % 2)
        flex_attention(q, k, v, mask_mod=lambda b, h, qi, ki: doc[qi] == doc[ki])
    assert len(_flex._TRACES) <= _flex._TRACE_CAP


def test_a_block_mask_without_a_mask_mod_is_refused():
    q, k, v = qkv()
    from torch.nn.attention.flex_attention import BlockMask
    n_blocks = (N + 127) // 128
    bm = BlockMask.from_kv_blocks(torch.ones(1, 1, 1, dtype=torch.int32),
                                  torch.zeros(1, 1, 1, n_blocks, dtype=torch.int32))
    with pytest.raises(flashgen.CallError, match="no mask_mod"):
        flex_attention(q, k, v, block_mask=bm)


def test_untranslatable_mods_are_clear_errors():
    q, k, v = qkv()
    with pytest.raises(flashgen.CallError, match=r"score_mod uses .*cumsum"):
        flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: torch.cumsum(s, 0))
    with pytest.raises(flashgen.CallError, match=r"mask_mod returns"):
        flex_attention(q, k, v, mask_mod=lambda b, h, qi, ki: qi - ki)
