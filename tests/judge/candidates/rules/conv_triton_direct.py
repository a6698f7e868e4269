"""Hand-written test candidate (rule sets): convolution, ReLU and bias in one direct-convolution
Triton kernel (one output element per lane, the C_in*K*K products summed in a loop). Every compute op
is the candidate's own: passes under kernelbench, library and strict."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv_relu_bias_kernel(x_ptr, w_ptr, cb_ptr, b_ptr, out_ptr, n, C_IN, H, W, C_OUT, OH, OW,
                          K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ow = offs % OW
    oh = (offs // OW) % OH
    co = (offs // (OW * OH)) % C_OUT
    batch = offs // (OW * OH * C_OUT)
    acc = tl.load(cb_ptr + co, mask=mask, other=0.0)
    for ci in range(0, C_IN):
        for kh in range(0, K):
            for kw in range(0, K):
                x = tl.load(x_ptr + ((batch * C_IN + ci) * H + oh + kh) * W + ow + kw, mask=mask, other=0.0)
                w = tl.load(w_ptr + ((co * C_IN + ci) * K + kh) * K + kw, mask=mask, other=0.0)
                acc += x * w
    b = tl.load(b_ptr + co, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(acc, 0.0) + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous()
        batch, c_in, h, w = x.shape
        c_out, k = self.conv.out_channels, self.conv.kernel_size[0]
        out = torch.empty(batch, c_out, h - k + 1, w - k + 1, device=x.device, dtype=x.dtype)
        n = out.numel()
        conv_relu_bias_kernel[(triton.cdiv(n, 256),)](x, self.conv.weight, self.conv.bias, self.bias, out, n,
                                                      c_in, h, w, c_out, h - k + 1, w - k + 1, K=k, BLOCK=256)
        return out
