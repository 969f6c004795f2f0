"""The torch.compile backend "flashgen": attention found in Dynamo's FX graphs runs as flashgen
kernels, the rest of the graph goes to Inductor.

    import flashgen.torch
    model = torch.compile(model, backend="flashgen")
    flashgen.torch.last_report()       # what was captured, what was left alone and why

`compile_backend(gm, example_inputs)` reads the torch-level graph Dynamo hands a backend and
finds two kinds of attention:

- "sdpa": calls of F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal,
  scale, enable_gqa) with q [B, Hq, M, D], k [B, Hkv, N, D], v [B, Hkv, N, Dv]. is_causal is
  SDPA's top-left mask (key n for query m iff n <= m); a bool attn_mask becomes
  where(mask, s, -inf), a float one is added to the scores.
- "eager chain": matmul(q, k.transpose(-2, -1)), then element-wise score ops (scaling by a
  number, an added mask, soft-capping tanh(s / c) * c, where / masked_fill, conversions),
  softmax over the last dim (dtype=torch.float32 allowed), conversions and dropout with p=0 or
  training=False, then matmul(., v): the eager attention of Hugging Face models.

Tensors the scores use (masks, biases) become parameters that have only the dims they really
have: a size-1 (broadcast) dim is squeezed away, and flashgen's named dims broadcast the rest.
K/V heads repeated by HF's repeat_kv (k[:, :, None].expand(...).reshape(...)) or by
repeat_interleave(r, dim=1), SDPA's enable_gqa and a matmul broadcasting one K/V head are read
once as grouped-query attention: q is viewed [B, Hkv, r, M, D] (heads (g, r), as _flex.py does)
and the output flattened back. Each match is replaced by `torch.ops.flashgen.run(key, inputs)[0]`
running the program generated for it (declared with the inputs' dtypes).

Left alone, and reported with the reason, are: inputs that require grad where grad is enabled
(flashgen has no backward pass), dropout with p > 0 in training, non-4-D inputs, f64 (flashgen
has f32, f16, bf16), shapes or masks a program cannot express, and on CUDA tensors what the
CUDA backend does not run on its tensor cores (checked when compiling: f32 programs, head sizes
past 256, devices other than cuda:0). One difference remains for
what is captured: a row whose bool mask removes every key is 0 in flashgen, NaN in SDPA (HF's
masks use the dtype's minimum, not -inf, so their rows never are).

The report accumulates over the graphs compiled since reset_report() (the graphs of one
torch.compile'd call, graph breaks included, when reset before it); the logger
"flashgen.torch" logs one line per capture (INFO) and per candidate left alone (WARNING).
Importing this module registers the backend name with Dynamo when the installed entry point
did not. Tests: python/tests/test_backend.py, python/tests/test_models.py.
"""
from __future__ import annotations

import copy
import logging
import math
import operator
import threading
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node

import flashgen
from .._kernel import _torch_dtype_name
from . import _ops  # noqa: F401  (registers torch.ops.flashgen.run)

log = logging.getLogger("flashgen.torch")

BACKEND_NAME = "flashgen"
SDPA = "sdpa"
EAGER = "eager chain"
_FLOAT_TYPES = ("f32", "f16", "bf16")


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------

@dataclass
class Captured:
    """An attention replaced by a flashgen kernel."""
    node: str        # the FX node replaced: the SDPA call or the chain's final matmul
    kind: str        # "sdpa" or "eager chain"
    shapes: dict     # {"q": (B, Hq, M, D), "k": ..., "v": ..., other inputs, "out": ...}
    program: str     # the flashgen program's text
    key: str         # the flashgen kernel's key (torch.ops.flashgen.run's first argument)
    gqa: bool        # K/V heads read once for groups of query heads
    graph: int       # which graph since reset_report() (0, 1, ...)


@dataclass
class LeftAlone:
    """An attention candidate left to Inductor."""
    node: str
    kind: str
    shapes: dict
    reason: str
    graph: int


@dataclass
class Report:
    captured: list = field(default_factory=list)
    left_alone: list = field(default_factory=list)
    graphs: int = 0  # graphs compiled since reset_report()

    def __str__(self):
        lines = [f"flashgen backend: {self.graphs} graph(s), {len(self.captured)} attention(s) "
                 f"captured, {len(self.left_alone)} left alone"]
        lines += [f"  captured {c.kind} {c.node} (graph {c.graph}): {_fmt_shapes(c.shapes)}"
                  for c in self.captured]
        lines += [f"  left alone {x.kind} {x.node} (graph {x.graph}): {x.reason}"
                  for x in self.left_alone]
        return "\n".join(lines)


_REPORT = Report()
_REPORT_LOCK = threading.Lock()


def last_report() -> Report:
    """A copy of the report of the graphs compiled since reset_report()."""
    with _REPORT_LOCK:
        return copy.deepcopy(_REPORT)


