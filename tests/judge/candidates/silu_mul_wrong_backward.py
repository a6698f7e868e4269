"""Test candidate (hand-written) for examples/realworld/silu_and_mul.py: a correct forward kernel and a
backward kernel that forgets the derivative of sigmoid (d gate = g * up * sigmoid(gate)). The
gradient check must fail it; the forward alone would pass."""
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


@triton.jit
def bwd_kernel(grad_ptr, x_ptr, dx_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    g = tl.load(grad_ptr + row * d + cols, mask=mask, other=0.0).to(tl.float32)
    gate = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    sig = tl.sigmoid(gate)
    tl.store(dx_ptr + row * 2 * d + cols, (g * up * sig).to(dx_ptr.dtype.element_ty), mask=mask)  # wrong
    tl.store(dx_ptr + row * 2 * d + d + cols, (g * gate * sig).to(dx_ptr.dtype.element_ty), mask=mask)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        d = x.shape[-1] // 2
        out = torch.empty((x.shape[0], d), dtype=x.dtype, device=x.device)
        fwd_kernel[(x.shape[0], triton.cdiv(d, 64))](x, out, d, BLOCK=64)
        ctx.save_for_backward(x)
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        d = x.shape[-1] // 2
        dx = torch.empty_like(x)
        bwd_kernel[(x.shape[0], triton.cdiv(d, 64))](grad.contiguous(), x, dx, d, BLOCK=64)
        return dx


class ModelNew(nn.Module):
    def forward(self, x):
        return Fn.apply(x.contiguous())
