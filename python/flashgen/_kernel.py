"""flashgen.compile and the kernel object it returns.

A Kernel is a parsed, checked program. Calling it runs the program:

- host arrays (torch CPU tensors, numpy arrays) on the CPU backend (or `backend="ref"`, the
  f64 reference evaluator): the arrays cross into C++ by DLPack and are read in place, the
  outputs are allocated by the inputs' framework and written in place;
- torch CUDA tensors on the CUDA backend, launched on torch's current stream without a host
  synchronization (a `torch.cuda.graph` capture records the launch); CuPy arrays likewise, on
  CuPy's current stream, with CuPy outputs. The kernel's error word (an out-of-range gather,
  `x % 0`) lives in device memory and is read back asynchronously: an error is raised by the
  next call of the same kernel that finds the read-back complete, or by
  `flashgen.check_errors()`, which waits for it.

Calls with torch tensors go through the custom op `flashgen::run` (flashgen.torch), so
`torch.compile(fullgraph=True)` traces through them.
Tests: python/tests/test_kernel.py, python/tests/test_torch_ops.py, python/tests/test_cuda.py,
python/tests/test_cupy.py.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
import warnings

from . import _core


class FlashgenWarning(UserWarning):
    """A result that may not follow the language's rules (see the message)."""


_FLOATS = ("f32", "f16", "bf16", "f8e4m3", "f8e5m2")
_INTS = ("i32", "i64")

# Kernels by key, so the custom op (whose schema takes a string) finds its kernel; identical
# programs share one entry.
_KERNELS: dict = {}
_KERNELS_LOCK = threading.Lock()


def _torch():
    return sys.modules.get("torch")


_TORCH_TABLE = None  # flashgen dtype name -> torch dtype, built at the first use


def _torch_table() -> dict:
    global _TORCH_TABLE
    if _TORCH_TABLE is None:
        import torch

        table = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                 "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}
        if hasattr(torch, "float8_e4m3fn"):
            table["f8e4m3"] = torch.float8_e4m3fn
            table["f8e5m2"] = torch.float8_e5m2
        _TORCH_TABLE = table
    return _TORCH_TABLE


def torch_dtype(name: str):
    table = _torch_table()
    if name not in table:
        raise CallError(f"torch has no dtype for flashgen's {name}")
    return table[name]


def _torch_dtype_name(dt):
    for name, t in _torch_table().items():
        if t == dt:
            return name
    return None


def _numpy_dtype_name(dt):
    table = {"float32": "f32", "float16": "f16", "int32": "i32", "int64": "i64", "bool": "bool"}
    return table.get(str(dt))


CallError = _core.CallError


def compile(source_or_path, program: str | None = None, *, careful: bool = False) -> "Kernel":
    """Parses and checks a program; returns a Kernel.

    `source_or_path` is the program's text or the path of a `.attn` file (a str containing
    `program ... {` is text). `program` picks one program of a file that holds several.
    `careful=True` makes CUDA calls use the kernel build that follows the strong zero for inf
    or NaN values at masked keys in every case (slower; see docs/python.md)."""
    if isinstance(source_or_path, os.PathLike) or (
            isinstance(source_or_path, str) and "{" not in source_or_path):
        path = os.fspath(source_or_path)
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except OSError as e:
            raise CallError(f"cannot read '{path}': {e.strerror}") from None
        filename = path
    elif isinstance(source_or_path, str):
        source, filename = source_or_path, "<string>"
    else:
        raise TypeError("flashgen.compile takes the program's text or a path, not "
                        f"{type(source_or_path).__name__}")
    prog = _core.parse(source, filename, program or "")
    digest = hashlib.sha1(f"{prog.name}\0{int(careful)}\0{source}".encode()).hexdigest()[:16]
    key = f"{prog.name}:{digest}"
    with _KERNELS_LOCK:
        k = _KERNELS.get(key)
        if k is None or k.source != source:
            k = Kernel(prog, key, careful)
            _KERNELS[key] = k
    return k


def kernel_by_key(key: str) -> "Kernel":
    with _KERNELS_LOCK:
        k = _KERNELS.get(key)
    if k is None:
        raise CallError(f"no flashgen kernel has the key '{key}' in this process")
    return k