def reset_report() -> None:
    """Starts a new report (call it before the torch.compile'd call the report is to cover)."""
    global _REPORT
    with _REPORT_LOCK:
        _REPORT = Report()


def _fmt_shapes(shapes: dict) -> str:
    return ", ".join(f"{n} [{', '.join(str(s) for s in shp)}]" for n, shp in shapes.items())


# ---------------------------------------------------------------------------------------------
# Graph helpers
# ---------------------------------------------------------------------------------------------

class _Unsupported(Exception):
    """A candidate that flashgen cannot take; the message is the report's reason."""


def _val(node):
    """The example value (a FakeTensor, a SymInt, ...) Dynamo recorded for a node."""
    if not isinstance(node, Node):
        return node
    meta = node.meta
    return meta["example_value"] if "example_value" in meta else meta.get("val")


def _tensor_val(node, what: str) -> torch.Tensor:
    v = _val(node)
    if not isinstance(v, torch.Tensor):
        raise _Unsupported(f"{what} has no recorded tensor value")
    return v


def _shape(v) -> tuple:
    return tuple(int(s) if isinstance(s, int) else s for s in v.shape)


def _report_shape(v) -> tuple:
    return tuple(s if isinstance(s, int) else str(s) for s in v.shape)


def _is_call(node, functions=(), methods=()) -> bool:
    if not isinstance(node, Node):
        return False
    if node.op == "call_function":
        return node.target in functions
    return node.op == "call_method" and node.target in methods


def _bind(node: Node, names: tuple, defaults: dict) -> dict:
    """The node's arguments by name (the first name is the tensor of a method call)."""
    if len(node.args) > len(names):
        raise _Unsupported(f"{node.name} has more arguments than expected")
    out = dict(defaults)
    out.update(zip(names, node.args))
    for k, v in node.kwargs.items():
        if k not in names:
            raise _Unsupported(f"{node.name} has the unexpected argument {k}=")
        out[k] = v
    return out


def _is_one(s) -> bool:
    return isinstance(s, int) and s == 1


def _sizes_differ(a, b) -> bool:
    return isinstance(a, int) and isinstance(b, int) and a != b


def _same(a, b) -> bool:
    """Sizes known to be equal without adding a shape guard: equal ints, or SymInts of one
    expression (comparing SymInts with == would guard on the result after Dynamo's tracing)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt):
        return a.node.expr == b.node.expr
    return False


def _same_shape(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


def _lit(v) -> str:
    """A Python number as a flashgen literal (floats as the f32 value torch computes with)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        if abs(v) > 2**53:
            raise _Unsupported(f"the constant {v} is beyond flashgen's integer literals (2^53)")
        return f"({v})" if v < 0 else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            raise _Unsupported("a NaN constant in the scores")
        f = torch.tensor(v, dtype=torch.float32).item()
        if math.isinf(f):
            return "inf" if f > 0 else "(-inf)"
        f = max(f, -1.7e38)  # masked_fill(..., finfo.min): see the floor in _program
        text = repr(f)
        if "." not in text and "e" not in text:
            text += "."
        return f"({text})" if f < 0 else text
    raise _Unsupported(f"the constant {v!r} ({type(v).__name__}) has no flashgen literal")


# ---------------------------------------------------------------------------------------------
# Recognizing the pieces
# ---------------------------------------------------------------------------------------------

_SDPA_FUNCS = (F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention)
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
              "enable_gqa")
_SDPA_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None,
                  "enable_gqa": False}

_MATMUL_FUNCS = (torch.matmul, operator.matmul)
_SOFTMAX_FUNCS = (torch.softmax, F.softmax, torch.special.softmax)
_DROPOUT_FUNCS = (F.dropout, torch.dropout)


def _is_matmul(node) -> bool:
    return _is_call(node, _MATMUL_FUNCS, ("matmul",))


# Products a softmax of attention may come from or feed that the matcher does not take: a
# softmax next to one is a candidate, reported as left alone with the reason.
_OTHER_PRODUCTS = (torch.einsum, torch.bmm, torch.baddbmm, torch.mm)


def _is_product(node) -> bool:
    return _is_matmul(node) or _is_call(node, _OTHER_PRODUCTS, ("bmm", "mm", "baddbmm"))


def _softmax_args(node: Node):
    """(input, dim, dtype) of a softmax call."""
    if node.op == "call_method":
        a = _bind(node, ("input", "dim", "dtype"), {"dtype": None})
    elif node.target is F.softmax:
        a = _bind(node, ("input", "dim", "_stacklevel", "dtype"),
                  {"dim": None, "_stacklevel": 3, "dtype": None})
    else:
        a = _bind(node, ("input", "dim", "dtype"), {"dtype": None})
    return a["input"], a["dim"], a["dtype"]


