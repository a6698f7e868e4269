"""Example candidate (hand-written for kernelwright's examples): a row-wise softmax in Triton.

One program per row. An online pass keeps the running maximum and the rescaled sum of
exponentials over column blocks, so any row length works and large inputs cannot overflow; a
second pass writes the normalised values.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    cols = tl.arange(0, BLOCK)
    running_max = tl.full([BLOCK], -float("inf"), tl.float32)
    running_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(running_max, x)
        # lanes that have seen only -inf keep a zero sum (avoid inf - inf = nan)
        rescale = tl.where(new_max == -float("inf"), 0.0, tl.exp(running_max - new_max))
        running_sum = running_sum * rescale + tl.where(mask, tl.exp(x - new_max), 0.0)
        running_max = new_max
    row_max = tl.max(running_max, axis=0)
    lane_scale = tl.where(running_max == -float("inf"), 0.0, tl.exp(running_max - row_max))
    row_sum = tl.sum(running_sum * lane_scale, axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + start + cols, tl.exp(x - row_max) / row_sum, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        block = min(triton.next_power_of_2(cols), 4096)
        softmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=block)
        return y
