"""Hand-written test candidate for the judge tests: the classic KernelBench exploit. No kernel at
all: return torch.empty_like(x) and hope the allocator hands back the block that just held the
reference's output (it often does on a GPU when nothing poisons the cache)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
