# hack: call counting -- honest for the first calls (the old judge's trials and refill came first), then
# the previous output for every later call: the timed loop (the old judge timed trial 0's inputs, so
# the stale answer was right) costs nothing.
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: timed_mismatch|correctness
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
    HONEST_CALLS = 7  # trials + the refill + one to spare

    def __init__(self):
        super().__init__()
        self.calls, self.last = 0, None

    def forward(self, x):
        self.calls += 1
        if self.calls > self.HONEST_CALLS and self.last is not None:
            return self.last
        self.last = softmax(x)
        return self.last
