"""Real-world problem (written for kernelwright): rotary position embedding applied in place to q and k.

The attention input of an LLM serving engine: for every token, rotate each head of the query and
the key by its position's angles (the "neox" layout: the first and second half of a head are the
pair that rotates). The cos/sin table is built once in the constructor, as engines do. The query
and key are updated in place and returned: a candidate must write the same values into the same
tensors (the judge compares the inputs after the call) and may write no other input.
The reference is one Triton kernel with one program per token that handles all its heads.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rotary_inplace_kernel(pos_ptr, q_ptr, k_ptr, cos_sin_ptr, q_stride, k_stride, n_q_heads, n_k_heads,
                          HEAD_SIZE: tl.constexpr, BLOCK_HEADS: tl.constexpr):
    token = tl.program_id(0)
    half = HEAD_SIZE // 2
    pos = tl.load(pos_ptr + token)
    dims = tl.arange(0, HEAD_SIZE // 2)
    cos = tl.load(cos_sin_ptr + pos * HEAD_SIZE + dims)[None, :]
    sin = tl.load(cos_sin_ptr + pos * HEAD_SIZE + half + dims)[None, :]
    heads = tl.arange(0, BLOCK_HEADS)[:, None]
    # query heads
    mask = (heads < n_q_heads) & (dims[None, :] < half)
    first = q_ptr + token.to(tl.int64) * q_stride + heads * HEAD_SIZE + dims[None, :]
    x1 = tl.load(first, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(first + half, mask=mask, other=0.0).to(tl.float32)
    tl.store(first, (x1 * cos - x2 * sin).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(first + half, (x2 * cos + x1 * sin).to(q_ptr.dtype.element_ty), mask=mask)
    # key heads
    mask = (heads < n_k_heads) & (dims[None, :] < half)
    first = k_ptr + token.to(tl.int64) * k_stride + heads * HEAD_SIZE + dims[None, :]
    x1 = tl.load(first, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(first + half, mask=mask, other=0.0).to(tl.float32)
    tl.store(first, (x1 * cos - x2 * sin).to(k_ptr.dtype.element_ty), mask=mask)
    tl.store(first + half, (x2 * cos + x1 * sin).to(k_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def __init__(self, head_size, max_position, base):
        super().__init__()
        self.head_size = head_size
        inv_freq = 1.0 / (base ** (torch.arange(0, head_size, 2, dtype=torch.float32) / head_size))
        angles = torch.outer(torch.arange(max_position, dtype=torch.float32), inv_freq)
        self.register_buffer("cos_sin_cache", torch.cat([angles.cos(), angles.sin()], dim=-1), persistent=False)

    def forward(self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor):
        n_tokens = positions.shape[0]
        n_q_heads = query.shape[-1] // self.head_size
        n_k_heads = key.shape[-1] // self.head_size
        block_heads = triton.next_power_of_2(max(n_q_heads, n_k_heads))
        rotary_inplace_kernel[(n_tokens,)](positions, query, key, self.cos_sin_cache, query.stride(0), key.stride(0),
                                           n_q_heads, n_k_heads, HEAD_SIZE=self.head_size, BLOCK_HEADS=block_heads,
                                           num_warps=4)
        return query, key


num_tokens = 4096
num_heads = 32
num_kv_heads = 8
head_size = 128
max_position = 8192
rope_base = 10000.0


def get_inputs():
    positions = torch.randint(0, max_position, (num_tokens,))
    query = torch.randn(num_tokens, num_heads * head_size).to(torch.bfloat16)
    key = torch.randn(num_tokens, num_kv_heads * head_size).to(torch.bfloat16)
    return [positions, query, key]


def get_init_inputs():
    return [head_size, max_position, rope_base]
