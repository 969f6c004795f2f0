"""flex_attention: FlexAttention's calls, compiled by flashgen.

`score_mod(score, b, h, q_idx, kv_idx)` and `mask_mod(b, h, q_idx, kv_idx)` are traced with
make_fx on fake one-element tensors (the tensors they capture stay real: each becomes an input
of the program), and the aten graph is translated, node by node, into one `.attn` program:

    program flex(q: DT[b, h, m, d], k: DT[b, h, n, d], v: DT[b, h, n, e], c0: ...) {
      s = sum(q * k, d) * SCALE
      t1 = ...                      # score_mod, one statement per aten node
      s = where(MASK, SCORE, -inf)  # mask_mod
      out o: DT[b, h, m, e] = sum(softmax(s, n) * v, n)
      out lse: f32[b, h, m] = logsumexp(s, n)      # return_lse
    }

The mask is a plain condition of the program, so the compiler derives tile skipping from it:
there is no block mask to build. GQA (enable_gqa, fewer K/V heads) splits q's head dim into
(g, r) without a copy: kv head g, query head h = g * size(r) + r. Identical traced programs
share one compiled kernel (flashgen.compile's cache), and a mod traced once is not traced again
while the values it refers to stay the same (_fingerprint). Negative indices of captured tensors
read from the end, as in PyTorch; integer floor division goes through f32 (exact below 2^24).
Tests: python/tests/test_flex.py.
"""
from __future__ import annotations

import collections
import functools
import math
import types

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import flashgen
from .._kernel import _torch_dtype_name

aten = torch.ops.aten


def _lit(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        if abs(v) > 2**53:
            raise flashgen.CallError(f"the integer {v} in a score_mod or mask_mod is more than "
                                     "2^53, the largest integer literal of flashgen")
        return f"({v})" if v < 0 else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "(inf - inf)"
        if math.isinf(v):
            return "inf" if v > 0 else "(-inf)"
        if v < -1.7e38:  # see _backend._program: base-2 logits of the CUDA kernels
            v = -1.7e38
        r = repr(v)
        return f"({r})" if v < 0 else r
    raise flashgen.CallError(f"a score_mod or mask_mod constant {v!r} of type "
                             f"{type(v).__name__} has no flashgen literal")


_UNARY = {
    aten.neg.default: "-({})", aten.abs.default: "abs({})", aten.exp.default: "exp({})",
    aten.exp2.default: "exp2({})", aten.log.default: "log({})", aten.log2.default: "log2({})",
    aten.sqrt.default: "sqrt({})", aten.rsqrt.default: "rsqrt({})",
    aten.tanh.default: "tanh({})", aten.sigmoid.default: "sigmoid({})",
    aten.sin.default: "sin({})", aten.cos.default: "cos({})", aten.relu.default: "relu({})",
    aten.floor.default: "floor({})", aten.ceil.default: "ceil({})",
    aten.logical_not.default: "(not {})",
    aten.log1p.default: "log(1.0 + {})", aten.expm1.default: "(exp({}) - 1.0)",
    aten.square.default: "(({0}) * ({0}))", aten.reciprocal.default: "(1.0 / {})",
}
_BINARY = {
    "add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "remainder": "({} % {})",
    "lt": "({} < {})", "le": "({} <= {})", "gt": "({} > {})", "ge": "({} >= {})",
    "eq": "({} == {})", "ne": "({} != {})", "maximum": "maximum({}, {})",
    "minimum": "minimum({}, {})", "pow": "pow({}, {})",
    "logical_and": "({} and {})", "logical_or": "({} or {})",
}
_IDENTITY = {aten.alias.default, aten.clone.default, aten.detach.default,
             aten.lift_fresh_copy.default, aten.view.default, aten.expand.default,
             aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default,
             aten._unsafe_view.default, aten.reshape.default}
_CONVERT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
            torch.float64: "f32", torch.int32: "i32", torch.int64: "i64"}


def _dtype(x):
    if isinstance(x, torch.fx.Node):
        return x.meta["val"].dtype
    if isinstance(x, bool):
        return torch.bool
    return torch.int64 if isinstance(x, int) else torch.float32


