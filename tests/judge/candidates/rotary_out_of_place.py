"""Test candidate (hand-written) for examples/realworld/rotary_inplace.py: it returns correctly rotated
copies of q and k but leaves the inputs as they were. The reference updates them in place, so the judge
must fail it on the inputs it should have written."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rotate_copy_kernel(pos_ptr, x_ptr, y_ptr, cos_sin_ptr, n_heads, HEAD: tl.constexpr, BLOCK_H: tl.constexpr):
    token = tl.program_id(0)
    half = HEAD // 2
    pos = tl.load(pos_ptr + token)
    dims = tl.arange(0, HEAD // 2)[None, :]
    heads = tl.arange(0, BLOCK_H)[:, None]
    mask = (heads < n_heads) & (dims < half)
    cos = tl.load(cos_sin_ptr + pos * HEAD + dims)
    sin = tl.load(cos_sin_ptr + pos * HEAD + half + dims)
    base = token * n_heads * HEAD + heads * HEAD + dims
    x1 = tl.load(x_ptr + base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + half, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + base, (x1 * cos - x2 * sin).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + base + half, (x2 * cos + x1 * sin).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, head_size, max_position, base):
        super().__init__()
        self.head_size = head_size
        inv_freq = 1.0 / (base ** (torch.arange(0, head_size, 2, dtype=torch.float32) / head_size))
        angles = torch.outer(torch.arange(max_position, dtype=torch.float32), inv_freq)
        self.register_buffer("cos_sin_cache", torch.cat([angles.cos(), angles.sin()], dim=-1), persistent=False)

    def _rotated(self, positions, x):
        heads = x.shape[-1] // self.head_size
        y = torch.empty_like(x)
        rotate_copy_kernel[(x.shape[0],)](positions, x, y, self.cos_sin_cache, heads, HEAD=self.head_size,
                                          BLOCK_H=triton.next_power_of_2(heads))
        return y

    def forward(self, positions, query, key):
        return self._rotated(positions, query.contiguous()), self._rotated(positions, key.contiguous())
