# legit: two kernels, the second working in place on the first one's output -- pass one writes
# exp(x - max) and each row's sum, pass two divides the output by its row's sum where it lies.
# problem: examples/problems/row_softmax.py
# expect: pass
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def exp_kernel(x_ptr, y_ptr, sums_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.where(mask, tl.exp(x - tl.max(x, axis=0)), 0.0)
    tl.store(y_ptr + row * stride + cols, e, mask=mask)
    tl.store(sums_ptr + row, tl.sum(e, axis=0))


@triton.jit
def divide_in_place(y_ptr, sums_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * stride + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, y / tl.load(sums_ptr + row), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        sums = torch.empty(rows, device=x.device, dtype=torch.float32)
        block = triton.next_power_of_2(cols)
        exp_kernel[(rows,)](x, y, sums, cols, x.stride(0), BLOCK=block)
        divide_in_place[(rows,)](y, sums, cols, y.stride(0), BLOCK=block)
        return y
