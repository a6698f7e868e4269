"""One step of a model as named tensors (outputs, and gradients with `backward`), compared by the
judge's comparison; and the step as a callable for the judge's clock."""
from __future__ import annotations

from typing import Callable

import torch

from kernelwright.judge.check import compare_tensor

from .attribution import flat_tensors

GRAD_SEED_OFFSET = 7919  # output gradients draw apart from the inputs' stream (as judge/grad.py)


def _leaf(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().requires_grad_(True)
    return value


def _output_grads(outs: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed + GRAD_SEED_OFFSET)
    return [torch.randn(o.shape, dtype=o.dtype, generator=gen).to(o.device) for o in outs]


def step_tensors(model: torch.nn.Module, args: tuple, kwargs: dict, seed: int, backward: bool,
                 rename: dict[str, str] | None = None) -> dict[str, torch.Tensor]:
    """"output i" for every output tensor; with `backward`, "gradient of input i" for the floating
    inputs and "gradient of parameter NAME" (NAME as in the original model: `rename` maps a patched
    model's names back) for fixed random output gradients."""
    torch.manual_seed(seed)
    if not backward:
        with torch.no_grad():
            outs = flat_tensors(model(*args, **kwargs))
        return {f"output {i}": o for i, o in enumerate(outs)}
    leaf_args = tuple(_leaf(a) for a in args)
    leaf_kwargs = {k: _leaf(v) for k, v in kwargs.items()}
    inputs = [(f"gradient of input {i}", t) for i, t in enumerate(list(leaf_args) + list(leaf_kwargs.values()))
              if isinstance(t, torch.Tensor) and t.requires_grad]
    params = [(f"gradient of parameter {(rename or {}).get(n, n)}", p) for n, p in model.named_parameters()
              if p.requires_grad]
    with torch.enable_grad():
        outs = flat_tensors(model(*leaf_args, **leaf_kwargs))
    live = [o for o in outs if o.is_floating_point() and o.requires_grad]
    found = {f"output {i}": o.detach() for i, o in enumerate(outs)}
    wrt = inputs + params
    if live and wrt:
        grads = torch.autograd.grad(live, [t for _, t in wrt], _output_grads(live, seed), allow_unused=True)
        for (name, t), g in zip(wrt, grads, strict=True):
            found[name] = g if g is not None else torch.zeros_like(t)
    return found


def compare_steps(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], config, device: str):
    """(all within the judge's tolerances, the first mismatch's message, the largest absolute error)."""
    worst = 0.0
    for name, ref in expected.items():
        if name not in got:
            return False, f"the patched model has no {name}", worst
        found = compare_tensor(got[name].detach(), ref.detach(), config, device)
        if found.max_abs_err is not None:
            worst = max(worst, found.max_abs_err)
        if not found.ok:
            return False, f"{name}: " + found.message.removeprefix("output: ").removeprefix("output "), worst
    extra = sorted(set(got) - set(expected))
    if extra:
        return False, f"the patched model has {extra[0]}, which the original does not", worst
    return True, "", worst


def step_callable(model: torch.nn.Module, args: tuple, kwargs: dict, backward: bool, seed: int = 0) -> Callable[[], object]:
    """One step to time: a forward under no_grad, or a forward and a backward for fixed output
    gradients (to every floating input and parameter, as `step_tensors` computes them)."""
    if not backward:
        def forward():
            with torch.no_grad():
                return model(*args, **kwargs)
        return forward
    leaf_args = tuple(_leaf(a) for a in args)
    leaf_kwargs = {k: _leaf(v) for k, v in kwargs.items()}
    wrt = [t for t in list(leaf_args) + list(leaf_kwargs.values()) if isinstance(t, torch.Tensor) and t.requires_grad]
    wrt += [p for p in model.parameters() if p.requires_grad]
    with torch.enable_grad():
        outs = [o for o in flat_tensors(model(*leaf_args, **leaf_kwargs)) if o.is_floating_point() and o.requires_grad]
    grads = _output_grads(outs, seed)

    def forward_backward():
        with torch.enable_grad():
            live = [o for o in flat_tensors(model(*leaf_args, **leaf_kwargs)) if o.is_floating_point() and o.requires_grad]
            return torch.autograd.grad(live, wrt, grads, allow_unused=True)
    return forward_backward
