"""The torch.compile backend "flashgen" (flashgen/torch/_backend.py) on the CPU, in f32.

Each attention form (SDPA: plain, causal, scale, bool and float masks, GQA; the eager chains:
scaled and masked, soft-capped, HF's repeat_kv) is compiled with
torch.compile(fn, backend="flashgen") and compared with eager; the report must say it was
captured, and a spy on torch.ops.flashgen.run shows the output came from the report's kernel.
Inputs that require grad and dropout in training are left alone and reported (gradients stay
right). torch.compile(fullgraph=True) traces a direct flashgen kernel call without a break.
"""
import logging
import math

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import flashgen  # noqa: E402
import flashgen.torch  # noqa: E402
from flashgen.torch import last_report  # noqa: E402
from flashgen.torch._backend import reset_report  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_compile")

B, H, HKV, M, N, D = 2, 4, 2, 24, 24, 16
TOL = dict(atol=1e-5, rtol=1e-5)


def qkv(m=M, n=N, hkv=H, e=D):
    return torch.randn(B, H, m, D), torch.randn(B, hkv, n, D), torch.randn(B, hkv, n, e)


def compiled_matches(fn, *args, spy, count=1):
    """Compiles fn with the flashgen backend, checks it against eager and that `count`
    attentions were captured and ran as flashgen kernels; returns the report."""
    compiled = torch.compile(fn, backend="flashgen")
    out = compiled(*args)
    torch.testing.assert_close(out, fn(*args), **TOL)
    report = last_report()
    assert len(report.captured) == count, report
    assert report.left_alone == [], report
    spy.clear()
    torch.testing.assert_close(compiled(*args), out, atol=0, rtol=0)
    assert sorted(spy) == sorted(c.key for c in report.captured)
    return report


# ---- SDPA ----

def test_sdpa_plain(op_spy):
    r = compiled_matches(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), *qkv(),
                         spy=op_spy)
    c = r.captured[0]
    assert c.kind == "sdpa" and not c.gqa
    assert "s / sqrt(size(d))" in c.program and "f32[b, h, m, d]" in c.program
    assert c.shapes["q"] == (B, H, M, D)


@pytest.mark.parametrize("m,n", [(M, N), (16, 24), (24, 16)])
def test_sdpa_causal_is_top_left(op_spy, m, n):
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    r = compiled_matches(fn, *qkv(m, n), spy=op_spy)
    assert "where(n <= m, " in r.captured[0].program


def test_sdpa_scale(op_spy):
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, scale=0.3)

    r = compiled_matches(fn, *qkv(), spy=op_spy)
    assert "s * 0.3" in r.captured[0].program


@pytest.mark.parametrize("shape,dims", [((B, 1, M, N), "[b, m, n]"), ((M, N), "[m, n]")])
def test_sdpa_bool_mask(op_spy, shape, dims):
    mask = torch.rand(shape) > 0.4
    mask[..., 0] = True  # every row attends a key (SDPA gives NaN for a row with none)

    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    r = compiled_matches(fn, *qkv(), mask, spy=op_spy)
    assert f"mask: bool{dims}" in r.captured[0].program
    assert "where(mask, " in r.captured[0].program


@pytest.mark.parametrize("shape,dims", [((B, 1, M, N), "[b, m, n]"),
                                        ((B, H, M, N), "[b, h, m, n]")])
def test_sdpa_float_mask(op_spy, shape, dims):
    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    r = compiled_matches(fn, *qkv(), torch.randn(shape), spy=op_spy)
    assert f"mask_in: f32{dims}" in r.captured[0].program
    assert "mask = where(mask_in == -inf, -inf, maximum(mask_in, -1.7e38))" in r.captured[0].program
    assert "+ mask" in r.captured[0].program


def test_sdpa_float_mask_of_the_dtypes_minimum_with_fully_masked_rows(op_spy):
    """HF's padding masks: 0 or finfo.min, whole rows of finfo.min for padded queries. Floats the
    scores read are floored at -1.7e38 so the CUDA kernels' base-2 logits cannot overflow to
    -inf (which made such rows NaN); the weights stay exact: 0 for masked keys, uniform over a
    fully masked row, as in eager."""
    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    mask = torch.zeros(B, 1, M, N)
    mask[:, :, :, 5:] = torch.finfo(torch.float32).min
    mask[1, :, 3] = torch.finfo(torch.float32).min  # a fully masked row
    compiled_matches(fn, *qkv(), mask, spy=op_spy)


