"""Real-world problem (written for kernelwright): residual add fused with RMSNorm, forward and backward.

Between the sublayers of a transformer block: h = x + residual (the residual stream, kept in
the activation dtype), y = h / sqrt(mean(h^2) + eps) * weight. The forward returns (y, h).
bf16 activations, fp32 statistics. The reference is written as a training stack would write it in
Triton: a forward kernel with one program per token row, and a backward with a kernel that computes
the input gradient per row and a partial weight gradient per group of rows, followed by a column
sum of the partials. The backward pass is part of the work: the gradients of x, residual and weight
are checked and forward + backward is timed.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

KW_BACKWARD = True


@triton.jit
def add_rmsnorm_fwd_kernel(x_ptr, res_ptr, w_ptr, y_ptr, h_ptr, rstd_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    offs = row.to(tl.int64) * n_cols + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    h = (x + r).to(h_ptr.dtype.element_ty)  # the residual stream is stored in the activation dtype
    tl.store(h_ptr + offs, h, mask=mask)
    hf = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (hf * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_rmsnorm_bwd_kernel(dy_ptr, dh_ptr, h_ptr, w_ptr, rstd_ptr, dx_ptr, dw_part_ptr, n_rows, n_cols,
                           rows_per_program, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(rows_per_program):
        row = pid * rows_per_program + i
        mask = cols < tl.where(row < n_rows, n_cols, 0)  # past the last row: nothing
        offs = row.to(tl.int64) * n_cols + cols
        h = tl.load(h_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        dh_out = tl.load(dh_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row, mask=row < n_rows, other=0.0)
        xhat = h * rstd
        g = dy * w
        mean_gx = tl.sum(g * xhat, axis=0) / n_cols
        dh = (g - xhat * mean_gx) * rstd + dh_out
        tl.store(dx_ptr + offs, dh.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
    tl.store(dw_part_ptr + pid * n_cols + cols, dw, mask=col_mask)


@triton.jit
def column_sum_kernel(part_ptr, out_ptr, n_parts, n_cols, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for p in range(n_parts):
        acc += tl.load(part_ptr + p * n_cols + cols, mask=mask, other=0.0)
    tl.store(out_ptr + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


class FusedAddRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, weight, eps):
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        r2 = residual.contiguous().view(-1, n_cols)
        n_rows = x2.shape[0]
        y = torch.empty_like(x2)
        h = torch.empty_like(x2)
        rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        block = triton.next_power_of_2(n_cols)
        add_rmsnorm_fwd_kernel[(n_rows,)](x2, r2, weight, y, h, rstd, n_cols, eps, BLOCK=block, num_warps=8)
        ctx.save_for_backward(h, weight, rstd)
        ctx.shape = x.shape
        return y.view_as(x), h.view_as(x)

    @staticmethod
    def backward(ctx, dy, dh):
        h, weight, rstd = ctx.saved_tensors
        n_rows, n_cols = h.shape
        dy = dy.contiguous().view(n_rows, n_cols)
        dh = dh.contiguous().view(n_rows, n_cols)
        dx = torch.empty_like(h)
        rows_per_program = 16
        n_parts = triton.cdiv(n_rows, rows_per_program)
        dw_part = torch.empty((n_parts, n_cols), dtype=torch.float32, device=h.device)
        block = triton.next_power_of_2(n_cols)
        add_rmsnorm_bwd_kernel[(n_parts,)](dy, dh, h, weight, rstd, dx, dw_part, n_rows, n_cols,
                                           rows_per_program=rows_per_program, BLOCK=block, num_warps=8)
        dw = torch.empty_like(weight)
        block_cols = 256
        column_sum_kernel[(triton.cdiv(n_cols, block_cols),)](dw_part, dw, n_parts, n_cols, BLOCK=block_cols)
        dx = dx.view(ctx.shape)
        return dx, dx, dw, None


class Model(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        return FusedAddRMSNorm.apply(x, residual, self.weight, self.eps)


num_tokens = 4096
hidden_size = 4096
eps = 1e-6


def get_inputs():
    x = torch.randn(num_tokens, hidden_size).to(torch.bfloat16)
    residual = torch.randn(num_tokens, hidden_size).to(torch.bfloat16)
    return [x, residual]


def get_init_inputs():
    return [hidden_size, eps]