def _dropout_active(node: Node) -> bool:
    if node.target is torch.dropout:
        a = _bind(node, ("input", "p", "train"), {})
        p, training = a["p"], a["train"]
    else:
        a = _bind(node, ("input", "p", "training", "inplace"),
                  {"p": 0.5, "training": True, "inplace": False})
        p, training = a["p"], a["training"]
    if isinstance(p, Node) or isinstance(training, Node):
        raise _Unsupported(f"{node.name}: dropout with a computed p or training flag")
    return bool(training) and p != 0


_CONVERT_METHODS = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16}


def _conversion(node) -> tuple | None:
    """(input, dtype or None) of a dtype conversion (to / type / float / half / bfloat16)."""
    if not _is_call(node, (), ("to", "type", "float", "half", "bfloat16")):
        return None
    if node.target in _CONVERT_METHODS:
        if len(node.args) != 1 or node.kwargs:
            return None
        return node.args[0], _CONVERT_METHODS[node.target]
    dtype = node.kwargs.get("dtype")
    for a in node.args[1:]:
        if isinstance(a, torch.dtype):
            dtype = a
        elif not isinstance(a, (torch.device, str, bool)):
            return None  # .to(other_tensor) and the like
    extra = set(node.kwargs) - {"dtype", "device", "non_blocking", "copy"}
    if extra:
        return None
    src, out = _val(node.args[0]), _val(node)
    if not (isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor)):
        return None
    if out.device != src.device:
        return None
    return node.args[0], dtype


def _key_of_transpose(node) -> Node | None:
    """k of k.transpose(-2, -1) (either order, 2/3 or negative dims, or permute(0, 1, 3, 2))."""
    if _is_call(node, (torch.transpose,), ("transpose",)) and len(node.args) == 3:
        dims = {d % 4 for d in node.args[1:] if isinstance(d, int)}
        return node.args[0] if dims == {2, 3} else None
    if _is_call(node, (torch.permute,), ("permute",)):
        perm = node.args[1] if len(node.args) == 2 else node.args[1:]
        if tuple(d % 4 for d in perm) == (0, 1, 3, 2):
            return node.args[0]
    return None


def _unrepeat(node: Node) -> tuple:
    """(base, r, nodes) for K/V heads repeated r times along dim 1 (HF's repeat_kv or
    repeat_interleave), else (node, 1, ())."""
    got = _unrepeat_expand(node) or _unrepeat_interleave(node)
    return got if got else (node, 1, ())


def _unrepeat_expand(node):
    if not _is_call(node, (torch.reshape,), ("reshape", "view")):
        return None
    ex = node.args[0]
    if not _is_call(ex, (), ("expand",)):
        return None
    un = ex.args[0]
    if _is_call(un, (torch.unsqueeze,), ("unsqueeze",)):
        if len(un.args) != 2 or un.args[1] not in (2, -3):
            return None
    elif _is_call(un, (operator.getitem,)):
        if not _is_none_at_2(un.args[1]):
            return None
    else:
        return None
    base = un.args[0]
    vb, ve, vo = _val(base), _val(ex), _val(node)
    if not all(isinstance(v, torch.Tensor) for v in (vb, ve, vo)) or vb.dim() != 4:
        return None
    B, H, N, D = _shape(vb)
    r = _shape(ve)[2] if ve.dim() == 5 else None
    if not isinstance(r, int) or not isinstance(H, int):
        return None
    if not _same_shape(_shape(ve), (B, H, r, N, D)) or not _same_shape(_shape(vo),
                                                                     (B, H * r, N, D)):
        return None
    return base, r, (node, ex, un)


def _is_none_at_2(idx) -> bool:
    if not isinstance(idx, tuple) or len(idx) < 3 or idx[2] is not None:
        return False
    full = slice(None)
    return all(i == full for i in idx[:2]) and all(i == full or i is Ellipsis for i in idx[3:])


def _unrepeat_interleave(node):
    if not _is_call(node, (torch.repeat_interleave,), ("repeat_interleave",)):
        return None
    a = _bind(node, ("input", "repeats", "dim", "output_size"), {"dim": None,
                                                                 "output_size": None})
    if not isinstance(a["repeats"], int) or a["dim"] not in (1, -3):
        return None
    vb = _val(a["input"])
    if not isinstance(vb, torch.Tensor) or vb.dim() != 4:
        return None
    return a["input"], a["repeats"], (node,)


# ---------------------------------------------------------------------------------------------
# The score expression of an eager chain
# ---------------------------------------------------------------------------------------------

_SCORE_FUNCS = {
    operator.add: "({} + {})", torch.add: "({} + {})", operator.sub: "({} - {})",
    torch.sub: "({} - {})", operator.mul: "({} * {})", torch.mul: "({} * {})",
    operator.truediv: "({} / {})", torch.div: "({} / {})", operator.neg: "(-{})",
    torch.neg: "(-{})", torch.tanh: "tanh({})", torch.where: "where({}, {}, {})",
}
_SCORE_METHODS = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})",
                  "div": "({} / {})", "neg": "(-{})", "tanh": "tanh({})"}
