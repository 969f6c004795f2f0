"""flashgen.compile and Kernel calls on host memory (numpy and torch CPU tensors): results
against the f64 reference and an independent torch computation, outputs allocated by the
inputs' framework, strided and converted inputs, the error classes and their diagnostics,
explain and emit. Shows python/flashgen/_kernel.py and python/src/module.cpp."""
from pathlib import Path

import numpy as np
import pytest
import torch

import flashgen

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"

SCORES = """
program scores(q: f32[m, d], k: f32[n, d], bias: f32[u]) {
  s = sum(q * k, d) + bias[clamp(n - m + 4, 0, 8)]
  out o: f32[m, n] = where(n <= m, s, -inf)
  out top: f32[m] = max(s, n)
}
"""


def ref_scores(q, k, bias):
    m, n = q.shape[0], k.shape[0]
    s = q.double() @ k.double().T
    idx = (torch.arange(n)[None, :] - torch.arange(m)[:, None] + 4).clamp(0, 8)
    s = s + bias.double()[idx]
    o = torch.where(torch.arange(n)[None, :] <= torch.arange(m)[:, None], s,
                    torch.tensor(-float("inf"), dtype=torch.float64))
    return o, s.max(dim=1).values


@pytest.fixture(scope="module")
def scores():
    return flashgen.compile(SCORES)


def test_compile_reads_a_path_and_text_alike():
    a = flashgen.compile(EX / "causal.attn")
    b = flashgen.compile(str(EX / "causal.attn"))
    c = flashgen.compile((EX / "causal.attn").read_text())
    assert a.name == b.name == c.name == "causal"
    assert [p[0] for p in a.params] == ["q", "k", "v"]
    assert a.outputs == [("o", "bf16", ["b", "h", "m", "e"])]


@pytest.mark.parametrize("backend", ["cpu", "ref"])
def test_torch_inputs_give_torch_outputs_that_match(scores, backend):
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(13, 8, generator=g), torch.randn(11, 8, generator=g)
    bias = torch.randn(9, generator=g)
    o, top = scores(q, k, bias, backend=backend)
    assert isinstance(o, torch.Tensor) and o.dtype == torch.float32 and o.shape == (13, 11)
    want_o, want_top = ref_scores(q, k, bias)
    assert torch.allclose(o.double(), want_o, rtol=1e-5, atol=1e-5)
    assert torch.allclose(top.double(), want_top, rtol=1e-5, atol=1e-5)


def test_numpy_inputs_give_numpy_outputs(scores):
    rng = np.random.default_rng(2)
    q, k = rng.standard_normal((7, 4), dtype=np.float32), rng.standard_normal((5, 4), np.float32)
    bias = rng.standard_normal(9).astype(np.float32)
    o, top = scores(q=q, k=k, bias=bias)
    assert isinstance(o, np.ndarray) and o.dtype == np.float32 and o.shape == (7, 5)
    want_o, want_top = ref_scores(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(bias))
    np.testing.assert_allclose(o, want_o.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(top, want_top.numpy(), rtol=1e-5, atol=1e-5)


def test_strided_and_f64_inputs(scores):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(8, 13, generator=g).T          # a transposed view: read in place
    k = torch.randn(11, 16, generator=g)[:, ::2]   # every second column
    bias = torch.randn(9, dtype=torch.float64, generator=g)  # converted to the declared f32
    o, top = scores(q, k, bias)
    want_o, want_top = ref_scores(q, k, bias.float())
    assert torch.allclose(o.double(), want_o, rtol=1e-5, atol=1e-5)
    nq = np.asfortranarray(np.random.default_rng(4).standard_normal((13, 8), dtype=np.float32))
    o2, _ = scores(nq, k.numpy(), bias.float().numpy())
    want2, _ = ref_scores(torch.from_numpy(np.ascontiguousarray(nq)), k, bias.float())
    np.testing.assert_allclose(o2, want2.numpy(), rtol=1e-5, atol=1e-5)


def test_bf16_attention_matches_sdpa():
    kern = flashgen.compile(EX / "causal.attn")
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=g).bfloat16() for _ in range(3))
    o = kern(q, k, v)
    assert o.dtype == torch.bfloat16 and o.shape == (1, 2, 40, 16)
    want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                            is_causal=True)
    assert (o.float() - want).abs().max().item() < 2e-2


def test_errors_are_python_exceptions_with_diagnostics(scores):
    with pytest.raises(flashgen.ProgramError) as e:
        flashgen.compile("program p(x: f32[m]) {\n  out y: f32[m] = exp(z)\n}\n")
    text = str(e.value)
    assert text.startswith("<string>:2:23: error: unknown name 'z'")
    assert text.splitlines()[1] == "  out y: f32[m] = exp(z)"
    assert text.splitlines()[2] == " " * 22 + "^"
    assert isinstance(e.value, flashgen.Error)
    q, k, bias = torch.zeros(3, 4), torch.zeros(5, 6), torch.zeros(9)
    with pytest.raises(flashgen.CallError, match=r"parameter 'k' dimension 'd' has extent 6"):
        scores(q, k, bias)
    with pytest.raises(flashgen.CallError, match=r"missing input 'bias'"):
        scores(q, torch.zeros(5, 4))
    with pytest.raises(flashgen.CallError, match=r"'x' is not an input"):
        scores(q, k, bias, x=q)
    with pytest.raises(flashgen.CallError, match=r"mix of torch tensors"):
        scores(q, np.zeros((5, 4), np.float32), bias)
    with pytest.raises(flashgen.CallError, match=r"cannot read"):
        flashgen.compile(ROOT / "no-such-file.attn")


def test_out_of_range_gather_is_a_call_error():
    kern = flashgen.compile("program g(x: f32[t], i: i64[m]) { out y: f32[m] = x[i] }")
    with pytest.raises(flashgen.CallError, match=r"index 7 is out of range \[0, 4\).*'x'"):
        kern(torch.zeros(4), torch.tensor([1, 7]))
    y = kern(torch.arange(4.0), torch.tensor([3, 0, 2]))
    assert y.tolist() == [3.0, 0.0, 2.0]


def test_explain_and_emit():
    kern = flashgen.compile(EX / "causal.attn")
    text = kern.explain({"b": 1, "h": 2, "m": 256, "n": 256, "d": 64, "e": 64})
    assert "kernel" in text and "skip" in text
    import json
    report = json.loads(kern.explain(json=True))
    assert len(report["kernels"]) == 1
    src = kern.emit("cpu")
    assert "extern \"C\"" in src or "void" in src
    assert kern.kernel_count() == 1
    cuda = kern.emit("cuda-sm80", {"d": 64, "e": 64})
    assert "__global__" in cuda
