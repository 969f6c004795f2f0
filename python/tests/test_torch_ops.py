"""The custom op flashgen::run (python/flashgen/torch/_ops.py): torch.library.opcheck (schema,
fake implementation against the real one, dispatch under AOT autograd), torch.compile with the
default Inductor backend and fullgraph=True over a kernel call with static and dynamic
sequence lengths, and no gradient through a flashgen kernel: backward raises instead of
returning a wrong (missing) gradient."""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import flashgen
import flashgen.torch  # noqa: F401  (registers the op)

ROOT = Path(__file__).resolve().parents[2]
TWO_OUT = """
program two(q: f32[b, m, d], k: f32[b, n, d], v: f32[b, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  out o: f32[b, m, e] = sum(softmax(s, n) * v, n)
  out lse: f32[b, m] = logsumexp(s, n)
}
"""


def qkv(b=2, m=24, n=20, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, m, d, generator=g), torch.randn(b, n, d, generator=g),
            torch.randn(b, n, d, generator=g))


def reference(q, k, v):
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def test_opcheck_passes():
    kern = flashgen.compile(TWO_OUT)
    torch.library.opcheck(torch.ops.flashgen.run.default, (kern.key, list(qkv())))


def test_two_outputs_come_back_in_declaration_order():
    kern = flashgen.compile(TWO_OUT)
    o, lse = kern(*qkv())
    want_o, want_lse = reference(*qkv())
    torch.testing.assert_close(o, want_o, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, want_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dynamic", [False, True])
def test_inductor_compiles_a_graph_around_the_op(dynamic):
    kern = flashgen.compile(TWO_OUT)

    def fn(q, k, v):
        o, lse = kern(q * 2, k, v)
        return o.relu() + lse[..., None]

    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, dynamic=dynamic)
    for m, n in ((24, 20), (31, 17)):
        q, k, v = qkv(m=m, n=n)
        want_o, want_lse = reference(q * 2, k, v)
        torch.testing.assert_close(compiled(q, k, v), want_o.relu() + want_lse[..., None],
                                   atol=1e-5, rtol=1e-5)


def test_backward_through_a_kernel_is_an_error_not_a_silent_zero():
    kern = flashgen.compile(ROOT / "examples" / "causal.attn")
    q, k, v = (torch.randn(1, 2, 16, 8).bfloat16().requires_grad_() for _ in range(3))
    o = kern(q, k, v)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    assert (o.float() - ref).abs().max().item() < 2e-2
    with pytest.raises(RuntimeError, match="no autograd formula"):
        o.float().sum().backward()
