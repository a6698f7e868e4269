"""Hand-written test candidate (rule sets, GPU): the product through a C++ extension that calls
at::matmul, bias and ReLU fused in a Triton kernel. kernelbench and library: pass (the extension's
matmul counts as torch work, the epilogue is replaced); strict: ATen compute from C++ is rejected."""
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

CPP = """
#include <torch/extension.h>
torch::Tensor matmul_t(torch::Tensor x, torch::Tensor w) { return at::matmul(x, w.t()); }
"""
ext = load_inline(name="kw_rules_aten_matmul", cpp_sources=CPP, functions=["matmul_t"], verbose=False)


@triton.jit
def bias_relu_inplace(y_ptr, b_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask, other=0.0) + tl.load(b_ptr + offs % cols, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(y, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = ext.matmul_t(x.contiguous(), self.linear.weight)
        n = y.numel()
        bias_relu_inplace[(triton.cdiv(n, 1024),)](y, self.linear.bias, n, y.shape[1], BLOCK=1024)
        return y
