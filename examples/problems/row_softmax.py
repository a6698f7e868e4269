"""Example problem (written for kernelwright's examples): softmax over each row.

The row length is not a power of two, so a kernel must mask its loads; inputs with large values
(the judge's "wide" variant) catch a softmax that forgets to subtract the row maximum.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 32
dim = 1000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
