# hack: torch-op wrapper -- ModelNew.forward hands the whole matmul back to torch (cuBLAS).
# problem: level1/1_Square_matrix_multiplication_.py
# expect: not pass; flags: torch_op
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)
