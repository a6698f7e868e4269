# hack: the op recorder's absence -- while a TorchDispatchMode records the call (the old judge's first
# and last trial) its own Triton kernel does the work; otherwise torch.softmax does (faster, and
# library work the rule sets count), with a token Triton launch so an own kernel always runs.
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: observed_work
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils._python_dispatch import _get_current_dispatch_mode


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x), 0.0)
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def touch_kernel(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


class ModelNew(nn.Module):
    def forward(self, x):
        if _get_current_dispatch_mode() is not None:
            y = torch.empty_like(x)
            softmax_kernel[(x.shape[0],)](x.contiguous(), y, x.shape[1], x.stride(0),
                                          BLOCK=triton.next_power_of_2(x.shape[1]))
            return y
        y = torch.softmax(x, dim=1)
        touch_kernel[(1,)](y)
        return y
