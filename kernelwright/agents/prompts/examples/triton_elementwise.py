import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    # 64-bit offsets: program_id * BLOCK_SIZE overflows int32 on tensors above 2**31 elements
    pid = tl.program_id(axis=0).to(tl.int64)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements  # the last block is partial
    # compute in float32 (float64 stays float64), store in the output's own dtype
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    if x.dtype != tl.float64:
        x = x.to(tl.float32)
        y = y.to(tl.float32)
    tl.store(out_ptr + offsets, (x + alpha * y).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    """out = x + alpha * y in one pass over memory (the reference reads and writes twice)."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()  # the kernel indexes flat memory; a no-op when already contiguous
        y = y.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        if n_elements == 0:
            return out
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        scaled_add_kernel[grid](x, y, out, self.alpha, n_elements, BLOCK_SIZE=1024)
        return out