def test_sdpa_gqa_reads_kv_heads_once(op_spy):
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    r = compiled_matches(fn, *qkv(hkv=HKV), spy=op_spy)
    c = r.captured[0]
    assert c.gqa and "q: f32[b, g, r, m, d]" in c.program and "k: f32[b, g, n, d]" in c.program
    assert c.shapes["k"] == (B, HKV, N, D)


def test_sdpa_gqa_with_a_per_head_mask(op_spy):
    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    r = compiled_matches(fn, *qkv(hkv=HKV, e=8), torch.randn(B, H, M, N), spy=op_spy)
    assert "mask_in: f32[b, g, r, m, n]" in r.captured[0].program


def test_sdpa_dynamic_sequence_lengths(op_spy):
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    compiled = torch.compile(fn, backend="flashgen")
    for m in (24, 17, 9):  # the second compile makes the lengths symbolic
        args = qkv(m, m, hkv=HKV)
        torch.testing.assert_close(compiled(*args), fn(*args), **TOL)
    r = last_report()
    assert len(r.captured) == 2 and r.left_alone == [] and r.graphs == 2
    assert not isinstance(r.captured[1].shapes["q"][2], int)


# ---- eager chains ----

def eager_attention(q, k, v, mask):
    s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    s = s + mask
    p = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
    p = F.dropout(p, p=0.0, training=False)
    return torch.matmul(p, v)


def test_eager_chain(op_spy):
    r = compiled_matches(eager_attention, *qkv(), torch.randn(B, 1, M, N), spy=op_spy)
    c = r.captured[0]
    assert c.kind == "eager chain" and "t0_in: f32[b, m, n]" in c.program
    assert "((s / 4.0) + t0)" in c.program


def test_eager_chain_scale_first_and_method_calls(op_spy):
    def fn(q, k, v):
        s = 0.125 * (q @ k.transpose(2, 3))
        return s.softmax(-1).type(torch.float32).matmul(v)

    compiled_matches(fn, *qkv(), spy=op_spy)


def test_soft_capped_chain(op_spy):
    def fn(q, k, v):
        s = torch.matmul(q, k.transpose(2, 3)) * 0.25
        s = torch.tanh(s / 30.0) * 30.0
        return F.softmax(s, dim=-1) @ v

    r = compiled_matches(fn, *qkv(), spy=op_spy)
    assert "tanh(((s * 0.25) / 30.0)) * 30.0" in r.captured[0].program


def repeat_kv(x, n_rep):
    b, h, n, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n_rep, n, d).reshape(b, h * n_rep, n, d)


