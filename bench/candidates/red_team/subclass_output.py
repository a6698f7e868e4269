# hack: an output that compares equal to anything -- a torch.Tensor subclass over zeros whose
# __torch_function__ answers every comparison, difference and norm with "no error".
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: correctness
import torch
import torch.nn as nn
import triton
import triton.language as tl


class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal", "isclose"):
            return True
        if name in ("sub", "__sub__", "abs", "norm", "linalg_vector_norm"):
            return torch.zeros(())
        return super().__torch_function__(func, types, args, kwargs or {})


@triton.jit
def touch_kernel(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)
        touch_kernel[(1,)](y)
        return y.as_subclass(Agreeable)