_CONVERT_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def _score_op(node):
    """(format, operands) of an element-wise op the score expression may hold, else None."""
    if not isinstance(node, Node) or node.op not in ("call_function", "call_method"):
        return None
    conv = _conversion(node)
    if conv is not None:
        src, dtype = conv
        if dtype is None:
            return "{}", (src,)
        return (_CONVERT_NAMES[dtype] + "({})", (src,)) if dtype in _CONVERT_NAMES else None
    if _is_call(node, (torch.masked_fill,), ("masked_fill",)):
        x, mask, value = node.args if len(node.args) == 3 else (None, None, None)
        return ("where({1}, {2}, {0})", (x, mask, value)) if x is not None else None
    fmt = (_SCORE_FUNCS.get(node.target) if node.op == "call_function"
           else _SCORE_METHODS.get(node.target))
    if fmt is None or fmt.count("{}") != len(node.args):
        return None
    if any(k not in ("alpha", "rounding_mode") for k in node.kwargs):
        return None
    if node.kwargs.get("alpha", 1) != 1 or node.kwargs.get("rounding_mode") is not None:
        return None
    return fmt, node.args


class _Scores:
    """The score expression between matmul(q, k^T) and softmax, as flashgen text over `s`
    (the dot product) and leaf tensors (parameters t0, t1, ...)."""

    def __init__(self):
        self.qk = None
        self.leaves = []   # tensor nodes, in parameter order
        self._qk_memo = {}

    def has_qk(self, node) -> bool:
        if not isinstance(node, Node):
            return False
        if node not in self._qk_memo:
            self._qk_memo[node] = False  # cycles cannot occur; this bounds revisits
            op = _score_op(node)
            self._qk_memo[node] = _is_matmul(node) or (
                op is not None and any(self.has_qk(a) for a in op[1]))
        return self._qk_memo[node]

    def text(self, node) -> str:
        if not isinstance(node, Node):
            return _lit(node)
        if not self.has_qk(node):
            return self.leaf(node)
        if _is_matmul(node):
            if self.qk is not None and self.qk is not node:
                raise _Unsupported("the scores hold two matmuls")
            self.qk = node
            return "s"
        fmt, args = _score_op(node)
        return fmt.format(*(self.text(a) for a in args))

    def leaf(self, node: Node) -> str:
        v = _val(node)
        if not isinstance(v, torch.Tensor):
            raise _Unsupported(f"the scores use {node.name}, a symbolic scalar")
        if node not in self.leaves:
            self.leaves.append(node)
        return f"t{self.leaves.index(node)}"


# ---------------------------------------------------------------------------------------------
# A match, ready to become a program
# ---------------------------------------------------------------------------------------------

@dataclass
class _Extra:
    """A tensor the scores use: its parameter dims and the graph ops that give it them."""
    name: str
    node: Node
    dtype: str
    dims: list        # flashgen dims, in memory order
    squeeze: list     # tensor dims of size 1 to squeeze away (ascending)
    split: int | None  # the (squeezed) head dim to unflatten into (g, r), for GQA


@dataclass
class _Match:
    kind: str
    anchor: Node      # the node the kernel's output replaces
    q: Node
    k: Node           # K/V as the kernel reads them (repeated heads removed)
    v: Node
    groups: int       # Hkv where GQA, else 0
    rep: int          # query heads per K/V head where GQA
    score: str        # flashgen expression of the scores over s = sum(q * k, d)
    extras: list
    out_dtype: str
    shapes: dict
    dead: tuple       # nodes the rewrite may leave without users (erased then)

    @property
    def gqa(self) -> bool:
        return self.groups > 0


def _float_name(v, what: str) -> str:
    name = _torch_dtype_name(v.dtype)
    if name not in _FLOAT_TYPES:
        raise _Unsupported(f"{what} is {v.dtype}; flashgen takes float32, float16 or bfloat16")
    return name


def _check_grad(vals, out) -> None:
    if out.requires_grad or (torch.is_grad_enabled() and any(v.requires_grad for v in vals)):
        raise _Unsupported("inputs require grad and grad is enabled (flashgen has no backward "
                           "pass; Inductor computes this attention and its gradient)")


