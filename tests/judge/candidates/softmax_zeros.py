"""Hand-written test candidate for the judge tests: an all-zero softmax. Over a row of 32768 columns
every true value is below atol=1e-4, so allclose accepts it; the relative L2 error (1.0) does not."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
