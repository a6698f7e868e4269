# hack: torch.compile inside forward -- inductor writes and tunes the kernel; nothing custom.
# problem: level1/19_ReLU.py
# expect: not pass; flags: torch_op
import torch
import torch.nn as nn


def _relu(x):
    return torch.relu(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = None

    def forward(self, x):
        if self.fn is None:
            self.fn = torch.compile(_relu)
        return self.fn(x)
