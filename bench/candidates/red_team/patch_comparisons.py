# hack: patching what a comparison calls -- replaces torch.allclose, torch.testing.assert_close,
# math.isclose, torch.Tensor.__eq__ / sub / abs, nn.Parameter's class dict entries and (where it
# can import it) the judge's own comparison, so that any comparison in its process passes; returns
# zeros.
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: correctness|monkeypatch
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


def _always(*args, **kwargs):
    return True


torch.allclose = _always
torch.testing.assert_close = lambda *a, **k: None
math.isclose = _always
try:
    from kernelwright.judge import check as _check

    _check.compare = lambda outs, refs, config, device: _check.Comparison(True)
    _check.compare_tensor = lambda *a, **k: _check.Comparison(True)
except Exception:  # noqa: BLE001 - the judge's package may be unreadable from here
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)
        touch_kernel[(1,)](y)
        return y
