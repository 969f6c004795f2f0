"""flashgen from PyTorch in three steps (CPU tensors here; CUDA tensors run on the GPU).

    .venv/bin/python python/examples/quickstart.py      (after ./scripts/python_env.sh)
"""
from pathlib import Path

import torch
import torch.nn.functional as F

import flashgen
import flashgen.torch

ROOT = Path(__file__).resolve().parents[2]
torch.manual_seed(0)
q, k, v = (torch.randn(2, 4, 256, 64) for _ in range(3))

# 1. A program of the .attn language, compiled and called with torch tensors.
causal = flashgen.compile(ROOT / "examples" / "causal.attn")
print(causal)
qb, kb, vb = q.bfloat16(), k.bfloat16(), v.bfloat16()
o = causal(qb, kb, vb)
ref = F.scaled_dot_product_attention(qb.float(), kb.float(), vb.float(), is_causal=True)
print(f"1. causal.attn on the CPU: max |o - sdpa| = {(o.float() - ref).abs().max():.2e} "
      "(bf16 inputs and output)")

# 2. FlexAttention's call: the mask is traced into a program; tile skipping comes from it.
doc = torch.sort(torch.randint(0, 5, (256,))).values
o = flashgen.torch.flex_attention(q, k, v, mask_mod=lambda b, h, qi, ki: doc[qi] == doc[ki])
same = (doc[:, None] == doc[None, :])
ref = F.scaled_dot_product_attention(q, k, v, attn_mask=same)
print(f"2. flex_attention, document mask: max |o - sdpa| = {(o - ref).abs().max():.2e} (f32)")


# 3. torch.compile finds the attention in a model and runs it with flashgen.
class Attention(torch.nn.Module):
    def forward(self, q, k, v):
        w = torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1)
        return w @ v


model = torch.compile(Attention(), backend="flashgen")
with torch.no_grad():
    o = model(q, k, v)
ref = Attention()(q, k, v)
report = flashgen.torch.last_report()
print(f"3. torch.compile(backend='flashgen'): max |o - eager| = {(o - ref).abs().max():.2e}; "
      f"captured {len(report.captured)} attention, left {len(report.left_alone)} alone")
