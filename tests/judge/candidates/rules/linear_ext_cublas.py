"""Hand-written test candidate (rule sets, GPU): the product through a C++ extension that calls
cublasSgemm directly (its own handle, on torch's current stream), bias and ReLU fused in a Triton
kernel. kernelbench and library: pass (a vendor call from C++ is the candidate's code); strict: the
extension links cuBLAS and calls cublasSgemm_v2, rejected."""
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

static cublasHandle_t handle() {
  static cublasHandle_t h = nullptr;
  if (h == nullptr) TORCH_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  return h;
}

// y = x @ w^T for row-major x (M x K) and w (N x K): in cuBLAS's column-major terms y^T = w x^T
torch::Tensor sgemm_nt(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kFloat, "float32 expected");
  x = x.contiguous();
  w = w.contiguous();
  const int m = (int)x.size(0), k = (int)x.size(1), n = (int)w.size(0);
  auto y = torch::empty({m, n}, x.options());
  cublasHandle_t h = handle();
  TORCH_CHECK(cublasSetStream(h, at::cuda::getCurrentCUDAStream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
  const float alpha = 1.f, beta = 0.f;
  auto status = cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w.data_ptr<float>(), k,
                            x.data_ptr<float>(), k, &beta, y.data_ptr<float>(), n);
  TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed with status ", (int)status);
  return y;
}
"""
ext = load_inline(name="kw_rules_cublas_sgemm", cpp_sources=CPP, functions=["sgemm_nt"], with_cuda=True,
                  extra_ldflags=["-lcublas"], verbose=False)


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
        y = ext.sgemm_nt(x, self.linear.weight)
        n = y.numel()
        bias_relu_inplace[(triton.cdiv(n, 1024),)](y, self.linear.bias, n, y.shape[1], BLOCK=1024)
        return y
