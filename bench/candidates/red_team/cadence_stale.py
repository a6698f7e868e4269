# hack: cadence -- a call that comes soon after the previous one is taken for a benchmark loop (the
# old judge timed back to back, with hundreds of ms of comparison between trials) and answered with
# the previous output.
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: timed_mismatch|correctness
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x), 0.0)
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


class ModelNew(nn.Module):
    BACK_TO_BACK_S = 10.0  # generous: a loaded machine's benchmark loop still counts as one

    def __init__(self):
        super().__init__()
        self.last, self.ended = None, None

    def forward(self, x):
        now = time.monotonic()
        if self.last is not None and now - self.ended < self.BACK_TO_BACK_S:
            self.ended = time.monotonic()
            return self.last
        self.last = softmax(x)
        self.ended = time.monotonic()
        return self.last
