"""The backward pass as part of the work: gradients checked like outputs, forward+backward timed.

A problem declares it with a module-level `KW_BACKWARD = True` or a `get_grad_outputs()` function
(`KW_GRAD_INPUTS = (0, 2)` limits the inputs whose gradients count; see problem/reference.py).
Then, in every trial:
- the reference runs forward with gradients on, for the floating inputs that count and every
  parameter, and `torch.autograd.grad` of its outputs against the trial's output gradients gives
  the expected gradients (`TrialCase.ref_grads`, named "input 0", "parameter weight");
- the candidate runs the same on the same inputs and output gradients, and every expected gradient
  is compared like an output: same tolerances, shapes, dtypes and NaN rules, and the same input
  variants (wide, signed, ...). A candidate implements its backward in its own kernels through a
  `torch.autograd.Function`; outputs that autograd cannot reach fail with a message saying so.
Output gradients are `get_grad_outputs()` called under the trial's seed (one entry per output,
None for outputs without a gradient), else standard normal values shaped like each floating output
(integer outputs, such as top-k indices, get none). Inputs that autograd leaves unused have a zero
gradient on both sides. The time measured is one forward plus one backward (`timed_call`), for
the candidate and for the baselines alike.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import _disable_current_modes

from ..problem.ops import OpRecorder
from ..problem.reference import declared_work
from .check import Comparison, compare_tensor, flatten_outputs, host_copy, make_inputs

GRAD_SEED_OFFSET = 7919  # output gradients draw from seed + this, apart from the inputs' stream
NO_GRAPH = ("the backward pass is part of this problem, but no floating output of ModelNew.forward is connected to "
            "autograd (requires_grad is False): wrap your kernels in a torch.autograd.Function whose backward "
            "launches your backward kernels, and return its outputs")


class BackwardError(Exception):
    """The forward+backward of a model cannot be run as the problem asks (a message for the LLM)."""


@dataclass
class GradRunner:
    """Runs forward+backward for one problem on one device and compares gradients."""

    problem: Any
    device: str
    grad_inputs: list[int] | None = None
    custom_grad_outputs: bool = False
    last: dict[str, torch.Tensor | None] = field(default_factory=dict)  # the candidate's latest gradients

    # ------------------------------------------------------------------ inputs and output gradients
    def leaves(self, args: list) -> tuple[list, list[str], list[torch.Tensor]]:
        """(forward arguments, names, leaf tensors): each counted input replaced by a detached alias
        that requires grad, so the input buffer itself stays a plain tensor (the judge refills it)."""
        call_args, names, tensors = list(args), [], []
        for index, arg in enumerate(args):
            counted = self.grad_inputs is None or index in self.grad_inputs
            if isinstance(arg, torch.Tensor) and arg.is_floating_point() and counted:
                leaf = arg.detach().requires_grad_(True)
                call_args[index] = leaf
                names.append(f"input {index}")
                tensors.append(leaf)
        return call_args, names, tensors

    def grad_outputs(self, outs: list[torch.Tensor], seed: int) -> list[torch.Tensor | None]:
        """The fixed output gradients; made by the judge, so outside any op recording of the call."""
        with _disable_current_modes():
            return self._grad_outputs(outs, seed)

    def _grad_outputs(self, outs: list[torch.Tensor], seed: int) -> list[torch.Tensor | None]:
        torch.manual_seed(seed + GRAD_SEED_OFFSET)
        if not self.custom_grad_outputs:
            return [torch.randn(o.shape, dtype=o.dtype, device=o.device) if o.is_floating_point() else None
                    for o in outs]
        if self.device.startswith("cuda"):
            with torch.device(self.device):
                given = list(self.problem.module.get_grad_outputs())
        else:
            given = list(self.problem.module.get_grad_outputs())
        if len(given) != len(outs):
            raise BackwardError(f"get_grad_outputs() returned {len(given)} entries; the forward returns {len(outs)} "
                                "outputs (give None for an output without a gradient)")
        return [None if g is None else g.to(device=o.device, dtype=o.dtype) for g, o in zip(given, outs, strict=True)]

    # ------------------------------------------------------------------ forward + backward
    def run(self, model, args: list, seed: int) -> tuple[Any, dict[str, torch.Tensor | None]]:
        """(the forward's output, gradient by name) for `model` on `args`."""
        call_args, names, tensors = self.leaves(args)
        params = [(f"parameter {n}", p) for n, p in model.named_parameters() if p.requires_grad]
        with torch.enable_grad():
            out = model(*call_args)
        outs = flatten_outputs(out)
        pairs = [(o, g) for o, g in zip(outs, self.grad_outputs(outs, seed), strict=True) if g is not None]
        live = [(o, g) for o, g in pairs if o.requires_grad]
        if pairs and not live:
            raise BackwardError(NO_GRAPH)
        wrt = tensors + [p for _, p in params]
        if not live or not wrt:
            return out, {}
        grads = torch.autograd.grad([o for o, _ in live], wrt, [g for _, g in live], allow_unused=True)
        found = {name: (g if g is not None else torch.zeros_like(t)) for name, g, t in
                 zip(names + [n for n, _ in params], grads, wrt, strict=True)}
        return out, found

    def forward(self, model, args: list, seed: int):
        """The candidate's call in a trial: its output; its gradients are kept in `last`."""
        self.last = {}
        out, self.last = self.run(model, args, seed)
        return out

    def reference(self, model, cases: list, sync: Callable[[], None]) -> Counter:
        """Expected gradients of every case (kept where its outputs are kept); returns the ATen ops
        of one forward+backward of the reference (its backward's work counts as the reference's)."""
        ops: Counter = Counter()
        for position, case in enumerate(cases):
            inputs = make_inputs(self.problem, case.seed, case.variant, self.device)
            torch.manual_seed(case.seed)
            recorder = OpRecorder() if position == 0 else None
            if recorder is not None:
                with recorder:
                    _, grads = self.run(model, inputs, case.seed)
                ops = recorder.counts
            else:
                _, grads = self.run(model, inputs, case.seed)
            sync()
            keep_here = bool(case.ref_outputs) and case.ref_outputs[0].device.type != "cpu"
            case.ref_grads = {name: (g.detach().clone() if keep_here else host_copy(g))
                              for name, g in grads.items()}
        return ops

    def timed_call(self, model, args: list, seed: int) -> Callable[[], object]:
        """One forward plus one backward of `model`, with inputs and output gradients prepared once."""
        call_args, _, tensors = self.leaves(args)
        wrt = tensors + [p for p in model.parameters() if p.requires_grad]
        with torch.enable_grad():
            outs = flatten_outputs(model(*call_args))
        given = self.grad_outputs(outs, seed)
        keep = [i for i, (o, g) in enumerate(zip(outs, given, strict=True)) if g is not None and o.requires_grad]
        if not keep or not wrt:
            raise BackwardError(NO_GRAPH)
        grad_outs = [given[i] for i in keep]
        del outs

        def call():
            with torch.enable_grad():
                result = flatten_outputs(model(*call_args))
                return torch.autograd.grad([result[i] for i in keep], wrt, grad_outs, allow_unused=True)

        return call

    # ------------------------------------------------------------------ comparison
    def compare(self, case, config) -> tuple[Comparison, dict[str, dict[str, float | None]]]:
        """The candidate's latest gradients against the case's; (merged comparison, errors by name)."""
        merged, errors = Comparison(ok=True), {}
        for name, expected in case.ref_grads.items():
            got = self.last.get(name)
            if got is None:
                missing = name.removeprefix("parameter ")
                return Comparison(False, message=f"ModelNew has no parameter named {missing!r}, whose gradient the "
                                  "reference has: keep the reference's parameters (same names and shapes)"), errors
            found = compare_tensor(got.detach(), expected, config, self.device)
            errors[name] = {"max_abs_err": found.max_abs_err, "rel_l2_err": found.rel_l2_err}
            if not found.ok:
                found.message = "gradient of " + name + found.message.removeprefix("output")
                return found, errors
            for key in ("max_abs_err", "max_rel_err", "rel_l2_err"):
                value = getattr(found, key)
                if value is not None:
                    setattr(merged, key, max(value, getattr(merged, key) or 0.0))
        return merged, errors


def runner_for(problem, device: str) -> GradRunner | None:
    """A GradRunner when the problem declares its backward pass part of the work, else None."""
    backward, grad_inputs, custom = declared_work(problem.module)
    if not backward:
        return None
    return GradRunner(problem, str(device), grad_inputs, custom)


def merge_into(result, compared: tuple[Comparison, dict]) -> None:
    """Fold the gradient comparison into a TrialResult whose forward passed."""
    comparison, errors = compared
    result.grads = errors
    if result.ok and not comparison.ok:
        result.ok, result.message = False, comparison.message
        result.shape_ok &= comparison.shape_ok
        result.dtype_ok &= comparison.dtype_ok
        result.nonfinite |= comparison.nonfinite
