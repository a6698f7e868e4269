"""What a candidate's (or problem's) source is made of, read without running it.

`backend_of` tells the pool whether precompiling is worth a process (only C++/CUDA extensions
build ahead of the first call; Triton compiles at launch). `scan` finds constructs that an honest
kernel never needs: handing the work to torch.compile, or reaching into the judge's memory (gc,
stack frames) where reference outputs live. It reads the syntax tree, so comments and strings do
not trigger it. `missing_names` lets the judge answer an unparsable file, or one without
`ModelNew`, at once instead of starting a worker process for it.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from ..problem.pysource import attribute_chain, import_aliases, qualified
from .checks import flag_code

# dotted prefixes -> (the judge check that finds them, why); checks.CHECKS says the flag each raises
_FORBIDDEN = {
    "torch.compile": ("source_torch_compile", "torch.compile hands the work to inductor, which writes the kernels"),
    "torch._dynamo": ("source_torch_compile", "torch._dynamo hands the work to inductor, which writes the kernels"),
    "torch._inductor": ("source_torch_compile", "torch._inductor writes the kernels, not the candidate"),
    "gc.get_objects": ("source_introspection", "gc.get_objects can find the judge's reference outputs"),
    "gc.get_referrers": ("source_introspection", "gc.get_referrers can find the judge's reference outputs"),
    "sys._getframe": ("source_introspection", "stack frames expose the judge's local variables"),
    "inspect.currentframe": ("source_introspection", "stack frames expose the judge's local variables"),
    "inspect.stack": ("source_introspection", "stack frames expose the judge's local variables"),
    "inspect.getouterframes": ("source_introspection", "stack frames expose the judge's local variables"),
}
_FRAME_ATTRS = {"f_back", "f_locals", "f_globals"}


@dataclass
class Finding:
    check: str  # "source_torch_compile" or "source_introspection" (checks.CHECKS)
    line: int
    what: str
    why: str

    @property
    def code(self) -> str:
        """The flag code it raises (the check's, in checks.CHECKS)."""
        return flag_code(self.check)


def backend_of(source: str) -> str:
    """'cuda' (a C++/CUDA extension), 'triton', or 'torch' (neither)."""
    if "load_inline" in source or "cpp_extension" in source:
        return "cuda"
    if "triton" in source:
        return "triton"
    return "torch"


def scan(source: str) -> list[Finding]:
    """Forbidden constructs with their line; an unparsable source yields none (load reports it)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    aliases = import_aliases(tree)
    findings, seen = [], set()
    for node in ast.walk(tree):
        what = _resolve(node, aliases)
        if what is None:
            continue
        key = (what, node.lineno)
        if key in seen:
            continue
        seen.add(key)
        check, why = _classify(what)
        findings.append(Finding(check, node.lineno, what, why))
    return sorted(findings, key=lambda f: f.line)


def _resolve(node: ast.AST, aliases: dict[str, str]) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS:
        return f"frame.{node.attr}"
    if isinstance(node, ast.ImportFrom) and node.module:
        dotted = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
    elif isinstance(node, ast.Import):
        dotted = [a.name for a in node.names]
    elif isinstance(node, (ast.Attribute, ast.Name)):
        text = attribute_chain(node)
        dotted = [qualified(text, aliases)] if text else []
    else:
        return None
    for name in dotted:
        for prefix in _FORBIDDEN:
            if name == prefix or name.startswith(prefix + "."):
                return prefix
    return None


def _classify(what: str) -> tuple[str, str]:
    if what.startswith("frame."):
        return "source_introspection", f"{what[6:]} exposes the judge's stack frames and their variables"
    return _FORBIDDEN[what]


def missing_names(label: str, source: str, names: tuple[str, ...], what: str) -> str | None:
    """One paragraph naming file and line when `source` does not parse or binds none of `names`
    at module level; None when it looks loadable (the worker finds everything else)."""
    try:
        tree = ast.parse(source, filename=label)
    except SyntaxError as exc:
        return f"{label}, line {exc.lineno}: syntax error: {exc.msg}"
    bound = _module_bindings(tree.body)
    if bound is None:  # star imports or globals() tricks: only running it can tell
        return None
    missing = [n for n in names if n not in bound]
    if not missing:
        return None
    if names == ("ModelNew",):
        return f"{label}: the candidate must define class ModelNew"
    return f"{label}: {what} must define {', '.join(names)}; missing: {', '.join(missing)}"


def _module_bindings(body: list[ast.stmt]) -> set[str] | None:
    names: set[str] = set()
    for stmt in body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in stmt.names):
                return None
            names |= {alias.asname or alias.name.split(".")[0] for alias in stmt.names}
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for block in _blocks(stmt):
                inner = _module_bindings(block)
                if inner is None:
                    return None
                names |= inner
        elif "globals" in ast.dump(stmt) or "setattr" in ast.dump(stmt) or "exec" in ast.dump(stmt):
            return None
    return names


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [getattr(stmt, "body", []), getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
    blocks += [handler.body for handler in getattr(stmt, "handlers", [])]
    return blocks
