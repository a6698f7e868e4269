"""The reference's `Model` copied into the seed file, with the imports, classes, functions and
constants it needs, so that `ModelNew(Model)` builds the same layers in the same order: under the
judge's seed it then holds the same weights as the reference (docs/judge.md, rule `interface`).

Constants are written with the values the problem was loaded with (size overrides and the CPU
shrink applied), the sizes inductor compiled the kernels for.
"""
from __future__ import annotations

import ast

from .types import SeedError

PROBLEM_ONLY = {"get_inputs", "get_init_inputs"}
_LITERALS = (int, float, str, bool, type(None))


def reference_source(problem, reserved: set[str]) -> str:
    """The problem's imports, then its constants, classes and functions that `Model` may use."""
    try:
        tree = ast.parse(problem.source)
    except SyntaxError as exc:
        raise SeedError(f"the problem does not parse: {exc}") from exc
    source = problem.source
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    defs = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name not in PROBLEM_ONLY]
    if not any(isinstance(n, ast.ClassDef) and n.name == "Model" for n in defs):
        raise SeedError("the problem defines Model other than as a top-level class statement; the seed copies that "
                        "statement to build the same weights")
    clash = sorted({n.name for n in defs} & reserved)
    if clash:
        raise SeedError(f"the problem defines {', '.join(clash)}, a name the seed file uses for its own code")
    used = {n.id for d in defs for n in ast.walk(d) if isinstance(n, ast.Name)}
    constants = [_constant(problem, node, source) for node in tree.body if _assigns(node) & used]
    parts = [ast.get_source_segment(source, n) for n in imports] + [""] + [c for c in constants if c]
    parts += ["", ""] + ["\n\n".join(_with_decorators(source, d) for d in defs)]
    return "\n".join(parts).strip() + "\n"


def _assigns(node: ast.stmt) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _constant(problem, node: ast.stmt, source: str) -> str:
    """`name = value` with the loaded value where it is a literal (overrides and shrink applied)."""
    names = sorted(_assigns(node))
    values = [getattr(problem.module, name, None) for name in names]
    if names and all(_is_literal(v) and v == values[0] for v in values):  # `height = width = 128` too
        return f"{' = '.join(names)} = {values[0]!r}"
    return ast.get_source_segment(source, node) or ""


def _is_literal(value) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_is_literal(v) for v in value)
    return isinstance(value, _LITERALS)


def _with_decorators(source: str, node: ast.ClassDef | ast.FunctionDef) -> str:
    lines = source.splitlines()
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return "\n".join(lines[start - 1:node.end_lineno])