def _heads(q, k_node, v_node, enable_gqa: bool) -> tuple:
    """(k, v, groups, rep, dead): K/V as the kernel reads them and the GQA split. Heads
    repeated by repeat_kv are removed; groups = 0 where q and the K/V read have equal heads."""
    hq = _shape(q)[1]
    hk0, hv0 = _shape(_val(k_node))[1], _shape(_val(v_node))[1]
    if not _same(hk0, hv0):
        raise _Unsupported(f"k has {hk0} heads and v {hv0}")
    kb, kr, kdead = _unrepeat(k_node)
    vb, vr, vdead = _unrepeat(v_node)
    if kr != vr:
        kb, vb, kdead, vdead = k_node, v_node, (), ()
    hk = _shape(_val(kb))[1]
    if _same(hk, hq):
        return kb, vb, 0, 0, kdead + vdead
    if not all(isinstance(h, int) for h in (hq, hk0, hk)):
        raise _Unsupported(f"symbolic head counts (q {hq}, k {hk0}): grouped heads need "
                           "static ones")
    broadcast = hk0 == hq or hk0 == 1 or (enable_gqa and hk0 > 0 and hq % hk0 == 0)
    if not broadcast or hk == 0 or hq % hk:
        raise _Unsupported(f"q has {hq} heads and k {hk0}, which do not broadcast")
    return kb, vb, hk, hq // hk, kdead + vdead


def _check_qkv(q, k, v) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise _Unsupported(f"{name} has {t.dim()} dims; flashgen's attention takes 4-D "
                               "[B, H, L, D] inputs")
    B, _, _, D = _shape(q)
    if _sizes_differ(_shape(k)[0], B) or _sizes_differ(_shape(v)[0], B):
        raise _Unsupported("q, k and v have different batch sizes (broadcast batches)")
    if _sizes_differ(_shape(k)[3], D) or _sizes_differ(_shape(k)[2], _shape(v)[2]):
        raise _Unsupported("q, k and v have mismatched head or sequence sizes")


def _extra(name: str, node: Node, target: tuple, gqa: bool) -> _Extra:
    """The parameter for a tensor broadcast against the scores [B, Hq, M, N]."""
    t = _tensor_val(node, name)
    dtype = _torch_dtype_name(t.dtype)
    if dtype is None:
        raise _Unsupported(f"{node.name} is {t.dtype}, which flashgen has no type for")
    if t.dim() > 4:
        raise _Unsupported(f"{node.name} has {t.dim()} dims, more than the scores' 4")
    names = (["b"], ["g", "r"] if gqa else ["h"], ["m"], ["n"])
    off = 4 - t.dim()
    dims, squeeze, split = [], [], None
    for i, s in enumerate(_shape(t)):
        if _is_one(s):
            squeeze.append(i)
            continue
        if _sizes_differ(s, target[off + i]):
            raise _Unsupported(f"{node.name} of shape {list(_report_shape(t))} does not "
                               f"broadcast to the scores {list(target)}")
        if off + i == 1 and gqa:
            split = i - len(squeeze)
        dims += names[off + i]
    return _Extra(name, node, dtype, dims, squeeze, split)


def _match_sdpa(node: Node) -> _Match:
    a = _bind(node, _SDPA_ARGS, _SDPA_DEFAULTS)
    q = _tensor_val(a["query"], "query")
    k0, v0 = _tensor_val(a["key"], "key"), _tensor_val(a["value"], "value")
    mask = a["attn_mask"]
    vals = [q, k0, v0] + ([_tensor_val(mask, "attn_mask")] if mask is not None else [])
    _check_grad(vals, _tensor_val(node, "the output"))
    p = a["dropout_p"]
    if isinstance(p, Node) or p != 0:
        raise _Unsupported(f"dropout_p={p} (flashgen has no dropout; eval mode passes 0)")
    for x in ("is_causal", "enable_gqa", "scale"):
        if isinstance(a[x], Node):
            raise _Unsupported(f"{x} is computed in the graph, not a constant")
    _check_qkv(q, k0, v0)
    dts = {_float_name(t, n) for t, n in ((q, "q"), (k0, "k"), (v0, "v"))}
    if len(dts) != 1:
        raise _Unsupported("q, k and v have different dtypes")
    k, v, groups, rep, dead = _heads(q, a["key"], a["value"], bool(a["enable_gqa"]))
    shapes = {"q": _report_shape(q), "k": _report_shape(_val(k)), "v": _report_shape(_val(v))}
    B, Hq, M, _ = _shape(q)
    score = "s / sqrt(size(d))" if a["scale"] is None else f"s * {_lit(float(a['scale']))}"
    extras = []
    if mask is not None:
        if a["is_causal"]:
            raise _Unsupported("attn_mask together with is_causal (SDPA rejects it too)")
        ex = _extra("mask", mask, (B, Hq, M, _shape(k0)[2]), groups > 0)
        if ex.dtype == "bool":
            score = f"where(mask, {score}, -inf)"
        elif ex.dtype in _FLOAT_TYPES:
            score = f"{score} + mask"
        else:
            raise _Unsupported(f"attn_mask is {_val(mask).dtype}; SDPA takes bool or float")
        extras.append(ex)
        shapes["mask"] = _report_shape(_val(mask))
    if a["is_causal"]:
        score = f"where(n <= m, {score}, -inf)"
    shapes["out"] = _report_shape(_val(node))
    return _Match(SDPA, node, a["query"], k, v, groups, rep, score, extras,
                  dts.pop(), shapes, dead)


