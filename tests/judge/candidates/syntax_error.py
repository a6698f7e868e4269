"""Hand-written test candidate for the judge tests: a syntax error on line 7."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0.0
