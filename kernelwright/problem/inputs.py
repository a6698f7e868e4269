"""Input variants that cover an op's domain.

Many `get_inputs()` draw only from [0, 1): a kernel that drops the max-subtraction of a softmax, or
mishandles negative values, passes on such inputs. Each variant reshapes the *values* of the
floating-point inputs while keeping shapes, dtypes and integer inputs (indices, labels) as given.
A variant the reference itself cannot handle (non-finite outputs where "given" had none) is out
of the op's domain; the judge then falls back to "given" with a fresh seed.
"""
from __future__ import annotations

from typing import Callable

import torch

# name -> how to turn the given tensor `x` (already drawn under the trial's seed) into the variant
_VARIANTS: dict[str, Callable[[torch.Tensor, torch.Generator], torch.Tensor]] = {
    "given": lambda x, g: x,
    # both signs, same magnitude as the given distribution
    "signed": lambda x, g: x * 2 - x.detach().abs().amax().clamp_min(1e-6) if x.numel() else x,
    # standard normal: unbounded tails, both signs
    "normal": lambda x, g: torch.randn(x.shape, generator=g, dtype=torch.float32).to(x.dtype),
    # large magnitude: catches overflow and missing max-subtraction / unstable formulations
    "wide": lambda x, g: (torch.randn(x.shape, generator=g, dtype=torch.float32) * 8).to(x.dtype),
}

# the order in which trials walk through variants: trial i uses DEFAULT_CYCLE[i % len]
DEFAULT_CYCLE = ("given", "normal", "signed", "wide", "given")


def variant_names() -> list[str]:
    return list(_VARIANTS)


def variant_for_trial(trial: int, cycle: tuple[str, ...] = DEFAULT_CYCLE) -> str:
    return cycle[trial % len(cycle)]


def apply_variant(inputs: list, variant: str, seed: int) -> list:
    """Apply `variant` to every floating-point tensor of `inputs`; others pass through unchanged."""
    if variant not in _VARIANTS:
        raise ValueError(f"unknown input variant {variant!r}; known: {', '.join(_VARIANTS)}")
    transform = _VARIANTS[variant]
    gen = torch.Generator().manual_seed(seed + 7919)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.device.type != "meta":
            with torch.no_grad():
                x = transform(x, gen).contiguous()
        out.append(x)
    return out
