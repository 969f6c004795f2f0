"""The custom op flashgen::run(key, inputs) -> outputs.

`key` names a Kernel (flashgen.compile registers it); the op runs it on the tensors, in
parameter order, and returns its outputs in declaration order. Its fake implementation computes
the output shapes from the dims the parameters bind (symbolic sizes stay symbolic), so
torch.compile (fullgraph=True) traces through flashgen calls and Inductor calls the op as an
extern kernel. Tests: python/tests/test_torch_ops.py.
"""
from __future__ import annotations

from typing import List

import torch

from .._kernel import kernel_by_key, torch_dtype


@torch.library.custom_op("flashgen::run", mutates_args=())
def run(key: str, inputs: List[torch.Tensor]) -> List[torch.Tensor]:
    return kernel_by_key(key).run(list(inputs))


@run.register_fake
def _run_fake(key: str, inputs: List[torch.Tensor]) -> List[torch.Tensor]:
    k = kernel_by_key(key)
    if len(inputs) != len(k.params):
        raise ValueError(f"flashgen::run: program '{k.name}' takes {len(k.params)} inputs; "
                         f"{len(inputs)} were given")
    extent = {}
    for (name, _, dims), t in zip(k.params, inputs):
        if t.dim() != len(dims):
            raise ValueError(f"flashgen::run: input '{name}' has rank {t.dim()}; the program "
                             f"declares {len(dims)} dims [{', '.join(dims)}]")
        for d, s in zip(dims, t.shape):
            extent.setdefault(d, s)
    outs = []
    for name, dt, dims in k.outputs:
        missing = [d for d in dims if d not in extent]
        if missing:
            raise ValueError(f"flashgen::run: output '{name}' has dim '{missing[0]}', which no "
                             "input binds")
        outs.append(inputs[0].new_empty([extent[d] for d in dims], dtype=torch_dtype(dt)))
    return outs