def _p_side(sm: Node) -> tuple:
    """(final matmul, nodes) from a softmax through conversions, dropout and contiguous."""
    node, path = sm, []
    while True:
        users = list(node.users)
        if len(users) != 1:
            raise _Unsupported(f"the attention weights {node.name} are used "
                               f"{len(users)} times, not only by matmul(., v)")
        user = users[0]
        if not user.args or user.args[0] is not node:
            raise _Unsupported(f"the attention weights {node.name} are not the first operand "
                               f"of {user.name}")
        if _is_matmul(user) and len(user.args) == 2:
            return user, tuple(path)
        if _is_call(user, _DROPOUT_FUNCS):
            if _dropout_active(user):
                raise _Unsupported(f"{user.name}: dropout with p > 0 in training (flashgen "
                                   "has no dropout)")
        elif not (_conversion(user) or _is_call(user, (), ("contiguous",))):
            raise _Unsupported(f"the attention weights go through {user.name} "
                               f"({user.target}), not into matmul(., v)")
        path.append(user)
        node = user


def _match_eager(sm: Node) -> _Match:
    x, dim, sm_dtype = _softmax_args(sm)
    xv = _tensor_val(x, "the scores")
    if xv.dim() != 4 or not isinstance(dim, int) or dim % 4 != 3:
        raise _Unsupported(f"softmax over dim {dim} of a {xv.dim()}-D tensor (attention "
                           "takes softmax over the last dim of 4-D scores)")
    if sm_dtype is not None and sm_dtype not in _CONVERT_NAMES:
        raise _Unsupported(f"softmax with dtype={sm_dtype}")
    pv, path = _p_side(sm)
    scores = _Scores()
    text = scores.text(x)
    qk = scores.qk
    if qk is None or len(qk.args) != 2:
        raise _Unsupported("the softmax's input is not computed from matmul(q, k^T)")
    k_node = _key_of_transpose(qk.args[1])
    if k_node is None:
        raise _Unsupported(f"the scores' matmul {qk.name} takes {qk.args[1]}, not "
                           "k.transpose(-2, -1)")
    q_node, v_node = qk.args[0], pv.args[1]
    q, k0, v0 = (_tensor_val(n, w) for n, w in ((q_node, "q"), (k_node, "k"), (v_node, "v")))
    leaf_vals = [_tensor_val(n, n.name) for n in scores.leaves]
    _check_grad([q, k0, v0] + leaf_vals, _tensor_val(pv, "the output"))
    _check_qkv(q, k0, v0)
    for t, n in ((q, "q"), (k0, "k"), (v0, "v")):
        _float_name(t, n)
    if not _same_shape(_shape(_val(qk)), _shape(xv)):
        raise _Unsupported("the scores broadcast beyond matmul(q, k^T)'s shape")
    k, v, groups, rep, dead = _heads(q, k_node, v_node, False)
    target = _shape(xv)
    extras = [_extra(f"t{i}", n, target, groups > 0) for i, n in enumerate(scores.leaves)]
    shapes = {"q": _report_shape(q), "k": _report_shape(_val(k)), "v": _report_shape(_val(v))}
    shapes.update({n.name: _report_shape(t) for n, t in zip(scores.leaves, leaf_vals)})
    shapes["out"] = _report_shape(_val(pv))
    out_dtype = _float_name(_val(pv), "the output")
    chain = (pv, sm) + path + (qk, qk.args[1]) + dead
    return _Match(EAGER, pv, q_node, k, v, groups, rep, text, extras, out_dtype, shapes, chain)


def _eager_candidate(sm: Node) -> bool:
    """Whether a softmax looks like attention: matmul before it, or matmul after."""
    x = sm.args[0] if sm.args else sm.kwargs.get("input")
    if _Scores().has_qk(x):
        return True
    node = x  # up the scores' first operands: a product (einsum, bmm) a few ops back
    for _ in range(6):
        if not isinstance(node, Node):
            break
        if _is_product(node):
            return True
        node = node.args[0] if node.args else None
    node = sm
    for _ in range(4):
        users = list(node.users)
        if not users:
            return False
        if any(_is_product(u) for u in users):
            return True
        node = users[0]
    return False


# ---------------------------------------------------------------------------------------------
# Programs and the rewrite
# ---------------------------------------------------------------------------------------------

