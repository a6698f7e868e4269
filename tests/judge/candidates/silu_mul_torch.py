"""Test candidate (hand-written) for examples/realworld/silu_and_mul.py: PyTorch ops instead of kernels.
Its values and gradients are right, but the reference's work is its own Triton kernels: the judge must
flag the PyTorch ops (torch_op)."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        d = x.shape[-1] // 2
        return (F.silu(x[:, :d].float()) * x[:, d:].float()).to(x.dtype)
