# hack: a lazy output -- forward returns an empty tensor at once and a thread fills it a moment
# later, so the call ends before the work is done (a timer that stops when forward returns, and
# compares after a device-wide synchronize, sees a fast and correct call).
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: correctness|side_stream|uninitialized_output|timed_mismatch
import threading
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


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)

        def later():
            time.sleep(0.02)
            softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))

        threading.Thread(target=later, daemon=True).start()
        return y
