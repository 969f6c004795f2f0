"""flashgen: attention programs compiled into fused FlashAttention-style kernels.

    import flashgen
    k = flashgen.compile("examples/causal.attn")     # a path, or the program text itself
    o = k(q, k_, v)                                   # torch, numpy or CuPy arrays

CPU arrays run on the CPU backend, CUDA arrays on the CUDA backend; outputs are allocated by the
inputs' framework and written in place. `flashgen.torch` holds the PyTorch integration: custom
ops (torch.compile traces through them), `flex_attention` and the `torch.compile` backend
`"flashgen"`. Errors are `flashgen.ProgramError` (the program: file:line:col, the line and a
caret), `flashgen.CallError` (the call: names the input and the dimension) and
`flashgen.BackendError` (compilers, GPUs, memory), all `flashgen.Error`.
"""
from ._core import BackendError, CallError, Error, ProgramError
from ._core import cuda_available
from ._core import version as _version
from ._kernel import FlashgenWarning, Kernel, check_errors, compile

__version__ = _version()
__all__ = ["compile", "Kernel", "check_errors", "cuda_available", "Error", "ProgramError",
           "CallError", "BackendError", "FlashgenWarning"]