class _Translator:
    """One traced mod's aten graph as flashgen statements."""

    def __init__(self, prog: "_ProgramText", gm, names: list, what: str):
        self.p, self.gm, self.what = prog, gm, what
        self.env = {}
        self.names = names  # flashgen expressions of the placeholders, in order

    def arg(self, a) -> str:
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        return _lit(a)

    def run(self) -> str:
        ph = 0
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                self.env[n] = self.names[ph]
                ph += 1
            elif n.op == "get_attr":
                self.env[n] = self.p.capture(getattr(self.gm, n.target), self.what)
            elif n.op == "call_function":
                self.env[n] = self.p.let(self.call(n))
            elif n.op == "output":
                out = n.args[0]
                if isinstance(out, (tuple, list)):
                    out = out[0]
                return self.arg(out), _dtype(out)
        raise flashgen.CallError(f"the traced {self.what} returns nothing")

    def fail(self, n, why=""):
        raise flashgen.CallError(
            f"the {self.what} uses {n.target}{': ' + why if why else ''}, which flashgen's "
            "flex_attention does not translate (element-wise arithmetic, comparisons, where, "
            "clamp, exp/log/tanh/sigmoid, conversions and indexing of captured tensors by "
            "index expressions are translated)")

    def call(self, n) -> str:
        f, a, kw = n.target, n.args, n.kwargs
        if f in _IDENTITY:
            if n.meta["val"].numel() != 1:
                self.fail(n, "a reshape to more than one element")
            return self.arg(a[0])
        if f in _UNARY:
            return _UNARY[f].format(self.arg(a[0]))
        name = f.overloadpacket.__name__ if hasattr(f, "overloadpacket") else str(f)
        if name in ("bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "logical_xor"):
            if any(_dtype(x) != torch.bool for x in a):
                self.fail(n, "bitwise operations on integers")
            if name == "bitwise_not":
                return f"(not {self.arg(a[0])})"
            if name in ("bitwise_xor", "logical_xor"):
                return f"({self.arg(a[0])} != {self.arg(a[1])})"
            return ("({} and {})" if name == "bitwise_and" else "({} or {})").format(
                self.arg(a[0]), self.arg(a[1]))
        if name in ("add", "sub") and kw.get("alpha", 1) != 1:
            b = f"({_lit(kw['alpha'])} * {self.arg(a[1])})"
            return _BINARY[name].format(self.arg(a[0]), b)
        if name == "rsub":  # rsub(a, b) = b - a
            return f"({self.arg(a[1])} - {self.arg(a[0])})"
        if name in _BINARY:
            return _BINARY[name].format(self.arg(a[0]), self.arg(a[1]))
        if name == "div":
            mode = kw.get("rounding_mode")
            x, y = self.arg(a[0]), self.arg(a[1])
            ints = not _dtype(a[0]).is_floating_point and not _dtype(a[1]).is_floating_point
            if ints:
                x = f"f32({x})"
            if mode is None:
                return f"({x} / {y})"
            if mode == "floor":
                return f"i64(floor({x} / {y}))" if ints else f"floor({x} / {y})"
            self.fail(n, f"rounding_mode={mode!r}")
        if name == "floor_divide":
            x, y = self.arg(a[0]), self.arg(a[1])
            if not _dtype(a[0]).is_floating_point and not _dtype(a[1]).is_floating_point:
                return f"i64(floor(f32({x}) / {y}))"
            return f"floor({x} / {y})"
        if name == "sign":
            x = self.arg(a[0])
            if _dtype(a[0]).is_floating_point:  # NaN stays NaN, as in torch
                return f"where({x} > 0, 1.0, where({x} < 0, -1.0, where({x} == {x}, 0.0, {x})))"
            return f"where({x} > 0, 1, where({x} < 0, -1, 0))"
        if name == "where":
            return f"where({self.arg(a[0])}, {self.arg(a[1])}, {self.arg(a[2])})"
        if name in ("clamp", "clamp_min", "clamp_max"):
            if name == "clamp_max":
                lo, hi = None, a[1] if len(a) > 1 else kw.get("max")
            elif name == "clamp_min":
                lo, hi = a[1] if len(a) > 1 else kw.get("min"), None
            else:
                lo = a[1] if len(a) > 1 else kw.get("min")
                hi = a[2] if len(a) > 2 else kw.get("max")
            e = self.arg(a[0])
            if lo is not None:
                e = f"maximum({e}, {self.arg(lo)})"
            if hi is not None:
                e = f"minimum({e}, {self.arg(hi)})"
            return e
        if name in ("_to_copy", "to", "type_as", "_conj"):
            want = kw.get("dtype") if name != "type_as" else _dtype(a[1])
            if want is None:
                return self.arg(a[0])
            if want == torch.bool:
                return f"({self.arg(a[0])} != 0)"
            if want not in _CONVERT:
                self.fail(n, f"a conversion to {want}")
            return f"{_CONVERT[want]}({self.arg(a[0])})"
        if name in ("scalar_tensor", "full", "full_like", "zeros_like", "ones_like"):
            v = {"zeros_like": 0, "ones_like": 1}.get(name)
            if v is None:
                v = a[0] if name == "scalar_tensor" else a[1]
            dt = kw.get("dtype")
            if dt is not None and dt.is_floating_point:
                v = float(v)
            return _lit(v)
        if name == "index":
            src, idx = a[0], a[1]
            if src.op != "get_attr":
                self.fail(n, "indexing a computed value (only captured tensors are indexed)")
            t = getattr(self.gm, src.target)
            if len(idx) != t.dim() or any(i is None for i in idx):
                self.fail(n, f"indexing a {t.dim()}-dim tensor with {len(idx)} indices "
                          "(give one index expression per dimension)")
            name = self.arg(src)
            # PyTorch reads a negative index from the end; flashgen's range check then
            # reports what is out of range either way.
            wrapped = [f"where({self.arg(i)} < 0, {self.arg(i)} + size({name}_{j}), "
                       f"{self.arg(i)})" for j, i in enumerate(idx)]
            return f"{name}[{', '.join(wrapped)}]"
        self.fail(n)


class _ProgramText:
    """The program's text, statement by statement; captured tensors become parameters."""

    def __init__(self):
        self.lines = []
        self.captures = []   # (tensor, flashgen name)
        self._count = 0

    def let(self, expr: str) -> str:
        self._count += 1
        name = f"t{self._count}"
        self.lines.append(f"  {name} = {expr}")
        return name

    def capture(self, t: torch.Tensor, what: str) -> str:
        for orig, _, name in self.captures:
            if orig is t:
                return name
        value = t  # f64 is converted at each call (program_inputs): in-place changes show
        if _torch_dtype_name(t.dtype) is None and t.dtype != torch.float64:
            raise flashgen.CallError(f"the {what} captures a tensor of dtype {t.dtype}, which "
                                     "flashgen has no type for")
        name = f"c{len(self.captures)}"
        self.captures.append((t, value, name))
        return name

    def params(self) -> str:
        out = []
        for _, t, name in self.captures:
            dims = ", ".join(f"{name}_{i}" for i in range(t.dim()))
            dt = "f32" if t.dtype == torch.float64 else _torch_dtype_name(t.dtype)
            out.append(f"{name}: {dt}[{dims}]")
        return "".join(", " + p for p in out)


def _trace(fn, n_args: int, device):
    """The mod's aten graph, traced on fake one-element tensors of the query's device (the
    tensors it captures must be there too, as FlexAttention requires)."""
    args = [torch.zeros(1, dtype=torch.float32, device=device)] if n_args == 5 else []
    args += [torch.zeros(1, dtype=torch.int32, device=device) for _ in range(4)]
    try:
        return make_fx(fn, tracing_mode="fake", _allow_non_fake_inputs=True)(*args)
    except RuntimeError as e:
        if "device" not in str(e):
            raise
        raise flashgen.CallError(f"tracing the {'score_mod' if n_args == 5 else 'mask_mod'} "
                                 f"on {device}: {e} (tensors a mod captures must be on the "
                                 "query's device)") from None


def program_for(score_mod, mask_mod, dtype: str, gqa: bool, scale, return_lse: bool,
                device="cpu"):
    """The flex program's text and its captured tensors, in parameter order."""
    p = _ProgramText()
    if gqa:
        heads, hexpr = "g, r", "(g * size(r) + r)"
    else:
        heads, hexpr = "h", "h"
    kvh = "g" if gqa else "h"
    idx = ["b", hexpr, "m", "n"]
    sc = "/ sqrt(size(d))" if scale is None else f"* {_lit(float(scale))}"
    p.lines.append(f"  s = sum(q * k, d) {sc}")
    score = "s"
    if score_mod is not None:
        expr, dt = _Translator(p, _trace(score_mod, 5, device), ["s"] + idx, "score_mod").run()
        if not dt.is_floating_point:
            expr = f"f32({expr})"
        score = p.let(expr)
    if mask_mod is not None:
        expr, dt = _Translator(p, _trace(mask_mod, 4, device), idx, "mask_mod").run()
        if dt != torch.bool:
            raise flashgen.CallError(f"mask_mod returns {dt}, not a bool")
        score = p.let(f"where({expr}, {score}, -inf)")
    body = [f"  out o: {dtype}[b, {heads}, m, e] = sum(softmax({score}, n) * v, n)"]
    if return_lse:
        body.append(f"  out lse: f32[b, {heads}, m] = logsumexp({score}, n)")
    text = (f"program flex(q: {dtype}[b, {heads}, m, d], k: {dtype}[b, {kvh}, n, d], "
            f"v: {dtype}[b, {kvh}, n, e]{p.params()}) {{\n" + "\n".join(p.lines + body) +
            "\n}\n")
    return text, [t for _, t, _ in p.captures]


_SCALARS = (int, float, bool, str, bytes, type(None), complex)


def _fingerprint(fn, refs: list, depth: int = 0) -> tuple:
    """What a traced mod depends on besides its code: the values its closure cells and the
    globals its code names hold — numbers and strings by value, tensors and functions by
    identity (functions recursively), other objects by identity and their attributes one level
    down (containers and plain objects, three levels). Every object fingerprinted by identity is appended to `refs`, which the cache holds,
    so no id is reused while its entry lives. None: something it cannot see into (an object
    without __dict__), so the mod is traced again at each call."""
    if fn is None:
        return ()
    code = getattr(fn, "__code__", None)
    if code is None:  # a callable object: its attributes and its __call__
        call = getattr(type(fn), "__call__", None)
        state = _value_print(fn, refs, depth)
        inner = _fingerprint(call, refs, depth + 1) if call and depth < 4 else ()
        return None if state is None or inner is None else (state, inner)
    refs.append(code)
    out = [id(code)]
    vals = [c.cell_contents for c in (fn.__closure__ or ()) if _cell_full(c)]
    names = set(code.co_names)
    stack = [c for c in code.co_consts if hasattr(c, "co_names")]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(x for x in c.co_consts if hasattr(x, "co_names"))
    g = getattr(fn, "__globals__", {})
    vals += [g[n] for n in sorted(names) if n in g]
    for v in vals:
        fp = _value_print(v, refs, depth)
        if fp is None:
            return None
        out.append(fp)
    return tuple(out)


def _value_print(v, refs: list, depth: int):
    if isinstance(v, _SCALARS):
        return ("=", type(v).__name__, v)
    refs.append(v)
    if isinstance(v, (torch.Tensor, type, types.ModuleType, types.BuiltinFunctionType,
                      torch.dtype, torch.device)):
        return (id(v),)
    if hasattr(v, "__code__"):
        inner = _fingerprint(v, refs, depth + 1) if depth < 4 else None
        return None if inner is None else (id(v), inner)
    if depth >= 3:
        return None
    if isinstance(v, functools.partial):
        parts = [v.func, v.args, v.keywords]
    elif isinstance(v, (tuple, list)):
        parts = list(v)
    elif isinstance(v, dict):
        parts = [x for kv in sorted(v.items(), key=lambda kv: repr(kv[0])) for x in kv]
    elif isinstance(getattr(v, "__dict__", None), dict) and not hasattr(type(v), "__slots__"):
        parts = [x for kv in sorted(vars(v).items()) for x in kv]
    else:
        return None
    out = [id(v), type(v).__name__]
    for x in parts:
        fp = _value_print(x, refs, depth + 1)
        if fp is None:
            return None
        out.append(fp)
    return tuple(out)


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


# (mod fingerprints, dtype, gqa, scale, return_lse, device) -> (refs, kernel, captured); the
# most recent _TRACE_CAP traces (a mod rebuilt at every call, a closure over new tensors, adds
# one each time).
_TRACES: "collections.OrderedDict" = collections.OrderedDict()
_TRACE_CAP = 64


def _kernel_for(score_mod, mask_mod, dtype, gqa, scale, return_lse, device):
    refs: list = []
    fps = (_fingerprint(score_mod, refs), _fingerprint(mask_mod, refs))
    key = None if None in fps else (fps, dtype, gqa, scale, return_lse, str(device))
    hit = _TRACES.get(key) if key is not None else None
    if hit is not None:
        _TRACES.move_to_end(key)
        return hit[1], hit[2]
    text, captured = program_for(score_mod, mask_mod, dtype, gqa, scale, return_lse, device)
    kernel = flashgen.compile(text)
    if key is not None:
        _TRACES[key] = (refs, kernel, captured)
        while len(_TRACES) > _TRACE_CAP:
            _TRACES.popitem(last=False)
    return kernel, captured


def flex_attention(query, key, value, score_mod=None, mask_mod=None, scale=None,
                   enable_gqa=False, return_lse=False, *, block_mask=None):
    """torch.nn.attention.flex_attention's call, run by a flashgen kernel.

    query [B, Hq, M, D], key [B, Hkv, N, D], value [B, Hkv, N, Dv]; Hq != Hkv needs
    enable_gqa (Hq a multiple of Hkv). `block_mask` (a BlockMask) is accepted for its mask_mod.
    Returns the output [B, Hq, M, Dv] (query's dtype), and with return_lse the log-sum-exp of
    each row's scores [B, Hq, M] (f32; -inf for rows that attend nothing, whose output is 0)."""
    if block_mask is not None:
        if mask_mod is not None:
            raise flashgen.CallError("give mask_mod or block_mask, not both")
        mask_mod = getattr(block_mask, "mask_mod", None)
        if mask_mod is None or getattr(mask_mod, "__name__", "") == "noop_mask":
            raise flashgen.CallError("this BlockMask has no mask_mod (built from blocks): "
                                     "flashgen derives its tile skipping from a mask_mod; "
                                     "give one")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise flashgen.CallError(f"{name} must be a 4-dim tensor [B, H, L, D]")
    if key.dtype != query.dtype or value.dtype != query.dtype:
        raise flashgen.CallError(f"query, key and value have dtypes {query.dtype}, {key.dtype}, "
                                 f"{value.dtype}: give one")
    dtype = _torch_dtype_name(query.dtype)
    if dtype not in ("f32", "f16", "bf16"):
        raise flashgen.CallError(f"query has dtype {query.dtype}; flex_attention takes f32, f16 "
                                 "or bf16")
    B, Hq, M, D = query.shape
    Hkv = key.shape[1]
    gqa = Hq != Hkv
    if gqa:
        if not enable_gqa:
            raise flashgen.CallError(f"query has {Hq} heads and key {Hkv}: pass enable_gqa=True "
                                     "for grouped-query attention")
        if Hkv == 0 or Hq % Hkv:
            raise flashgen.CallError(f"query's {Hq} heads are not a multiple of key's {Hkv}")
    kernel, captured = _kernel_for(score_mod, mask_mod, dtype, gqa, scale, return_lse,
                                   query.device)
    q = query.view(B, Hkv, Hq // Hkv, M, D) if gqa else query
    caps = [c.to(device=query.device, dtype=torch.float32 if c.dtype == torch.float64
                 else c.dtype) for c in captured]
    outs = kernel(q, key, value, *caps)
    if not return_lse:
        outs = (outs,)
    o = outs[0].view(B, Hq, M, value.shape[-1]) if gqa else outs[0]
    if not return_lse:
        return o
    lse = outs[1].view(B, Hq, M) if gqa else outs[1]
    return o, lse
