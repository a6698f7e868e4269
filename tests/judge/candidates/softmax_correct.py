"""Hand-written test candidate for the judge tests: a correct Triton softmax over dim=1
(level1/23_Softmax), one program per row, looping over column blocks."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    row_max = -float("inf")
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=start + cols < n_cols, other=-float("inf"))
        row_max = tl.maximum(row_max, tl.max(x, axis=0))
    total = 0.0
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=start + cols < n_cols, other=-float("inf"))
        total += tl.sum(tl.exp(x - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=mask, other=-float("inf"))
        tl.store(y_ptr + row * n_cols + start + cols, tl.exp(x - row_max) / total, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        softmax_kernel[(rows,)](x, y, cols, BLOCK=min(triton.next_power_of_2(cols), 1024))
        return y
