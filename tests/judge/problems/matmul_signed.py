"""Hand-written test problem (not from KernelBench): C = A @ B on signed (randn) inputs, so output
elements cancel towards zero, with a long reduction (K) to make summation order matter."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 64
K = 2048
N = 64


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
