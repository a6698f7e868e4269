"""Real-world problem (written for kernelwright): MoE token permutation with the expert offsets.

Before the grouped expert GEMMs, a mixture-of-experts layer copies every (token, chosen expert)
pair's hidden state into one row of a buffer grouped by expert. Rows of one expert keep the order
of their (token, slot) pairs (token-major), so the result is deterministic. Returns
- permuted hidden states [tokens * k, hidden] (bf16),
- expert offsets int32 [experts + 1]: expert e owns rows offsets[e] .. offsets[e + 1],
- source index int32 [tokens * k]: the flat (token * k + slot) pair each row came from,
- destination int32 [tokens, k]: the row each (token, slot) pair went to (what un-permuting reads).
The reference is four plain Triton kernels: count rows per expert, an exclusive scan of the
counts, the rank of each pair within its expert, and the row copy.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def count_per_expert_kernel(ids_ptr, counts_ptr, n_pairs, BLOCK: tl.constexpr):
    expert = tl.program_id(0)
    total = 0
    for start in range(0, n_pairs, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        ids = tl.load(ids_ptr + offs, mask=offs < n_pairs, other=-1)
        total += tl.sum((ids == expert).to(tl.int32), axis=0)
    tl.store(counts_ptr + expert, total)


@triton.jit
def exclusive_scan_kernel(counts_ptr, offsets_ptr, n_experts, BLOCK_E: tl.constexpr):
    experts = tl.arange(0, BLOCK_E)
    counts = tl.load(counts_ptr + experts, mask=experts < n_experts, other=0)
    inclusive = tl.cumsum(counts, axis=0)
    tl.store(offsets_ptr + experts + 1, inclusive, mask=experts < n_experts)
    tl.store(offsets_ptr + experts, inclusive - counts, mask=experts == 0)


@triton.jit
def assign_rows_kernel(ids_ptr, offsets_ptr, dest_ptr, src_ptr, n_pairs, BLOCK: tl.constexpr):
    expert = tl.program_id(0)
    next_row = tl.load(offsets_ptr + expert)
    for start in range(0, n_pairs, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        ids = tl.load(ids_ptr + offs, mask=offs < n_pairs, other=-1)
        mine = (ids == expert).to(tl.int32)
        rows = next_row + tl.cumsum(mine, axis=0) - 1
        tl.store(dest_ptr + offs, rows, mask=mine == 1)
        tl.store(src_ptr + rows, offs, mask=mine == 1)
        next_row += tl.sum(mine, axis=0)


@triton.jit
def gather_rows_kernel(x_ptr, src_ptr, out_ptr, top_k, hidden, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    token = tl.load(src_ptr + row) // top_k
    for start in range(0, hidden, BLOCK_H):
        cols = start + tl.arange(0, BLOCK_H)
        values = tl.load(x_ptr + token.to(tl.int64) * hidden + cols, mask=cols < hidden)
        tl.store(out_ptr + row.to(tl.int64) * hidden + cols, values, mask=cols < hidden)


class Model(nn.Module):
    def __init__(self, num_experts):
        super().__init__()
        self.num_experts = num_experts

    def forward(self, hidden_states: torch.Tensor, topk_ids: torch.Tensor):
        n_tokens, hidden = hidden_states.shape
        top_k = topk_ids.shape[1]
        n_pairs = n_tokens * top_k
        device = hidden_states.device
        ids = topk_ids.contiguous()
        counts = torch.empty(self.num_experts, dtype=torch.int32, device=device)
        offsets = torch.empty(self.num_experts + 1, dtype=torch.int32, device=device)
        dest = torch.empty((n_tokens, top_k), dtype=torch.int32, device=device)
        src = torch.empty(n_pairs, dtype=torch.int32, device=device)
        permuted = torch.empty((n_pairs, hidden), dtype=hidden_states.dtype, device=device)
        count_per_expert_kernel[(self.num_experts,)](ids, counts, n_pairs, BLOCK=1024)
        exclusive_scan_kernel[(1,)](counts, offsets, self.num_experts,
                                    BLOCK_E=triton.next_power_of_2(self.num_experts))
        assign_rows_kernel[(self.num_experts,)](ids, offsets, dest, src, n_pairs, BLOCK=1024)
        gather_rows_kernel[(n_pairs,)](hidden_states.contiguous(), src, permuted, top_k, hidden, BLOCK_H=1024)
        return permuted, offsets, src, dest


num_tokens = 4096
hidden_size = 2048
num_experts = 64
top_k = 6


def get_inputs():
    hidden_states = torch.randn(num_tokens, hidden_size).to(torch.bfloat16)
    # k distinct experts per token, as a router's top-k gives them
    topk_ids = torch.rand(num_tokens, num_experts).argsort(dim=1)[:, :top_k].to(torch.int32)
    return [hidden_states, topk_ids]


def get_init_inputs():
    return [num_experts]
