"""Real-world problem (written for kernelwright): top-k softmax gating of a mixture-of-experts router.

For every token, the router's logits over the experts become a softmax, the k largest
probabilities are chosen (largest first; equal values: the lower expert index first) and
renormalised to sum to one. Returns (weights float32 [tokens, k], expert ids int32 [tokens, k]);
the ids must match exactly. The reference is one Triton kernel, one program per token: softmax over
the row, then k rounds of arg-max.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def topk_softmax_kernel(logits_ptr, weights_ptr, ids_ptr, n_experts, TOP_K: tl.constexpr, RENORMALIZE: tl.constexpr,
                        BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    token = tl.program_id(0)
    experts = tl.arange(0, BLOCK_E)
    mask = experts < n_experts
    logits = tl.load(logits_ptr + token * n_experts + experts, mask=mask, other=-float("inf")).to(tl.float32)
    probs = tl.exp(logits - tl.max(logits, axis=0))
    probs = probs / tl.sum(probs, axis=0)
    probs = tl.where(mask, probs, -1.0)
    slots = tl.arange(0, BLOCK_K)
    chosen_w = tl.zeros([BLOCK_K], dtype=tl.float32)
    chosen_id = tl.zeros([BLOCK_K], dtype=tl.int32)
    for j in range(TOP_K):
        best = tl.max(probs, axis=0)
        best_id = tl.min(tl.where(probs == best, experts, BLOCK_E), axis=0)  # ties: lowest expert index
        chosen_w = tl.where(slots == j, best, chosen_w)
        chosen_id = tl.where(slots == j, best_id, chosen_id)
        probs = tl.where(experts == best_id, -1.0, probs)
    if RENORMALIZE:
        chosen_w = chosen_w / tl.sum(tl.where(slots < TOP_K, chosen_w, 0.0), axis=0)
    out = token * TOP_K + slots
    tl.store(weights_ptr + out, chosen_w, mask=slots < TOP_K)
    tl.store(ids_ptr + out, chosen_id, mask=slots < TOP_K)


class Model(nn.Module):
    def __init__(self, top_k, renormalize):
        super().__init__()
        self.top_k = top_k
        self.renormalize = renormalize

    def forward(self, gating_output: torch.Tensor):
        n_tokens, n_experts = gating_output.shape
        logits = gating_output.contiguous()
        weights = torch.empty((n_tokens, self.top_k), dtype=torch.float32, device=logits.device)
        ids = torch.empty((n_tokens, self.top_k), dtype=torch.int32, device=logits.device)
        topk_softmax_kernel[(n_tokens,)](logits, weights, ids, n_experts, TOP_K=self.top_k,
                                         RENORMALIZE=self.renormalize, BLOCK_E=triton.next_power_of_2(n_experts),
                                         BLOCK_K=triton.next_power_of_2(self.top_k), num_warps=4)
        return weights, ids


num_tokens = 4096
num_experts = 128
top_k = 8
renormalize = True


def get_inputs():
    return [torch.randn(num_tokens, num_experts)]


def get_init_inputs():
    return [top_k, renormalize]
