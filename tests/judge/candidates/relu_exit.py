"""Hand-written test candidate for the judge tests: ends the process without a word."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(0)
