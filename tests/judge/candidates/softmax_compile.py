"""Hand-written test candidate for the judge tests: hands softmax to torch.compile, with the name
hidden from a source scan so only the runtime check (dynamo's frame counter) can see it."""
import torch
import torch.nn as nn


def _softmax(x):
    e = torch.exp(x - x.amax(dim=1, keepdim=True))
    return e / e.sum(dim=1, keepdim=True)


_compiled = getattr(torch, "com" + "pile")(_softmax, backend="eager")


class ModelNew(nn.Module):
    def forward(self, x):
        return _compiled(x)
