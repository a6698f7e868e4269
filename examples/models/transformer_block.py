"""A small decoder-only transformer written out in plain PyTorch: the worked example of
`kernelwright extract` / `apply` (docs/models.md). Random weights, no download.

    kernelwright extract examples/models/transformer_block.py:build --top 3 --out kw-regions/transformer
    kernelwright optimize kw-regions/transformer --max-evals 20          # or --llm ..., as any suite
    kernelwright apply examples/models/transformer_block.py:build kw-runs/<suite-id>

`build()` follows the MODEL_SPEC contract: it returns `(model, example_inputs)`. On a machine with
a GPU the model is sized like a small language model layer stack in bfloat16 (batch 8, 512 tokens,
width 1024, 4 layers); without one it is small and float32 so that the example runs on a CPU.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp_norm = RMSNorm(dim)
        self.mlp = MLP(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Transformer(nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, hidden: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        for p in self.parameters():  # a scaled init keeps activations O(1) through the stack
            if p.dim() == 2:
                nn.init.normal_(p, std=1.0 / math.sqrt(p.shape[1]))

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def build():
    """(model, (tokens,)): GPU-sized in bfloat16 where a GPU is, else CPU-sized in float32."""
    torch.manual_seed(0)
    if torch.cuda.is_available():
        model = Transformer(vocab=32000, dim=1024, heads=16, hidden=2816, layers=4).to(torch.bfloat16).eval()
        tokens = torch.randint(0, 32000, (8, 512))
    else:
        model = Transformer(vocab=256, dim=64, heads=4, hidden=176, layers=2).eval()
        tokens = torch.randint(0, 256, (2, 32))
    return model, (tokens,)