def check_errors() -> None:
    """Waits for every GPU call's error word and raises the first error found (CallError)."""
    with _KERNELS_LOCK:
        kernels = list(_KERNELS.values())
    for k in kernels:
        k.check_errors()


def _gpu_in_place(v) -> bool:
    """Whether the CUDA kernels read a torch tensor where it is (see _in_place)."""
    return _in_place(v.data_ptr(), list(v.shape), list(v.stride()), v.element_size())


def _in_place(ptr: int, shape: list, st: list, itemsize: int) -> bool:
    """cuda_launch_device's rule for a buffer a tensor-core kernel reads (element kernels read
    any strides; the rule is kept for all, which costs a copy at most): a 16-byte aligned start,
    and packed, or strided with a contiguous last dim and every other stride a multiple of 16
    bytes (HF's q.transpose(1, 2) of a [B, M, H, D] projection). Strides in elements."""
    n = 1
    for e in shape:
        n *= e
    if n == 0:
        return True
    if ptr % 16:
        return False
    acc, packed = 1, True
    for e, s in zip(reversed(shape), reversed(st)):
        packed = packed and (e == 1 or s == acc)
        acc *= e
    if packed:
        return True
    vec = 16 // itemsize
    if shape[-1] != 1 and st[-1] != 1:
        return False
    return all(e == 1 or (s >= 0 and s % vec == 0) for e, s in zip(shape[:-1], st[:-1]))


def _is_cupy(v) -> bool:
    cp = sys.modules.get("cupy")
    return cp is not None and isinstance(v, cp.ndarray)


class _CupyEvent:
    """A CuPy event with torch.cuda.Event's query/synchronize, for the pending error words."""

    def __init__(self, stream):
        import cupy

        self._ev = cupy.cuda.Event(block=False, disable_timing=True)
        self._ev.record(stream)

    def query(self) -> bool:
        return self._ev.done

    def synchronize(self) -> None:
        self._ev.synchronize()


