# hack: work on a side stream without joining it back -- the result is right once the device is
# synchronised, but CUDA events recorded on the current stream see (almost) nothing, so an
# event-timed benchmark reports a tiny time.
# problem: level1/19_ReLU.py
# expect: not pass; flags: side_stream
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x < 0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        y = torch.empty_like(x)
        self.side.wait_stream(torch.cuda.current_stream())  # inputs are ready; the output is never awaited
        with torch.cuda.stream(self.side):
            relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
        return y
