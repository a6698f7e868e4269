"""Hand-written test candidate for the judge tests: the class has the wrong name."""
import torch.nn as nn


class MyModel(nn.Module):
    def forward(self, x):
        return x.clamp_min(0.0)
