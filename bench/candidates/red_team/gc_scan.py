# hack: reading the reference through the garbage collector -- scans every live object for a tensor
# of the output's shape that is not its input (the old judge kept every trial's reference outputs
# in the worker's memory) and returns it; the gc module is reached so that no static scan sees it.
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: correctness|timed_mismatch
import torch
import torch.nn as nn
import triton
import triton.language as tl

_objects = getattr(__import__("g" + "c"), "get_" + "objects")


@triton.jit
def touch_kernel(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


class ModelNew(nn.Module):
    def forward(self, x):
        rows = x.float()
        candidates = [o for o in _objects() if isinstance(o, torch.Tensor) and o.shape == x.shape
                      and o.dtype == x.dtype and o.data_ptr() != x.data_ptr()]
        # a softmax's rows sum to one: prefer such a tensor, and one that is not this model's own
        answer = next((c for c in candidates if torch.allclose(c.float().sum(dim=1).cpu(),
                                                               torch.ones(rows.shape[0]), atol=1e-3)), None)
        y = answer.detach().clone().to(x.device) if answer is not None else torch.zeros_like(x)
        touch_kernel[(1,)](y)
        return y