def test_eager_chain_with_repeat_kv_reads_kv_once(op_spy):
    def fn(q, k, v, mask):
        return eager_attention(q, repeat_kv(k, H // HKV), repeat_kv(v, H // HKV), mask)

    r = compiled_matches(fn, *qkv(hkv=HKV), torch.randn(B, 1, M, N), spy=op_spy)
    c = r.captured[0]
    assert c.gqa and c.shapes["k"] == (B, HKV, N, D) and "k: f32[b, g, n, d]" in c.program


def test_sdpa_after_repeat_interleave_reads_kv_once(op_spy):
    def fn(q, k, v):
        k, v = k.repeat_interleave(H // HKV, dim=1), v.repeat_interleave(H // HKV, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    r = compiled_matches(fn, *qkv(hkv=HKV), spy=op_spy)
    assert r.captured[0].gqa


class OlderGPT2Attention(torch.nn.Module):
    """GPT-2's eager attention as transformers 4.4x wrote it: a 0-dim scale tensor, a bool
    causal buffer and a 0-dim mask value in torch.where, nn.Dropout."""

    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(64, 64, dtype=torch.bool))[None, None])
        self.attn_dropout = torch.nn.Dropout(0.1)

    def forward(self, q, k, v):
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        m, n = q.size(-2), k.size(-2)
        causal = self.bias[:, :, n - m:n, :n]
        min_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
        w = torch.where(causal, w.to(w.dtype), min_value)
        w = torch.nn.functional.softmax(w, dim=-1).type(v.dtype)
        return torch.matmul(self.attn_dropout(w), v)


def test_older_gpt2_chain_with_tensor_constants(op_spy):
    r = compiled_matches(OlderGPT2Attention().eval(), *qkv(), spy=op_spy)
    prog = r.captured[0].program
    assert "t0: bool[m, n], t1_in: f32[], t2_in: f32[]" in prog and "where(t0, " in prog


# ---- left alone ----

def left_alone(fn, *args):
    out = torch.compile(fn, backend="flashgen")(*args)
    r = last_report()
    assert r.captured == [] and len(r.left_alone) == 1, r
    return out, r.left_alone[0]


def test_inputs_requiring_grad_are_left_alone_and_gradients_hold(op_spy):
    q, k, v = (t.requires_grad_() for t in qkv())

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    out, entry = left_alone(fn, q, k, v)
    assert "require grad" in entry.reason and entry.kind == "sdpa"
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    ref = torch.autograd.grad(fn(q, k, v).sum(), (q, k, v))
    for g, rg in zip(grads, ref):
        torch.testing.assert_close(g, rg, **TOL)
    assert op_spy == []


def test_eager_chain_requiring_grad_is_left_alone(op_spy):
    q, k, v = (t.requires_grad_() for t in qkv())
    mask = torch.randn(B, 1, M, N)
    out, entry = left_alone(eager_attention, q, k, v, mask)
    assert "require grad" in entry.reason and entry.kind == "eager chain"
    g = torch.autograd.grad(out.sum(), q)[0]
    torch.testing.assert_close(g, torch.autograd.grad(eager_attention(q, k, v, mask).sum(),
                                                      q)[0], **TOL)
    assert op_spy == []


def test_no_grad_captures_inputs_that_require_grad(op_spy):
    q, k, v = (t.requires_grad_() for t in qkv())
    with torch.no_grad():
        compiled_matches(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v,
                         spy=op_spy)


def test_sdpa_dropout_in_training_is_left_alone():
    out, entry = left_alone(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5), *qkv())
    assert "dropout_p=0.5" in entry.reason
    assert out.shape == (B, H, M, D)


class ChainWithDropout(torch.nn.Module):
    def forward(self, q, k, v):
        p = torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1)
        return F.dropout(p, p=0.1, training=self.training) @ v


def test_eager_dropout_left_alone_in_training_captured_in_eval(op_spy):
    mod, args = ChainWithDropout(), qkv()
    _, entry = left_alone(mod.train(), *args)
    assert "dropout" in entry.reason and entry.kind == "eager chain"
    torch._dynamo.reset()
    reset_report()
    compiled_matches(mod.eval(), *args, spy=op_spy)


