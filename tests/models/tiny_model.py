"""A small model for the tests of kernelwright.models: an embedding, two identical MLP blocks, a
norm and a head; `build()` follows the MODEL_SPEC contract (docs/models.md)."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, dim)

    def forward(self, x, scale=1.0):
        return x + scale * self.down(self.act(self.up(x)))


class TinyModel(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 32, hidden: int = 128):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim, hidden) for _ in range(2)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, scale=0.5)
        return self.head(self.norm(x))


def build():
    torch.manual_seed(0)
    model = TinyModel()
    tokens = torch.randint(0, 50, (4, 16))
    return model, (tokens,)


def build_model_only():
    return TinyModel()


def inputs():
    return {"tokens": torch.randint(0, 50, (2, 8))}
