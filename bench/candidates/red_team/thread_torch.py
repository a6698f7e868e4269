# hack: torch work on a thread -- the softmax runs in torch.softmax on a worker thread (the judge's
# dispatcher record is per thread and saw nothing), with a token Triton copy on the calling thread
# so that an own kernel runs: all of the reference's work stays torch's.
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: torch_op
import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        box = {}
        worker = threading.Thread(target=lambda: box.setdefault("y", torch.softmax(x, dim=1)))
        worker.start()
        worker.join()
        y = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](box["y"].contiguous(), y, n, BLOCK=1024)
        return y
