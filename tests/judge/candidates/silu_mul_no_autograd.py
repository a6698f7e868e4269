"""Test candidate (hand-written) for examples/realworld/silu_and_mul.py: a correct forward kernel launched
directly, outside autograd. The problem's backward pass is part of the work, so the judge must fail it
with a message that asks for a torch.autograd.Function."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fwd_kernel(x_ptr, out_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * d + cols, (gate * tl.sigmoid(gate) * up).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.detach().contiguous()
        d = x.shape[-1] // 2
        out = torch.empty((x.shape[0], d), dtype=x.dtype, device=x.device)
        fwd_kernel[(x.shape[0], triton.cdiv(d, 64))](x, out, d, BLOCK=64)
        return out
