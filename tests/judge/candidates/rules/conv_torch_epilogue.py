"""Hand-written test candidate (rule sets): the convolution stays in torch (cuDNN on a GPU), ReLU and
the per-channel bias run fused in one Triton kernel. kernelbench: pass (conv 1 of 1, elementwise
0 of 2); library and strict: torch compute in forward's Python."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def relu_bias_kernel(y_ptr, bias_ptr, out_ptr, n, hw, channels, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    channel = (offs // hw) % channels
    b = tl.load(bias_ptr + channel, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(y, 0.0) + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        relu_bias_kernel[(triton.cdiv(n, 1024),)](y, self.bias, out, n, y.shape[2] * y.shape[3], y.shape[1],
                                                  BLOCK=1024)
        return out
