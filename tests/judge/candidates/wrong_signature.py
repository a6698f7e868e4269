"""Hand-written test candidate for the judge tests: forward takes no input."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self):
        return torch.zeros(1)
