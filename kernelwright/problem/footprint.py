"""What a problem's timed work must move and compute at least, measured on the meta device.

`measure(problem)` runs the reference on meta tensors (nothing is allocated, no kernel runs) and
returns its `Footprint`:
- bytes: every input and parameter read once, every output written once, inputs the forward
  changes in place (their version counter moved) written back once more; when the problem declares
  its backward pass part of the work (`KW_BACKWARD`, `get_grad_outputs`; problem/reference.py), the
  output gradients read and the gradients of the counted inputs and of every parameter written;
- FLOPs: what `torch.utils.flop_counter.FlopCounterMode` counts for the same work (matrix products,
  convolutions, attention; forward and, when declared, backward).
Triton launches are skipped on meta tensors (their outputs keep the shapes the Python code gave
them), so a reference written as Triton kernels is measured by its tensors; its kernels' FLOPs
are not counted and in-place writes made by its kernels are not seen, so its floor errs low.
A forward that cannot run on meta at all (it calls `.item()`, say) is measured by its inputs and
parameters alone, FLOPs unknown (0), and `Footprint.complete` says so.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from .reference import declared_work, launch_classes


@dataclass
class Footprint:
    bytes: int
    flops: float
    complete: bool = True  # False: the reference did not run on meta; outputs (and backward) not counted
    backward: bool = False  # the backward pass is counted
    input_bytes: int = 0  # the inputs' share of `bytes` (read once)


def tensor_bytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(x) for x in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(x) for x in obj.values())
    return 0


def measure(problem) -> Footprint:
    """The Footprint of one timed call of `problem` (a loaded Problem); see the module docstring."""
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415 -- torch.utils.flop_counter imports triton (0.4 s): paid only when flops are counted

    backward, grad_inputs, _ = declared_work(problem.module)
    with torch.device("meta"), _skip_triton_on_meta():
        torch.manual_seed(0)
        model = build_model(problem)
        inputs = list(problem.module.get_inputs())
        static = tensor_bytes(inputs) + sum(tensor_bytes(t) for t in model.state_dict().values())
        versions = [t._version if isinstance(t, torch.Tensor) else None for t in inputs]
        counter = FlopCounterMode(display=False)
        try:
            with counter:
                moved = _run(model, inputs, backward, grad_inputs)
        except Exception:  # noqa: BLE001 - meta cannot run it: inputs and parameters only
            return Footprint(static, 0.0, complete=False, input_bytes=tensor_bytes(inputs))
    rewritten = sum(tensor_bytes(t) for t, v in zip(inputs, versions, strict=True) if v is not None and t._version != v)
    return Footprint(static + moved + rewritten, float(counter.get_total_flops()), backward=backward,
                     input_bytes=tensor_bytes(inputs))


def _run(model, inputs: list, backward: bool, grad_inputs: list[int] | None) -> int:
    """Run the work on meta; the bytes it writes (outputs; with the backward, output gradients read
    and input and parameter gradients written)."""
    if not backward:
        with torch.no_grad():
            return tensor_bytes(model(*inputs))
    args = list(inputs)
    leaves = []
    for index, arg in enumerate(inputs):
        if isinstance(arg, torch.Tensor) and arg.is_floating_point() and (grad_inputs is None or index in grad_inputs):
            args[index] = arg.detach().requires_grad_(True)
            leaves.append(args[index])
    wrt = leaves + [p for p in model.parameters() if p.requires_grad]
    with torch.enable_grad():
        out = model(*args)
    outs = [o for o in _flat(out) if o.is_floating_point() and o.requires_grad]
    if outs and wrt:
        # backward(), not autograd.grad(): FlopCounterMode's module hooks refuse grad() of leaves
        torch.autograd.backward(outs, [torch.empty_like(o) for o in outs])
        return tensor_bytes(out) + tensor_bytes(outs) + sum(tensor_bytes(t.grad) for t in wrt if t.grad is not None)
    return tensor_bytes(out)


def _flat(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for x in out for t in _flat(x)]
    return []


def build_model(problem):
    """The model on meta where its constructor allows (some call `.item()`), else on the CPU."""
    try:
        return problem.Model(*problem.module.get_init_inputs())
    except Exception:  # noqa: BLE001 - constructors that need real data
        with torch.device("cpu"):
            return problem.Model(*problem.module.get_init_inputs())


@contextlib.contextmanager
def _skip_triton_on_meta() -> Iterator[None]:
    """Triton launches whose tensor arguments are on meta do nothing (there is no data to run on)."""
    saved = []
    for cls in _triton_launchers():
        original = cls.__dict__.get("run")
        if original is not None:
            saved.append((cls, original))
            cls.run = _skipping(original)
    try:
        yield
    finally:
        for cls, original in reversed(saved):
            cls.run = original


def _skipping(original):
    def run(kernel, *args, **kwargs):
        values = [*args, *kwargs.values()]
        if any(isinstance(v, torch.Tensor) and v.is_meta for v in values):
            return None
        return original(kernel, *args, **kwargs)

    return run


def _triton_launchers() -> list[type]:
    """The classes whose `run` launches (reference.launch_classes, the recorder's) plus the autotuner
    and heuristics wrappers, which would time or pick configurations before any launch."""
    classes = launch_classes()
    for name in ("Autotuner", "Heuristics"):
        try:
            classes.append(getattr(__import__("triton.runtime.autotuner", fromlist=[name]), name))
        except Exception:  # noqa: BLE001 - no (working) triton, or an older one without the class
            continue
    return classes
