"""What each submodule was called with: its arguments as data a problem file can regenerate.

While the model runs once, a forward pre-hook and a forward hook on every named submodule record
its first call (`ModuleCall`): each argument as a tensor description (shape, dtype, device, whether
it required grad, the value range of integer and bool tensors) or as a constant (a Python literal),
its outputs' shapes and dtypes, and how many times it was called. A call that a KernelBench problem
cannot express (an argument that is neither a tensor nor a literal, an output that is not a tensor
or a tuple/list of tensors) is recorded with the reason, and that submodule is not extracted.
The same hooks open a `record_function` range named after the submodule around each call, which is
how the profiler's events are attributed to submodules (attribution.py).
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from typing import Any

import torch

RANGE_PREFIX = "kw.module::"
USER_MODULE = "kw_user_model_"  # spec.load_callable names a spec file's module so


@dataclass
class TensorSpec:
    shape: list[int]
    dtype: str  # "float32"
    device: str  # where it was at the call ("cuda:0"); the judge places a problem's inputs itself
    requires_grad: bool = False
    low: float | None = None  # integer and bool tensors: the observed range, regenerated uniformly
    high: float | None = None

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorSpec":
        spec = cls(list(t.shape), str(t.dtype).removeprefix("torch."), str(t.device), bool(t.requires_grad))
        if not (t.is_floating_point() or t.is_complex()) and t.numel():
            values = t.detach()
            spec.low, spec.high = float(values.min()), float(values.max())
        return spec


@dataclass
class Arg:
    name: str | None  # the keyword it was passed by; None: positional
    tensor: TensorSpec | None = None
    literal: str | None = None  # repr of a constant argument (None, a number, a string, a tuple of them)


@dataclass
class ModuleCall:
    path: str  # dotted name in the model ("" is the model itself)
    cls: str  # qualified class name
    training: bool
    args: list[Arg] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)
    calls: int = 0
    unsupported: str = ""  # why a problem file cannot reproduce this call


def literal_repr(value: Any) -> str | None:
    """repr(value) when it reads back as the same value (a constant a problem file can hold)."""
    try:
        text = repr(value)
        return text if ast.literal_eval(text) == value else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def describe_args(args: tuple, kwargs: dict) -> tuple[list[Arg], str]:
    """(the call's arguments as data, why it cannot be written into a problem: "" when it can)."""
    described = []
    for name, value in [(None, a) for a in args] + list(kwargs.items()):
        if isinstance(value, torch.Tensor):
            described.append(Arg(name, tensor=TensorSpec.of(value)))
            continue
        literal = literal_repr(value)
        if literal is None:
            where = f"argument {name!r}" if name else f"positional argument {len(described)}"
            return described, f"{where} is a {type(value).__name__}, neither a tensor nor a Python literal"
        described.append(Arg(name, literal=literal))
    return described, ""


def describe_outputs(out: Any) -> tuple[list[TensorSpec], str]:
    if isinstance(out, torch.Tensor):
        return [TensorSpec.of(out)], ""
    if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
        return [TensorSpec.of(o) for o in out], ""
    return [], f"it returns a {type(out).__name__}, not a tensor or a tuple/list of tensors"


def class_name(module: torch.nn.Module) -> str:
    """`torch.nn.modules.linear.Linear`; a class from a spec file by its name alone (its module's
    name is load_callable's key, made from the file's path)."""
    cls = type(module)
    return cls.__qualname__ if cls.__module__.startswith(USER_MODULE) else f"{cls.__module__}.{cls.__qualname__}"


class CallRecorder:
    """Hooks on every submodule: record first calls, count calls, open profiler ranges."""

    def __init__(self, model: torch.nn.Module, ranges: bool = True):
        self.records: dict[str, ModuleCall] = {}
        self.ranges = ranges
        self._open: list[Any] = []
        self._handles = []
        for path, module in model.named_modules():
            self._handles.append(module.register_forward_pre_hook(functools.partial(self._pre, path), with_kwargs=True))
            self._handles.append(module.register_forward_hook(functools.partial(self._post, path), with_kwargs=True))

    def _pre(self, path: str, module, args, kwargs):
        record = self.records.get(path)
        if record is None:
            described, why = describe_args(args, kwargs)
            record = self.records[path] = ModuleCall(path, class_name(module), module.training, described,
                                                     unsupported=why)
        record.calls += 1
        if self.ranges:
            rf = torch.autograd.profiler.record_function(RANGE_PREFIX + path)
            rf.__enter__()
            self._open.append(rf)

    def _post(self, path: str, module, args, kwargs, out):
        if self.ranges and self._open:
            self._open.pop().__exit__(None, None, None)
        record = self.records[path]
        if record.calls == 1 and not record.unsupported:
            record.outputs, record.unsupported = describe_outputs(out)

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        while self._open:
            self._open.pop().__exit__(None, None, None)

    def __enter__(self) -> "CallRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