class Kernel:
    """A compiled program; call it with arrays (positionally, in parameter order, or by name)."""

    def __init__(self, prog, key: str, careful: bool):
        self._prog = prog
        self.key = key
        self.careful = careful
        self.name = prog.name
        self.source = prog.source
        self.params = prog.params()    # [(name, dtype, dims)]
        self.outputs = prog.outputs()  # [(name, dtype, dims)]
        self._pending = []   # GPU calls: (pinned host copy of the error word, event, shapes)
        # GPU calls inside a CUDA graph capture: (device error word, shapes[, copies the graph
        # reads, kept alive: CuPy])
        self._captured = []
        self._lock = threading.Lock()

    def __repr__(self):
        ins = ", ".join(f"{n}: {t}[{', '.join(d)}]" for n, t, d in self.params)
        outs = ", ".join(f"{n}: {t}[{', '.join(d)}]" for n, t, d in self.outputs)
        return f"<flashgen.Kernel {self.name}({ins}) -> ({outs})>"

    # ---- calling ----
    def __call__(self, *args, backend: str | None = None, **kwargs):
        vals = self.bind(args, kwargs)
        torch = _torch()
        if torch is not None and backend is None and all(isinstance(v, torch.Tensor) for v in vals):
            from .torch import _ops  # registers flashgen::run
            outs = torch.ops.flashgen.run(self.key, vals)
        else:
            outs = self.run(vals, backend)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def bind(self, args, kwargs) -> list:
        """The call's arrays in parameter order (CallError for missing or unknown names)."""
        names = [p[0] for p in self.params]
        if len(args) > len(names):
            raise CallError(f"program '{self.name}' takes {len(names)} inputs "
                            f"({', '.join(names)}); {len(args)} were given")
        vals = dict(zip(names, args))
        for n, v in kwargs.items():
            if n not in names:
                raise CallError(f"'{n}' is not an input of program '{self.name}' "
                                f"(inputs: {', '.join(names)})")
            if n in vals:
                raise CallError(f"input '{n}' is given twice")
            vals[n] = v
        missing = [n for n in names if n not in vals]
        if missing:
            raise CallError(f"missing input '{missing[0]}' of program '{self.name}'")
        return [vals[n] for n in names]

    def output_shapes(self, vals) -> dict:
        """{output: shape} for arrays in parameter order (CallError as a call)."""
        return self._prog.output_shapes(self._shapes(vals))

    def _shapes(self, vals) -> dict:
        out = {}
        for (name, dt, _), v in zip(self.params, vals):
            have = self._dtype_name(name, v, dt)
            out[name] = (have if have else dt, [int(s) for s in v.shape], [0] * len(v.shape), 0)
        return out

    @staticmethod
    def _dtype_name(name, v, declared):
        torch = _torch()
        if torch is not None and isinstance(v, torch.Tensor):
            return _torch_dtype_name(v.dtype)
        if hasattr(v, "dtype"):
            return _numpy_dtype_name(v.dtype)
        raise CallError(f"input '{name}' is a {type(v).__name__}, not an array "
                        "(torch tensor or numpy array)")

    def run(self, vals, backend: str | None = None) -> list:
        """Runs on arrays in parameter order; returns the outputs in declaration order."""
        if len(vals) != len(self.params):
            raise CallError(f"program '{self.name}' takes {len(self.params)} inputs; "
                            f"{len(vals)} were given")
        torch = _torch()
        is_torch = [torch is not None and isinstance(v, torch.Tensor) for v in vals]
        if any(is_torch) and not all(is_torch):
            raise CallError("mix of torch tensors and other arrays: give one kind")
        if all(is_torch):
            devices = {v.device.type for v in vals}
            if len(devices) > 1:
                raise CallError("inputs on several devices (" + ", ".join(sorted(devices)) +
                                "): give all on the CPU or all on the GPU")
            if devices == {"cuda"}:
                if backend not in (None, "cuda"):
                    raise CallError(f"CUDA tensors run on the cuda backend, not '{backend}'")
                return self._run_torch_cuda(vals)
            return self._run_host(vals, backend or "cpu", "torch")
        is_cupy = [_is_cupy(v) for v in vals]
        if any(is_cupy):
            if not all(is_cupy):
                raise CallError("mix of CuPy arrays and other arrays: give one kind")
            if backend not in (None, "cuda"):
                raise CallError(f"CuPy arrays run on the cuda backend, not '{backend}'")
            return self._run_cupy(vals)
        for (name, _, _), v in zip(self.params, vals):
            if hasattr(v, "__cuda_array_interface__"):
                raise CallError(f"input '{name}' is a GPU array other than a torch tensor or a "
                                "CuPy array; flashgen takes those on the GPU")
        return self._run_host(vals, backend or "cpu", "numpy")

    def _run_host(self, vals, backend, fw) -> list:
        if backend == "cuda":
            raise CallError("host arrays run on the cpu or ref backend; move the tensors to "
                            "the GPU for the cuda backend")
        inputs = {}
        for (name, dt, _), v in zip(self.params, vals):
            have = self._dtype_name(name, v, dt)
            if have is None:  # a dtype flashgen has no name for (f64, u8, ...)
                if dt not in _FLOATS:
                    raise CallError(f"input '{name}' has dtype {v.dtype}; the program declares "
                                    f"{dt}")
                v = v.to(torch_dtype(dt)) if fw == "torch" else v.astype("float32")
            inputs[name] = v
        shapes = self._prog.output_shapes(self._shapes(list(inputs.values())))
        outs = {}
        for name, dt, _ in self.outputs:
            if fw == "torch":
                import torch
                outs[name] = torch.empty(shapes[name], dtype=torch_dtype(dt))
            else:
                import numpy as np
                if dt not in ("f32", "f16", "i32", "i64", "bool"):
                    raise CallError(f"output '{name}' is {dt}, which numpy has no dtype for; "
                                    "call with torch tensors")
                npdt = {"f32": np.float32, "f16": np.float16, "i32": np.int32,
                        "i64": np.int64, "bool": np.bool_}[dt]
                outs[name] = np.empty(shapes[name], dtype=npdt)
        self._prog.run(inputs, outs, backend)
        return [outs[n] for n, _, _ in self.outputs]

    def _run_torch_cuda(self, vals) -> list:
        import torch

        capturing = torch.cuda.is_current_stream_capturing()
        if not capturing:  # querying events is not allowed while a graph is captured
            self._poll()
        dev = vals[0].device
        if dev.index not in (None, 0):
            raise CallError(f"flashgen's CUDA backend runs on cuda:0; the inputs are on {dev}")
        for (name, _, _), v in zip(self.params, vals):
            if v.device != dev:
                raise CallError(f"input '{name}' is on {v.device}, the others on {dev}")
        args = {}
        keep = []  # converted or packed copies: alive until the launch is on the stream
        for (name, dt, _), v in zip(self.params, vals):
            want = torch_dtype(dt)
            if v.dtype != want:
                if dt in _INTS or dt == "bool" or not v.dtype.is_floating_point:
                    raise CallError(f"input '{name}' is {v.dtype}; the program declares {dt} "
                                    f"(convert it: .to({want}))")
                v = v.to(want)  # floats round to the declared type, as the language says
            if not _gpu_in_place(v):
                v = v.contiguous() if not v.is_contiguous() else v.clone()
            keep.append(v)
            args[name] = (dt, list(v.shape), list(v.stride()), v.data_ptr())
        shapes = {n: (a[0], a[1], a[2], 0) for n, a in args.items()}
        out_shapes = self._prog.output_shapes(shapes)
        outs, out_args = [], {}
        for name, dt, _ in self.outputs:
            t = torch.empty(out_shapes[name], dtype=torch_dtype(dt), device=dev)
            outs.append(t)
            out_args[name] = (dt, list(t.shape), list(t.stride()), t.data_ptr())
        err = torch.zeros(_core.CUDA_ERROR_WORDS, dtype=torch.int64, device=dev)
        stream = torch.cuda.current_stream(dev)
        self._prog.launch_cuda(args, out_args, err.data_ptr(), stream.cuda_stream, self.careful)
        del keep  # freed memory is reused in stream order, after the kernel
        with self._lock:
            if capturing:
                self._captured.append((err, shapes))
            else:
                host = torch.empty(_core.CUDA_ERROR_WORDS, dtype=torch.int64, pin_memory=True)
                host.copy_(err, non_blocking=True)
                ev = torch.cuda.Event()
                ev.record(stream)
                self._pending.append((host, ev, shapes))
        return outs

    def _run_cupy(self, vals) -> list:
        import cupy
        import numpy as np

        with cupy.cuda.Device(0):  # the backend's GPU: its current stream, whatever is current
            stream = cupy.cuda.get_current_stream()
        capturing = stream.is_capturing()
        if not capturing:
            self._poll()
        for (name, _, _), v in zip(self.params, vals):
            if v.device.id != 0:
                raise CallError(f"flashgen's CUDA backend runs on GPU 0; input '{name}' is on "
                                f"GPU {v.device.id}")
        npdt = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64,
                "bool": np.bool_}
        args, keep = {}, []
        # conversions, copies and outputs on the backend's GPU, in the launch's stream order
        with cupy.cuda.Device(0), stream:
            for (name, dt, _), v in zip(self.params, vals):
                have = _numpy_dtype_name(v.dtype)
                if have != dt:
                    if dt not in npdt:
                        raise CallError(f"input '{name}' is {v.dtype}; the program declares {dt}, "
                                        "which CuPy has no dtype for (call with torch tensors)")
                    if dt in _INTS or dt == "bool" or v.dtype.kind != "f":
                        raise CallError(f"input '{name}' is {v.dtype}; the program declares "
                                        f"{dt} (convert it: .astype({npdt[dt].__name__}))")
                    v = v.astype(npdt[dt])  # floats round to the declared type
                st = [s // v.itemsize for s in v.strides]
                if any(s % v.itemsize for s in v.strides) or not _in_place(
                        v.data.ptr, list(v.shape), st, v.itemsize):
                    v = cupy.ascontiguousarray(v).copy() if v.flags.c_contiguous else \
                        cupy.ascontiguousarray(v)
                    st = [s // v.itemsize for s in v.strides]
                keep.append(v)
                args[name] = (dt, list(v.shape), st, v.data.ptr)
            shapes = {n: (a[0], a[1], a[2], 0) for n, a in args.items()}
            out_shapes = self._prog.output_shapes(shapes)
            outs, out_args = [], {}
            for name, dt, _ in self.outputs:
                if dt not in npdt:
                    raise CallError(f"output '{name}' is {dt}, which CuPy has no dtype for; "
                                    "call with torch tensors")
                t = cupy.empty(out_shapes[name], dtype=npdt[dt])
                outs.append(t)
                out_args[name] = (dt, list(t.shape), [s // t.itemsize for s in t.strides],
                                  t.data.ptr)
            err = cupy.zeros(_core.CUDA_ERROR_WORDS, dtype=np.int64)
        self._prog.launch_cuda(args, out_args, err.data.ptr, stream.ptr, self.careful)
        with self._lock:
            if capturing:
                # A replay reruns the captured conversions into these copies: they live as long
                # as the capture's error word (CuPy has no graph-private memory pool).
                self._captured.append((err, shapes, keep))
            else:
                import cupyx

                host = cupyx.empty_pinned((_core.CUDA_ERROR_WORDS,), dtype=np.int64)
                with cupy.cuda.Device(0):  # works on every CuPy (get(blocking=False): 13 on)
                    cupy.cuda.runtime.memcpyAsync(host.ctypes.data, err.data.ptr, host.nbytes,
                                                  cupy.cuda.runtime.memcpyDeviceToHost,
                                                  stream.ptr)
                    self._pending.append((host, _CupyEvent(stream), shapes))
        del keep  # else CuPy's pool reuses freed memory in stream order, after the kernel
        return outs

    # ---- GPU error words ----
    def _poll(self, wait: bool = False):
        with self._lock:
            done, keep = [], []
            for item in self._pending:
                if wait:
                    item[1].synchronize()
                (done if wait or item[1].query() else keep).append(item)
            self._pending = keep
        self._report([(host.tolist(), shapes) for host, _, shapes in done])

    def _report(self, words):
        """Warns for every word that flags a non-finite accumulator, then raises the first
        error among them (and says how many calls failed)."""
        errors = []
        for word, shapes in words:
            self._warn(word)
            if word[0]:
                try:
                    self._prog.raise_error_word(shapes, word)
                except _core.CallError as e:
                    errors.append(str(e))
        if errors:
            more = f" ({len(errors) - 1} more calls failed too)" if len(errors) > 1 else ""
            raise _core.CallError(f"a GPU call of '{self.name}' failed (reported at a later call: "
                                  f"GPU calls do not wait for the GPU): {errors[0]}{more}")

    def _warn(self, word):
        if word[7] and not self.careful:
            warnings.warn(
                f"a GPU call of '{self.name}' ended with inf or NaN accumulators: where inf or "
                "NaN values of v sat at keys a row does not attend, that row may be NaN, where "
                "the language gives 0. flashgen.compile(..., careful=True) follows the rule "
                "(slower).", FlashgenWarning, stacklevel=3)

    def check_errors(self) -> None:
        """Waits for this kernel's GPU calls and raises the first error an error word holds;
        words of calls captured in a CUDA graph hold the latest replay's (call it after a
        replay: before the first one they hold nothing yet)."""
        self._poll(wait=True)
        with self._lock:
            captured = list(self._captured)
        self._report([(item[0].tolist(), item[1]) for item in captured])

    # ---- tools ----
    def explain(self, sizes: dict | None = None, *, json: bool = False,
                target: str = "cpu") -> str:
        """The fusion report (`flashgen explain`): kernels, what was fused and why not."""
        return self._prog.explain(dict(sizes or {}), json, target)

    def emit(self, target: str = "cpu", sizes: dict | None = None) -> str:
        """The generated source for `target` ("cpu", "cuda-sm80", "cuda-sm90")."""
        return self._prog.emit(target, dict(sizes or {}))

    def cuda_paths(self, target: str = "cuda-sm80", sizes: dict | None = None) -> list:
        """Which path each kernel takes on a CUDA target at `sizes`: a list of
        (kernel, "tensor_core" or "element", why), in plan order."""
        return self._prog.cuda_paths(target, dict(sizes or {}))

    def kernel_count(self, sizes: dict | None = None) -> int:
        return self._prog.kernel_count(dict(sizes or {}))
