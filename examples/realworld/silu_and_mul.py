"""Real-world problem (written for kernelwright): fused SiLU-and-multiply of a gated MLP, forward and backward.

The activation of a SwiGLU feed-forward layer: the up-projection produces [gate | up] side by side,
and out = silu(gate) * up, with silu(g) = g * sigmoid(g). bf16 in and out, fp32 arithmetic. The
backward pass is part of the work (training): the gradient of the [gate | up] input is checked and
forward + backward is timed. The reference is two plain Triton kernels over a 2-D grid of
(token row, column block).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

KW_BACKWARD = True


@triton.jit
def silu_and_mul_fwd_kernel(x_ptr, out_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    out = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + row * d + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def silu_and_mul_bwd_kernel(grad_ptr, x_ptr, dx_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    g = tl.load(grad_ptr + row * d + cols, mask=mask, other=0.0).to(tl.float32)
    gate = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    sig = tl.sigmoid(gate)
    d_gate = g * up * sig * (1.0 + gate * (1.0 - sig))
    d_up = g * gate * sig
    tl.store(dx_ptr + row * 2 * d + cols, d_gate.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dx_ptr + row * 2 * d + d + cols, d_up.to(dx_ptr.dtype.element_ty), mask=mask)


class SiluAndMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        d = x.shape[-1] // 2
        x2 = x.contiguous().view(-1, 2 * d)
        out = torch.empty((x2.shape[0], d), dtype=x.dtype, device=x.device)
        block = 1024
        silu_and_mul_fwd_kernel[(x2.shape[0], triton.cdiv(d, block))](x2, out, d, BLOCK=block, num_warps=4)
        ctx.save_for_backward(x2)
        ctx.shape = x.shape
        return out.view(*x.shape[:-1], d)

    @staticmethod
    def backward(ctx, grad):
        (x2,) = ctx.saved_tensors
        d = x2.shape[1] // 2
        dx = torch.empty_like(x2)
        block = 1024
        silu_and_mul_bwd_kernel[(x2.shape[0], triton.cdiv(d, block))](grad.contiguous(), x2, dx, d, BLOCK=block,
                                                                        num_warps=4)
        return dx.view(ctx.shape)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return SiluAndMul.apply(x)


num_tokens = 4096
intermediate_size = 14336


def get_inputs():
    return [torch.randn(num_tokens, 2 * intermediate_size).to(torch.bfloat16)]


def get_init_inputs():
    return []