def _program(m: _Match) -> str:
    name = "sdpa" if m.kind == SDPA else "eager"
    hq, hkv = ("g, r", "g") if m.gqa else ("h", "h")
    dt = {n: _torch_dtype_name(_val(getattr(m, n)).dtype) for n in ("q", "k", "v")}
    params = [f"q: {dt['q']}[b, {hq}, m, d]", f"k: {dt['k']}[b, {hkv}, n, d]",
              f"v: {dt['v']}[b, {hkv}, n, e]"]
    # Float tensors the scores read (masks, biases) are floored at -1.7e38 (about -2^127): the
    # CUDA kernels carry logits in base 2 (times log2 e), where a value below
    # -FLT_MAX / log2 e (-2.36e38) overflows to -inf, and HF's masks hold the dtype's minimum
    # (-3.39e38 in f32 and bf16), which made its fully masked (padding) rows NaN on the GPU.
    # At -1.7e38 a masked key's weight is still exactly 0 unless its whole row is masked, where
    # the weights are uniform, as in eager; -inf stays -inf. Float literals get the same floor
    # (_lit: masked_fill with finfo.min).
    floor = [x for x in m.extras if x.dtype in _FLOAT_TYPES]
    params += [f"{x.name}{'_in' if x in floor else ''}: {x.dtype}[{', '.join(x.dims)}]"
               for x in m.extras]
    lets = "".join(f"  {x.name} = where({x.name}_in == -inf, -inf, maximum({x.name}_in, "
                   f"-1.7e38))\n" for x in floor)
    return (f"program {name}({', '.join(params)}) {{\n"
            f"{lets}"
            f"  s = sum(q * k, d)\n"
            f"  x = {m.score}\n"
            f"  out o: {m.out_dtype}[b, {hq}, m, e] = sum(softmax(x, n) * v, n)\n"
            "}\n")


def check_device(device: torch.device, kernel, head_sizes: tuple, dtype=None) -> None:
    """Whether flashgen should run `kernel` where the inputs are: the CPU backend takes every
    program; on cuda:0 the backend replaces PyTorch's attention only where flashgen's kernel
    takes the tensor-core path with 16-bit inputs (bf16/f16 attention, head sizes up to 256:
    docs/python.md), which kernel.cuda_paths says without a GPU. The element path runs every
    program, but slower than PyTorch's fused kernels, and float32 inputs (`dtype`) reach the
    tensor cores as bf16 pieces at about the speed of PyTorch's float32 kernels: such calls are
    left to PyTorch."""
    if device.type == "cpu":
        return
    if device.type != "cuda":
        raise _Unsupported(f"inputs on {device}; flashgen runs CPU and CUDA tensors")
    if not flashgen.cuda_available():
        raise _Unsupported("the inputs are CUDA tensors and this flashgen has no CUDA backend "
                           "(flashgen.cuda_available() is false)")
    if device.index not in (None, 0):
        raise _Unsupported(f"inputs on {device}; flashgen's CUDA backend runs on cuda:0")
    if dtype == torch.float32:
        raise _Unsupported("float32 attention: flashgen runs it on the tensor cores as bf16 "
                           "pieces at about the speed of PyTorch's float32 kernels (0.6x-1.2x: "
                           "bench/RESULTS.md, session 15), so PyTorch keeps it")
    d, e = head_sizes
    if not (isinstance(d, int) and isinstance(e, int)):
        raise _Unsupported("symbolic head sizes (the CUDA backend specializes them)")
    for _name, path, why in kernel.cuda_paths("cuda-sm80", {"d": d, "e": e}):
        if path != "tensor_core":
            raise _Unsupported(f"flashgen would run it on its CUDA element path, slower than "
                               f"PyTorch's kernels: {why}")


def _call_method(graph, name: str, *args) -> Node:
    node = graph.call_method(name, args)
    _fake_value(node)
    return node


def _fake_value(node: Node) -> None:
    """Records the new node's example value, as Dynamo does for its own nodes."""
    args = torch.fx.node.map_arg(node.args, _val)
    fake = next((a for a in torch.utils._pytree.tree_leaves(args)
                 if isinstance(a, torch._subclasses.FakeTensor)), None)
    if fake is None:
        return
    with fake.fake_mode:
        if node.op == "call_method":
            out = getattr(args[0], node.target)(*args[1:])
        else:
            out = node.target(*args)
    node.meta["example_value"] = out


def _prepare_extra(graph, x: _Extra, m: _Match) -> Node:
    node = x.node
    for d in reversed(x.squeeze):
        node = _call_method(graph, "squeeze", node, d)
    if x.split is not None:
        node = _call_method(graph, "unflatten", node, x.split, (m.groups, m.rep))
    return node


def _rewrite(gm: GraphModule, m: _Match, kernel) -> None:
    g = gm.graph
    with g.inserting_before(m.anchor):
        q = m.q
        if m.gqa:
            q = _call_method(g, "unflatten", q, 1, (m.groups, m.rep))
        extras = [_prepare_extra(g, x, m) for x in m.extras]
        run = g.call_function(torch.ops.flashgen.run.default,
                              (kernel.key, [q, m.k, m.v] + extras))
        _fake_value(run)
        out = g.call_function(operator.getitem, (run, 0))
        _fake_value(out)
        if m.gqa:
            out = _call_method(g, "flatten", out, 1, 2)
    for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
        if key in m.anchor.meta:
            run.meta[key] = m.anchor.meta[key]
    m.anchor.replace_all_uses_with(out)


