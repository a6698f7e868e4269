"""Hand-written test candidate (rule sets): the reference's ops rewritten in torch, no kernel at all.
Rejected under every rule set (no own kernel, and torch still runs all of the work)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return F.relu(F.conv2d(x, self.conv.weight, self.conv.bias)) + self.bias
