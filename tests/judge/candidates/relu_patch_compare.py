"""Hand-written test candidate for the judge tests: a wrong ReLU (all zeros) that replaces the
judge's own comparison, in its process, with one that passes everything."""
import torch
import torch.nn as nn

from kernelwright.judge import check, gpucompare

check.compare = lambda outs, refs, config, device: check.Comparison(True)
gpucompare.error_stats = lambda out, ref, atol, rtol: None


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
