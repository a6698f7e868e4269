"""Hand-written ModelNew sources for the tiny model's Block region (tests/models/tiny_model.py),
standing in for optimized candidates: each is a real program, run as it is.

FAITHFUL computes the Block's function with another torch expression (flattened addmm, GELU
written with erf); WRONG forgets the 0.5 scale; RENAMED computes the same function but keeps its
weights under other names (apply cannot load the model's weights into it)."""

HEAD = '''import math
import torch
from torch import nn


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(32, 128)
        self.act = nn.GELU()
        self.down = nn.Linear(128, 32)


def _forward(block, x, scale):
    flat = x.reshape(-1, 32)
    h = torch.addmm(block.up.bias, flat, block.up.weight.t())
    h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
    y = torch.addmm(block.down.bias, h, block.down.weight.t())
    return x + scale * y.reshape(x.shape)
'''

FAITHFUL = HEAD + '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.region = _Block()

    def forward(self, x):
        return _forward(self.region, x, 0.5)
'''

WRONG = FAITHFUL.replace("_forward(self.region, x, 0.5)", "_forward(self.region, x, 1.0)")

RENAMED = FAITHFUL.replace("self.region = _Block()", "self.body = _Block()").replace("self.region, x", "self.body, x")

# the same outputs, but no gradient reaches `down.weight` (detached): only a gradient check sees it
DETACHED = FAITHFUL.replace("block.down.weight.t()", "block.down.weight.detach().t()")

# loads, holds the right weights, and fails when the model calls it
RAISES = FAITHFUL.replace("return _forward(self.region, x, 0.5)", "raise RuntimeError('kernel launch failed')")
