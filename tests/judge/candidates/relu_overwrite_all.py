"""Hand-written test candidate for the judge tests: a correct ReLU that, on every call, first writes
zeros into every tensor it can find in the process (its inputs and, through gc, the judge's
reference outputs) -- an attack on references shared between candidates (judge/refstore.py)."""
import gc

import torch
import torch.nn as nn


def _scribble():
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.Tensor) and obj.is_floating_point() and obj.numel() > 0:
                obj.data.zero_()
        except Exception:  # noqa: BLE001 - some tensors refuse (inference tensors, views)
            pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        _scribble()
        return y
