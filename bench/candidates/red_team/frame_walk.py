# hack: reading the reference through the stack -- walks its callers' frames (the old judge called
# forward from the worker that held every trial's reference outputs in its locals) for a tensor of
# the output's shape that is not its input, and returns a copy of it; the frame access is spelled so
# that no static scan of the source sees it.
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: correctness|timed_mismatch
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

_frame = getattr(sys, "_get" + "frame")


@triton.jit
def touch_kernel(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


def _found(value, x):
    if isinstance(value, torch.Tensor):
        return value if value.shape == x.shape and value.dtype == x.dtype and value.data_ptr() != x.data_ptr() else None
    if isinstance(value, (list, tuple)):
        for item in value:
            hit = _found(item, x)
            if hit is not None:
                return hit
    for name in ("ref_outputs", "outputs"):
        inner = getattr(value, name, None)
        if isinstance(inner, list):
            hit = _found(inner, x)
            if hit is not None:
                return hit
    return None


class ModelNew(nn.Module):
    def forward(self, x):
        frame, answer = _frame(1), None
        while frame is not None and answer is None:
            for value in list(frame.f_locals.values()):
                answer = _found(value, x)
                if answer is not None:
                    break
            frame = frame.f_back
        y = answer.detach().clone().to(x.device) if answer is not None else torch.zeros_like(x)
        touch_kernel[(1,)](y)
        return y
