"""CuPy arrays on the CUDA backend (flashgen._kernel: _run_cupy): inputs read in place (any
strides an element kernel takes, copies only for the tensor-core layouts), outputs allocated by
CuPy, the launch on CuPy's current stream, error words read back later, and the answers of the
CPU backend on the same values. SKIPs without CuPy or a GPU."""
import numpy as np
import pytest

import flashgen

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.skipif(
    not flashgen.cuda_available() or cupy.cuda.runtime.getDeviceCount() == 0,
    reason="no CUDA GPU")

SIGMOID = """
program sig(q: f32[b, h, m, d], k: f32[b, h, n, d], v: f32[b, h, n, e]) {
  w = sigmoid(sum(q * k, d) / sqrt(size(d)) - 1.0)
  out o: f32[b, h, m, e] = sum(w * v, n)
}
"""
CAUSAL16 = """
program c16(q: f16[b, h, m, d], k: f16[b, h, n, d], v: f16[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: f16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
"""
GATHER = """
program g(x: f32[m, d], idx: i32[m], t: f32[r]) {
  out o: f32[m] = sum(x, d) + t[idx[m]]
}
"""


def host_inputs(dtype, b=2, h=3, m=37, n=45, d=16, e=8, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in ((b, h, m, d), (b, h, n, d), (b, h, n, e))]


@pytest.mark.parametrize("src,dtype,tol", [(SIGMOID, np.float32, 1e-4), (CAUSAL16, np.float16, 2e-3)])
def test_cupy_arrays_give_the_cpu_backends_answers(src, dtype, tol):
    kernel = flashgen.compile(src)
    host = host_inputs(dtype)
    want = kernel(*host)  # numpy on the CPU backend
    got = kernel(*[cupy.asarray(a) for a in host])
    assert isinstance(got, cupy.ndarray) and got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(cupy.asnumpy(got).astype(np.float64), want.astype(np.float64),
                               rtol=tol, atol=tol)


def test_strided_views_and_a_side_stream():
    kernel = flashgen.compile(SIGMOID)
    q, k, v = host_inputs(np.float32, d=16)
    want = kernel(q, k, v)
    # q as a transposed view of a [b, m, h, d] array; k with a padded last dim
    qd = cupy.asarray(np.ascontiguousarray(q.transpose(0, 2, 1, 3))).transpose(0, 2, 1, 3)
    kd = cupy.asarray(np.concatenate([k, np.zeros_like(k[..., :3])], axis=-1))[..., :16]
    cupy.cuda.Device().synchronize()  # the uploads above ran on the legacy stream
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        got = kernel(qd, kd, cupy.asarray(v))
    s.synchronize()
    np.testing.assert_allclose(cupy.asnumpy(got), want, rtol=1e-4, atol=1e-4)


def test_out_of_range_gather_is_raised_later():
    kernel = flashgen.compile(GATHER)
    x = cupy.ones((5, 3), dtype=cupy.float32)
    idx = cupy.asarray(np.array([0, 1, 2, 9, 3], dtype=np.int32))
    t = cupy.zeros(4, dtype=cupy.float32)
    kernel(x, idx, t)  # returns without waiting for the GPU
    with pytest.raises(flashgen.CallError, match="index 9 is out of range .* parameter 't'"):
        flashgen.check_errors()


def test_what_cupy_cannot_hold_is_a_call_error():
    bf16 = flashgen.compile("""
program b(x: bf16[m]) {
  out o: bf16[m] = x * 2.0
}
""")
    with pytest.raises(flashgen.CallError, match="CuPy has no dtype"):
        bf16(cupy.ones(4, dtype=cupy.float32))
    ints = flashgen.compile(GATHER)
    with pytest.raises(flashgen.CallError, match="convert it"):
        ints(cupy.ones((5, 3), dtype=cupy.float32), cupy.zeros(5, dtype=cupy.float32),
             cupy.zeros(4, dtype=cupy.float32))
    with pytest.raises(flashgen.CallError, match="mix of CuPy arrays"):
        ints(cupy.ones((5, 3), dtype=cupy.float32), np.zeros(5, dtype=np.int32),
             cupy.zeros(4, dtype=cupy.float32))
