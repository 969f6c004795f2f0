"""flashgen for PyTorch.

- `call(kernel, *tensors)`: a flashgen kernel as the custom op `flashgen::run` (Kernel.__call__
  with torch tensors goes through it), which torch.compile traces without a graph break.
- `flex_attention(q, k, v, score_mod=None, mask_mod=None, scale=None, enable_gqa=False,
  return_lse=False)`: FlexAttention's calls, traced into a flashgen program (_flex.py).
- `compile_backend`: the torch.compile backend `"flashgen"` (torch.compile(model,
  backend="flashgen")), which replaces the attention it finds in FX graphs by flashgen kernels
  and hands the rest to Inductor; `last_report()` says what it captured and what it left alone
  since `reset_report()` (_backend.py). Importing this module registers the backend name.
"""
from . import _ops
from ._backend import compile_backend, last_report, reset_report  # registers "flashgen"
from ._flex import flex_attention


def call(kernel, *tensors, **named):
    """Runs a flashgen Kernel on torch tensors through the custom op flashgen::run."""
    import torch

    outs = torch.ops.flashgen.run(kernel.key, kernel.bind(tensors, named))
    return outs[0] if len(outs) == 1 else tuple(outs)


__all__ = ["call", "flex_attention", "compile_backend", "last_report", "reset_report"]
