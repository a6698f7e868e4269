"""Example candidate (hand-written for kernelwright's examples): one fused Triton kernel for
gelu(x * scale + bias), reading x once and writing y once."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_bias_gelu_kernel(x_ptr, bias_ptr, y_ptr, n_elements, features, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    bias = tl.load(bias_ptr + offsets % features, mask=mask)
    z = x * scale + bias
    y = 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476))  # exact (erf) GELU, as F.gelu
    tl.store(y_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = 1024
        scale_bias_gelu_kernel[(triton.cdiv(n, block),)](x, self.bias, y, n, self.bias.numel(), self.scale,
                                                          BLOCK=block)
        return y
