"""Pieces shared by the kernel generators: operand naming, pointwise lines, parameter spaces.

Each generator (pointwise.py, rowwise.py, gemm.py) returns a `GroupCode`: the Triton kernel, the
host launcher, and the group's tunable parameters with their constraints and defaults. The
launcher reads its parameters from KW_PARAMS, so one template serves every configuration.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelwright.tune.constraints import parse_constraint
from kernelwright.tune.params import activity_constraint, parse_param

from . import exprs
from .fuse import Group
from .ir import IRNode


@dataclass
class GroupCode:
    kernel: str
    launcher: str
    launcher_name: str
    params: dict[str, list] = field(default_factory=dict)  # name (prefixed) -> values
    constraints: list[str] = field(default_factory=list)
    defaults: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    family: str = ""
    # what the declaration says of a parameter besides its values (tune/params.py): "kind", "when"
    # (with "off"), "choice": True for values without an order
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def declared_params(self) -> dict[str, Any]:
        """KW_TUNE's params: a plain list, or a dict with the values and their spec."""
        return {name: declare(values, self.specs.get(name)) for name, values in self.params.items()}


def declare(values: list, spec: dict[str, Any] | None) -> Any:
    """One parameter as KW_TUNE declares it."""
    if not spec:
        return list(values)
    source = "choice" if spec.get("choice") else "values"
    return {source: list(values), **{k: v for k, v in spec.items() if k != "choice"}}


def activity_constraints(params: dict[str, list], specs: dict[str, dict[str, Any]]) -> list[str]:
    """The constraints the `when` of each parameter adds, as the template parser makes them."""
    found = []
    for name, spec in specs.items():
        text = activity_constraint(name, parse_param(name, declare(params[name], spec))[1])
        if text:
            found.append(text)
    return found


class Emitter:
    """Lines of Python with an indentation level."""

    def __init__(self, indent: int = 0):
        self.lines: list[str] = []
        self.level = indent

    def __call__(self, text: str = "") -> None:
        self.lines.append(("    " * self.level + text) if text else "")

    def push(self) -> None:
        self.level += 1

    def pop(self) -> None:
        self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def operand_names(group: Group) -> dict[int, str]:
    """Variable names inside the kernel: inputs x0.., scalars sc0.., group nodes by their own name."""
    names = {node.id: f"x{k}" for k, node in enumerate(group.inputs)}
    names.update({node.id: f"sc{k}" for k, node in enumerate(group.scalars)})
    return names


def operand(arg: Any, names: dict[int, str]) -> str:
    if isinstance(arg, IRNode):
        return names.get(arg.id, arg.name)
    return exprs.literal(arg)


def pointwise_line(node: IRNode, names: dict[int, str]) -> str:
    operands = [operand(a, names) for a in node.args]
    params = dict(node.params)
    if node.op == "squeeze":
        return f"{node.name} = {operands[0]}"
    return f"{node.name} = {exprs.render(node.op, operands, params)}"


def load_suffix(node: IRNode) -> str:
    """Loaded values become fp32 (booleans stay masks)."""
    return "" if node.dtype == torch.bool else ".to(tl.float32)"


def store_value(node: IRNode, out: str) -> str:
    return f"{node.name}.to({out}.dtype.element_ty)"


def torch_dtype(dtype) -> str:
    return str(dtype) if str(dtype).startswith("torch.") else f"torch.{dtype}"


def pow2_range(lo: int, hi: int) -> list[int]:
    return [1 << k for k in range(int(math.log2(lo)), int(math.log2(hi)) + 1)]


def choose_default(params: dict[str, list], constraints: list[str], env: dict[str, Any],
                   preferred: dict[str, Any], specs: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """`preferred` when it satisfies the constraints (and the `when` of conditional parameters,
    `specs`), else the feasible configuration nearest to it (in log2 distance per numeric
    parameter), so every default instance can run."""
    checks = [parse_constraint(c) for c in constraints + activity_constraints(params, specs or {})]
    best, best_distance = None, math.inf
    names = list(params)
    for values in itertools.product(*params.values()):
        config = dict(zip(names, values, strict=False))
        scope = {**env, **config}
        if not all(c.check(scope)[0] for c in checks):
            continue
        distance = sum(_distance(config[k], preferred.get(k, config[k])) for k in names)
        if distance < best_distance:
            best, best_distance = config, distance
    if best is None:
        raise ValueError("no configuration of the generated space satisfies its constraints")
    return best


def _distance(a: Any, b: Any) -> float:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0:
        return abs(math.log2(a) - math.log2(b))
    return 0.0 if a == b else 1.0


def call_args(items: list[str]) -> str:
    return ", ".join(items)
