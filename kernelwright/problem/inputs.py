"""Input variants that cover an op's domain.

Many `get_inputs()` draw only from [0, 1): a kernel that drops the max-subtraction of a softmax, or
mishandles negative values, passes on such inputs. Each variant reshapes the *values* of the
floating-point inputs while keeping shapes, dtypes and integer inputs (indices, labels) as given.
Fresh values come from `get_inputs()` under a new seed each trial, so structure survives there too.
A variant the reference itself cannot handle (non-finite outputs where "given" had none) is out
of the op's domain; the judge then falls back to "given" with a fresh seed.
"""
from __future__ import annotations

from typing import Callable

import torch


def _peak(x: torch.Tensor) -> torch.Tensor:
    return x.detach().abs().amax().clamp_min(1e-6) if x.numel() else torch.tensor(1.0)


def _scaled_to(x: torch.Tensor, top: float) -> torch.Tensor:
    """`x` scaled so that its largest value is `top` (flipped first when it has no positive value)."""
    if not x.numel():
        return x
    largest = x.detach().amax()
    if largest <= 0:
        x, largest = -x, (-x).detach().amax()
    return x * (top / largest.clamp_min(1e-6))


# name -> how to turn the given tensor `x` (already drawn under the trial's seed) into the variant.
# Every map is elementwise with f(0) = 0, so structure the problem promises survives: symmetric
# matrices stay symmetric, triangular ones triangular, masks and sparsity patterns keep their zeros.
_VARIANTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "given": lambda x: x,
    # both signs: f(x) = x (2 - 3|x|/m) maps [0, m] onto [-m, m/3] and is odd for signed inputs
    "signed": lambda x: x * (2 - 3 * x.abs() / _peak(x)),
    # large magnitude (|x| up to 100): catches overflow and a missing max-subtraction in exp/softmax
    "wide": lambda x: x * (100 / _peak(x)),
    # +100 reached whatever the signs: the largest positive value scaled to +100 (an all-negative
    # input is flipped first); -100 likewise. "wide" alone promises magnitude 100, not its sign:
    # exp(x) overflows only at +89, and a softmax that forgets its max passed on |x| <= 100 with
    # every large value negative.
    "wide_pos": lambda x: _scaled_to(x, 100.0),
    "wide_neg": lambda x: _scaled_to(-x, 100.0).neg(),
    # negated: catches kernels that assume non-negative inputs
    "negated": lambda x: -x,
}

# the order in which trials walk through variants: trial i uses DEFAULT_CYCLE[i % len]
DEFAULT_CYCLE = ("given", "signed", "wide_pos", "wide_neg", "negated")


def variant_for_trial(trial: int, cycle: tuple[str, ...] = DEFAULT_CYCLE) -> str:
    return cycle[trial % len(cycle)]


def apply_variant(inputs: list, variant: str, seed: int = 0) -> list:
    """Apply `variant` to every floating-point tensor of `inputs`; others pass through unchanged."""
    if variant not in _VARIANTS:
        raise ValueError(f"unknown input variant {variant!r}; known: {', '.join(_VARIANTS)}")
    transform = _VARIANTS[variant]
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.device.type != "meta":
            with torch.no_grad():
                x = transform(x).to(x.dtype).contiguous()
        out.append(x)
    return out
