"""Capture the reference forward as an ATen graph with torch.export.

Export keeps composite ops whole (linear, softmax, layer_norm, gelu), which is the level the
library matches at, lifts parameters and buffers to named inputs, and records every value's
shape and dtype. Shapes are exported symbolic where torch allows it, so host code generated from
the graph (view sizes) follows the sizes an instance runs at; otherwise they are the example's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.export import Dim

from .ir import Unsupported


@dataclass
class Captured:
    program: Any  # torch.export.ExportedProgram
    dynamic: bool

    @property
    def single_output(self) -> bool:
        """Whether forward returns one tensor (rather than a tuple or list of them)."""
        spec = self.program.call_spec.out_spec
        return spec is None or spec.type is None


def capture(problem, seed: int = 0) -> Captured:
    """Export `problem`'s Model, built as the judge builds it, on its example inputs.

    Model and inputs are made on the meta device first: export only traces (with fake tensors),
    so nothing of the real size is allocated or computed. A model that cannot be built or traced
    on meta (it reads a value with `.item()`, say) is exported on the CPU instead.
    """
    failures = []
    for device in ("meta", "cpu"):
        try:
            with torch.device(device):
                model = problem.make_model(seed) if device == "cpu" else _meta_model(problem, seed)
                inputs = problem.make_inputs(seed) if device == "cpu" else list(problem.module.get_inputs())
        except Exception as exc:  # noqa: BLE001 -- the user's constructor or get_inputs: try the next device
            failures.append(f"{device}: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")
            continue
        if any(not isinstance(x, (torch.Tensor, int, float, bool)) for x in inputs):
            raise Unsupported("get_inputs() returns values that are neither tensors nor numbers")
        captured = _export(model, tuple(inputs), failures, device)
        if captured is not None and device == "meta" and _meta_constants(captured):
            failures.append("meta: a tensor made inside forward has no value on the meta device")
            continue  # its value is needed in the template: export on the CPU
        if captured is not None:
            return captured
    raise Unsupported("torch.export cannot capture the forward (" + "; ".join(failures) + ")")


def _meta_constants(captured: Captured) -> bool:
    return any(isinstance(v, torch.Tensor) and v.is_meta for v in captured.program.constants.values())


def _meta_model(problem, seed: int):
    torch.manual_seed(seed)
    return problem.Model(*problem.init_inputs(seed))


def _export(model, args: tuple, failures: list[str], device: str) -> Captured | None:
    # numbers are specialised to their example value (the judge passes get_inputs()'s own)
    dynamic = tuple({i: Dim.AUTO for i in range(x.dim())} if isinstance(x, torch.Tensor) else None for x in args)
    for shapes in (dynamic, None):
        try:
            program = torch.export.export(model, args, dynamic_shapes=shapes, strict=False)
            return Captured(program, shapes is not None)
        except Exception as exc:  # noqa: BLE001 -- some models only export with static shapes, or not on meta
            failures.append(f"{device}{' dynamic' if shapes else ''}: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0][:160] if str(exc) else ''}")
    return None


def hint(value: Any) -> Any:
    """The example value of a possibly symbolic int/float."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        node = value.node
        example = getattr(node, "hint", None)
        if example is None:
            example = node.shape_env.size_hint(node.expr)
        if isinstance(value, torch.SymInt):
            return int(example)
        return bool(example) if isinstance(value, torch.SymBool) else float(example)
    return value


def example_shape(val: Any) -> tuple[int, ...] | None:
    if isinstance(val, torch.Tensor):
        return tuple(int(hint(s)) for s in val.shape)
    return None
