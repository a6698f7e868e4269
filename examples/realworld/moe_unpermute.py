"""Real-world problem (written for kernelwright): MoE un-permutation with the routing weights, forward and backward.

After the expert GEMMs, every token sums the outputs of its k experts, weighted by its router
weights: out[t] = sum_k weights[t, k] * expert_out[dest[t, k]], where dest[t, k] is the row the
permutation sent the pair (t, k) to. bf16 rows, fp32 weights and accumulation. The backward pass
is part of the work (MoE training): the gradients of the expert outputs (scattered back to their
rows) and of the routing weights (a dot product per pair) are checked, and forward + backward is
timed. The reference is two plain Triton kernels, one program per token each.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

KW_BACKWARD = True
KW_GRAD_INPUTS = (0, 1)  # expert_out and weights; dest is an index


@triton.jit
def unpermute_fwd_kernel(expert_out_ptr, weights_ptr, dest_ptr, out_ptr, hidden, TOP_K: tl.constexpr,
                         BLOCK_H: tl.constexpr):
    token = tl.program_id(0)
    for start in range(0, hidden, BLOCK_H):
        cols = start + tl.arange(0, BLOCK_H)
        mask = cols < hidden
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for k in range(TOP_K):
            row = tl.load(dest_ptr + token * TOP_K + k).to(tl.int64)
            w = tl.load(weights_ptr + token * TOP_K + k)
            acc += w * tl.load(expert_out_ptr + row * hidden + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + token.to(tl.int64) * hidden + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def unpermute_bwd_kernel(grad_out_ptr, expert_out_ptr, weights_ptr, dest_ptr, grad_expert_ptr, grad_weights_ptr,
                         hidden, TOP_K: tl.constexpr, BLOCK_H: tl.constexpr):
    token = tl.program_id(0)
    for k in range(TOP_K):
        row = tl.load(dest_ptr + token * TOP_K + k).to(tl.int64)
        w = tl.load(weights_ptr + token * TOP_K + k)
        dot = tl.zeros([BLOCK_H], dtype=tl.float32)
        for start in range(0, hidden, BLOCK_H):
            cols = start + tl.arange(0, BLOCK_H)
            mask = cols < hidden
            g = tl.load(grad_out_ptr + token.to(tl.int64) * hidden + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(expert_out_ptr + row * hidden + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(grad_expert_ptr + row * hidden + cols, (w * g).to(grad_expert_ptr.dtype.element_ty), mask=mask)
            dot += g * x
        tl.store(grad_weights_ptr + token * TOP_K + k, tl.sum(dot, axis=0))


class Unpermute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, expert_out, weights, dest):
        n_tokens, top_k = dest.shape
        hidden = expert_out.shape[1]
        expert_out, weights, dest = expert_out.contiguous(), weights.contiguous(), dest.contiguous()
        out = torch.empty((n_tokens, hidden), dtype=expert_out.dtype, device=expert_out.device)
        unpermute_fwd_kernel[(n_tokens,)](expert_out, weights, dest, out, hidden, TOP_K=top_k, BLOCK_H=1024)
        ctx.save_for_backward(expert_out, weights, dest)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        expert_out, weights, dest = ctx.saved_tensors
        n_tokens, top_k = dest.shape
        hidden = expert_out.shape[1]
        grad_expert = torch.empty_like(expert_out)  # every row is some pair's destination
        grad_weights = torch.empty_like(weights)
        unpermute_bwd_kernel[(n_tokens,)](grad_out.contiguous(), expert_out, weights, dest, grad_expert, grad_weights,
                                          hidden, TOP_K=top_k, BLOCK_H=1024)
        return grad_expert, grad_weights, None


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, expert_out: torch.Tensor, weights: torch.Tensor, dest: torch.Tensor):
        return Unpermute.apply(expert_out, weights, dest)


num_tokens = 4096
hidden_size = 2048
top_k = 6


def get_inputs():
    expert_out = torch.randn(num_tokens * top_k, hidden_size).to(torch.bfloat16)
    weights = torch.rand(num_tokens, top_k)
    weights = weights / weights.sum(dim=1, keepdim=True)
    dest = torch.randperm(num_tokens * top_k).view(num_tokens, top_k).to(torch.int32)  # a permutation's rows
    return [expert_out, weights, dest]


def get_init_inputs():
    return []