def test_float64_is_left_alone():
    q, k, v = (t.double() for t in qkv())
    out, entry = left_alone(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
    assert "float64" in entry.reason
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_non_4d_inputs_are_left_alone():
    q, k, v = (t[0] for t in qkv())
    out, entry = left_alone(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
    assert "3 dims" in entry.reason
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL)


def sdpa_program(dtype):
    return (f"program sdpa(q: {dtype}[b, h, m, d], k: {dtype}[b, h, n, d], "
            f"v: {dtype}[b, h, n, e]) {{\n  s = sum(q * k, d)\n  x = s / sqrt(size(d))\n"
            f"  out o: {dtype}[b, h, m, e] = sum(softmax(x, n) * v, n)\n}}\n")


def test_cuda_inputs_need_what_the_cuda_backend_runs(monkeypatch):
    from flashgen.torch._backend import _Unsupported, check_device

    cuda, bf16 = torch.device("cuda", 0), flashgen.compile(sdpa_program("bf16"))
    check_device(torch.device("cpu"), flashgen.compile(sdpa_program("f32")), (16, 16))
    monkeypatch.setattr(flashgen, "cuda_available", lambda: False)
    with pytest.raises(_Unsupported, match="no CUDA backend"):
        check_device(cuda, bf16, (64, 64))
    monkeypatch.setattr(flashgen, "cuda_available", lambda: True)
    check_device(cuda, bf16, (64, 64))
    f32 = flashgen.compile(sdpa_program("f32"))
    check_device(cuda, f32, (64, 64))  # f32 operands take the tensor cores (as bf16 pieces) ...
    with pytest.raises(_Unsupported, match="float32 attention"):  # ... PyTorch keeps f32 calls
        check_device(cuda, f32, (64, 64), torch.float32)
    check_device(torch.device("cpu"), f32, (16, 16), torch.float32)
    check_device(cuda, bf16, (16, 16))  # any head dim up to 256 takes the tensor cores
    with pytest.raises(_Unsupported, match="element path.*1 to 256"):
        check_device(cuda, bf16, (300, 64))
    with pytest.raises(_Unsupported, match="cuda:0"):
        check_device(torch.device("cuda", 1), bf16, (64, 64))


# ---- the report, the logger, the registration ----

def test_report_covers_every_graph_of_a_call(op_spy, caplog):
    def fn(q, k, v):
        a = F.scaled_dot_product_attention(q, k, v)
        torch._dynamo.graph_break()
        return F.scaled_dot_product_attention(a, k, v, is_causal=True)

    with caplog.at_level(logging.INFO, logger="flashgen.torch"):
        r = compiled_matches(fn, *qkv(), spy=op_spy, count=2)
    assert r.graphs == 2 and [c.graph for c in r.captured] == [0, 1]
    assert sum("captured sdpa" in rec.message for rec in caplog.records) == 2
    reset_report()
    assert last_report().captured == [] and last_report().graphs == 0


def test_left_alone_is_logged(caplog):
    q, k, v = (t.double() for t in qkv())
    with caplog.at_level(logging.INFO, logger="flashgen.torch"):
        torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
                      backend="flashgen")(q, k, v)
    msgs = [rec.message for rec in caplog.records if rec.name == "flashgen.torch"]
    assert len(msgs) == 1 and "left alone sdpa" in msgs[0] and "float64" in msgs[0]


def test_backend_is_registered():
    assert "flashgen" in torch._dynamo.list_backends()
    from torch._dynamo.backends.registry import lookup_backend
    assert lookup_backend("flashgen") is flashgen.torch.compile_backend


# ---- a flashgen kernel called directly, inside torch.compile ----

@pytest.mark.parametrize("how", ["kernel", "call"])
def test_fullgraph_traces_a_kernel_call(repo, how):
    kern = flashgen.compile((repo / "examples" / "causal.attn").read_text())
    q, k, v = (t.to(torch.bfloat16) for t in qkv())  # the program declares bf16

    def fn(q, k_, v):
        if how == "kernel":
            return kern(q, k_, v) * 2
        return flashgen.torch.call(kern, q, k_, v) * 2

    explain = torch._dynamo.explain(fn)(q, k, v)
    assert explain.graph_break_count == 0 and explain.graph_count == 1
    out = torch.compile(fn, fullgraph=True, backend="flashgen")(q, k, v)
    torch.testing.assert_close(out, kern(q, k, v) * 2, atol=0, rtol=0)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    torch.testing.assert_close(out.float(), ref * 2, atol=4e-2, rtol=2e-2)


@pytest.mark.parametrize("how", ["einsum", "bmm"])
def test_attention_through_einsum_or_bmm_is_reported_left_alone(how):
    """The matcher takes matmul chains; attention written with einsum or flattened bmm is not
    captured, and the report says so (never silently)."""
    def fn(q, k, v):
        if how == "einsum":
            w = torch.softmax(torch.einsum("bhmd,bhnd->bhmn", q, k) * 0.25, -1)
            return torch.einsum("bhmn,bhnd->bhmd", w, v)
        w = torch.softmax(torch.bmm(q.flatten(0, 1), k.flatten(0, 1).transpose(1, 2)) * 0.25, -1)
        return torch.bmm(w, v.flatten(0, 1)).view(q.shape)

    q, k, v = qkv()
    out = torch.compile(fn, backend="flashgen")(q, k, v)
    torch.testing.assert_close(out, fn(q, k, v), **TOL)
    report = last_report()
    assert report.captured == [] and len(report.left_alone) == 1, report
    assert report.left_alone[0].kind == "eager chain" and report.left_alone[0].reason

