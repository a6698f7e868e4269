"""Write the template file: KW_TUNE, the runtime helpers, the embedded reference, the kernels, and
a ModelNew whose forward replays the host ops and launches one kernel per group.

ModelNew subclasses the reference class (embedded under the name `_KwReference`), so it builds
exactly the same parameters from the same seed and keeps their names; only `forward` is new.
"""
from __future__ import annotations

import ast
import inspect
import operator
import pprint
from pathlib import Path
from typing import Any

import torch

from . import runtime
from .fuse import Group
from .ir import HOST, INPUT, IRNode, Program, Unsupported, flat_args

REFERENCE_CLASS = "_KwReference"
_SKIP_FUNCTIONS = {"get_inputs", "get_init_inputs"}
_PY_SYMBOLS = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.floordiv: "//", operator.truediv: "/",
    operator.mod: "%", operator.pow: "**",
}


def embed_reference(source: str, overrides: dict[str, Any]) -> str:
    """The problem file's imports, constants (overrides applied), helpers and classes, with
    `Model` renamed; get_inputs/get_init_inputs and bare statements are left out."""
    tree = ast.parse(source)
    kept: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.ClassDef)):
            kept.append(stmt)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name not in _SKIP_FUNCTIONS:
            kept.append(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            kept.append(_override(stmt, overrides))
    renamed = _Rename().visit(ast.Module(body=kept, type_ignores=[]))
    return ast.unparse(ast.fix_missing_locations(renamed))


def _override(stmt: ast.stmt, overrides: dict[str, Any]) -> ast.stmt:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id in overrides:
        value = overrides[targets[0].id]
        literal = ast.parse(repr(value), mode="eval").body
        return ast.Assign(targets=[ast.Name(targets[0].id, ast.Store())], value=literal,
                          lineno=stmt.lineno)
    return stmt


class _Rename(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.Name:  # noqa: N802 - ast API
        if node.id == "Model":
            node.id = REFERENCE_CLASS
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:  # noqa: N802
        if node.name == "Model":
            node.name = REFERENCE_CLASS
        self.generic_visit(node)
        return node


def runtime_source() -> str:
    """runtime.py without its module docstring and import (the template imports torch itself)."""
    text = Path(inspect.getsourcefile(runtime)).read_text()
    tree = ast.parse(text)
    body = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    lines = text.splitlines()
    return "\n\n\n".join("\n".join(lines[s.lineno - 1: s.end_lineno]) for s in body) + "\n"


def render_value(value: Any, names: dict[int, str]) -> str:
    if isinstance(value, IRNode):
        return names.get(value.id, value.name)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(render_value(v, names) for v in value)
        return f"[{inner}]"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.memory_format):
        return str(value)
    if isinstance(value, torch.layout):
        return str(value)
    if isinstance(value, torch.device):
        raise Unsupported("a host op names a device")
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise Unsupported(f"cannot write the host argument {value!r}")


def host_line(node: IRNode, names: dict[int, str]) -> str:
    if node.target in _PY_SYMBOLS:
        a, b = (render_value(x, names) for x in node.args)
        return f"{node.name} = {a} {_PY_SYMBOLS[node.target]} {b}"
    if node.target is operator.neg:
        return f"{node.name} = -{render_value(node.args[0], names)}"
    target = node.target
    packet = target.overloadpacket.__name__
    overload = target._overloadname
    args = [render_value(a, names) for a in node.args]
    args += [f"{k}={render_value(v, names)}" for k, v in node.kwargs.items()]
    return f"{node.name} = torch.ops.aten.{packet}.{overload}({', '.join(args)})"


def input_line(node: IRNode, device_of: str = "") -> str | None:
    if node.op == "param":
        return f"{node.name} = self.get_parameter({node.target!r})"
    if node.op == "buffer":
        return f"{node.name} = self.get_buffer({node.target!r})"
    if node.op == "const" and node.params.get("value") is not None and device_of:
        device = f"{device_of}.device"
        return f"{node.name} = torch.tensor({node.params['value']!r}, dtype={node.dtype}, device={device})"
    if node.op == "const":
        return f"{node.name} = operator.attrgetter({node.target!r})(self)"
    return None


def forward_source(program: Program, groups: list[Group], launchers: dict[int, str]) -> str:
    """The body of ModelNew.forward: host lines in program order, each kernel launched just
    before the first use of one of its outputs."""
    group_of = {n.id: g for g in groups for n in g.nodes}
    launched: set[int] = set()
    lines: list[str] = []

    def ensure(node: Any) -> None:
        group = group_of.get(node.id) if isinstance(node, IRNode) else None
        if group is None or group.index in launched:
            return
        for dep in group.inputs + group.scalars:
            ensure(dep)
        launched.add(group.index)
        outs = ", ".join(o.name for o in group.outputs) + ("," if len(group.outputs) == 1 else "")
        args = ", ".join(x.name for x in group.inputs + group.scalars)
        lines.append(f"{outs} = {launchers[group.index]}({args})")

    for node in program.nodes:
        if node.kind == INPUT:
            line = input_line(node, program.user_inputs[0].name if program.user_inputs else "")
            if line:
                lines.append(line)
        elif node.kind == HOST:
            for arg in flat_args(node):
                ensure(arg)
            lines.append(host_line(node, {}))
    for out in program.outputs:
        ensure(out)
    values = [render_value(o, {}) for o in program.outputs]
    if program.single_output and len(values) == 1:
        lines.append(f"return {values[0]}")
    else:
        lines.append(f"return ({', '.join(values)}{',' if len(values) == 1 else ''})")
    return "\n".join(lines)


HEADER = '''"""kernelwright built-in template `{name}` for problem `{problem}`.

{description}

Generated by kernelwright.tune.library from the reference's ATen graph. The tunable parameters
are declared in KW_TUNE; the code reads them from KW_PARAMS. Tune it with
    kernelwright tune THIS_FILE --problem PROBLEM
"""
import math
import operator

import torch
import triton
import triton.language as tl

'''


def template_source(*, name: str, problem_name: str, description: str, kw_tune: dict, reference: str,
                    kernels: list[str], launchers: list[str], forward_args: list[str], forward_body: str) -> str:
    parts = [HEADER.format(name=name, problem=problem_name, description=description)]
    parts.append("KW_TUNE = " + pprint.pformat(kw_tune, width=110, sort_dicts=False) + "\n")
    parts.append('KW_PARAMS = dict(KW_TUNE["defaults"])\n\n')
    parts.append("# ---- runtime helpers " + "-" * 70 + "\n" + runtime_source() + "\n")
    parts.append("# ---- the reference model (ModelNew inherits its parameters) " + "-" * 31 + "\n")
    parts.append(reference + "\n\n")
    parts.append("# ---- kernels " + "-" * 78 + "\n")
    for kernel, launcher in zip(kernels, launchers, strict=False):
        parts.append(kernel + "\n\n" + launcher + "\n\n")
    body = "\n".join("        " + line for line in forward_body.splitlines())
    parts.append(f"class ModelNew({REFERENCE_CLASS}):\n")
    parts.append('    """The reference with a forward made of the generated kernels."""\n\n')
    parts.append(f"    def forward(self, {', '.join(forward_args)}):\n{body}\n")
    return "".join(parts)
