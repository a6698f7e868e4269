"""Hand-written test candidate for the judge tests: forward raises."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raise RuntimeError("kernel launch failed on purpose")
