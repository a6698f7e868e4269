"""Example problem (written for kernelwright's examples): a fused elementwise chain.

y = gelu(x * scale + bias), with a learned per-feature bias. Three elementwise ops that eager
PyTorch runs as three kernels (three round trips through memory); one fused kernel does it in one.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x * self.scale + self.bias)


batch_size = 64
features = 512
scale = 1.5


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, scale]