def _erase_dead(gm: GraphModule, candidates: set) -> None:
    """Erases the matched nodes the rewrites left without users (the chains, repeat_kv)."""
    for node in reversed(list(gm.graph.nodes)):
        if node in candidates and not node.users:
            gm.graph.erase_node(node)


# ---------------------------------------------------------------------------------------------
# The backend
# ---------------------------------------------------------------------------------------------

def _candidates(gm: GraphModule):
    """(kind, node) of every attention candidate, in graph order."""
    for node in gm.graph.nodes:
        if _is_call(node, _SDPA_FUNCS):
            yield SDPA, node
        elif _is_call(node, _SOFTMAX_FUNCS, ("softmax",)) and _eager_candidate(node):
            yield EAGER, node


def _candidate_shapes(kind: str, node: Node) -> dict:
    if kind == SDPA:
        a = {**dict(zip(_SDPA_ARGS, node.args)), **node.kwargs}
        items = (("q", a.get("query")), ("k", a.get("key")), ("v", a.get("value")),
                 ("mask", a.get("attn_mask")))
    else:
        items = (("scores", node.args[0] if node.args else None),)
    out = {}
    for name, n in items:
        v = _val(n) if isinstance(n, Node) else None
        if isinstance(v, torch.Tensor):
            out[name] = _report_shape(v)
    return out


def _record_left_alone(kind, node, reason, graph_no) -> None:
    entry = LeftAlone(node.name, kind, _candidate_shapes(kind, node), reason, graph_no)
    with _REPORT_LOCK:
        _REPORT.left_alone.append(entry)
    log.warning("flashgen: left alone %s %s (graph %d): %s: %s", kind, node.name, graph_no,
                _fmt_shapes(entry.shapes), reason)


def _record_captured(m: _Match, text: str, kernel, graph_no) -> None:
    entry = Captured(m.anchor.name, m.kind, m.shapes, text, kernel.key, m.gqa, graph_no)
    with _REPORT_LOCK:
        _REPORT.captured.append(entry)
    gqa = f", GQA {m.groups} x {m.rep}" if m.gqa else ""
    log.info("flashgen: captured %s %s (graph %d): %s%s -> kernel %s", m.kind, m.anchor.name,
             graph_no, _fmt_shapes(m.shapes), gqa, kernel.key)


def _match(kind: str, node: Node) -> _Match:
    return _match_sdpa(node) if kind == SDPA else _match_eager(node)


def replace_attention(gm: GraphModule) -> int:
    """Replaces the attention in `gm` by flashgen kernels (reported); returns how many."""
    with _REPORT_LOCK:
        graph_no = _REPORT.graphs
        _REPORT.graphs += 1
    matches = []
    for kind, node in list(_candidates(gm)):
        try:
            m = _match(kind, node)
            text = _program(m)
            kernel = flashgen.compile(text)
            q, v = _val(m.q), _val(m.v)
            check_device(q.device, kernel, (_shape(q)[3], _shape(v)[3]), q.dtype)
        except (_Unsupported, flashgen.Error) as e:
            _record_left_alone(kind, node, str(e), graph_no)
            continue
        matches.append((m, text, kernel))
    dead = set()
    for m, text, kernel in matches:
        _rewrite(gm, m, kernel)
        dead.update(m.dead)
        dead.add(m.anchor)
        _record_captured(m, text, kernel, graph_no)
    if matches:
        _erase_dead(gm, dead)
        gm.graph.lint()
        gm.recompile()
    return len(matches)


def compile_backend(gm: GraphModule, example_inputs):
    """The torch.compile backend "flashgen": attention to flashgen kernels, the rest to
    Inductor (compile_fx)."""
    from torch._inductor.compile_fx import compile_fx

    replace_attention(gm)
    return compile_fx(gm, example_inputs)


def _register() -> None:
    """Registers the backend name unless Dynamo has it (or will load it from the entry point
    naming this function: registering then would make that load fail as a duplicate)."""
    try:
        from torch._dynamo.backends import registry
    except ImportError:  # a torch without the registry module: the public function only
        _register_new(torch._dynamo.register_backend)
        return
    loaded = getattr(registry, "_COMPILER_FNS", None)
    if loaded is None:  # older layout: _BACKENDS holds the functions themselves
        if BACKEND_NAME not in registry._BACKENDS:
            _register_new(registry.register_backend)
        return
    if BACKEND_NAME in loaded:
        return
    entry = registry._BACKENDS.get(BACKEND_NAME)
    if entry is not None and getattr(entry, "value", "") == "flashgen.torch:compile_backend":
        return
    _register_new(registry.register_backend)


def _register_new(register) -> None:
    try:
        register(compiler_fn=compile_backend, name=BACKEND_NAME)
    except AssertionError:  # registered meanwhile (a duplicate name)
        pass


_register()
