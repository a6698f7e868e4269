"""The package's import graph, read from every module's syntax tree (imports inside functions
included), for the two places that judge it: tests/test_architecture.py (the import rules, no new
cycles, no private names across modules) and bench/code_health.py (the counts in
docs/architecture.md). One reader, so the test and the counts see the same graph.

Stdlib only; every function takes the checkout's root, so the bench can count another checkout.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_of(path: Path, root: Path = ROOT) -> list[str]:
    """["kernelwright", "judge", "api"] for kernelwright/judge/api.py (a package's __init__: the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports_of(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every kernelwright import in the file, at any depth."""
    module = module_of(path, root)
    package = module if path.name == "__init__.py" else module[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            # `from kernelwright import envvars` imports a module: name it
            folder = root / base.replace(".", "/")
            found += [(node.lineno, f"{base}.{a.name}" if (folder / a.name).is_dir() or (folder / f"{a.name}.py").exists()
                       else base) for a in node.names]
    found = [(line, name) for line, name in found if name == "kernelwright" or name.startswith("kernelwright.")]
    return sorted(set(found))


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the package modules it imports (function-level imports included); a package's own
    __init__ imported by its submodules is not an edge (Python runs it first anyway)."""
    paths = {".".join(module_of(p, root)[1:]): p for p in (root / "kernelwright").rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in paths}
    for module, path in paths.items():
        for _, name in imports_of(path, root):
            parts = name.split(".")[1:]
            while parts and ".".join(parts) not in paths:
                parts.pop()
            target = ".".join(parts)
            if target and target != module and not module.startswith(target + "."):
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def private_names_taken(root: Path = ROOT) -> list[str]:
    """`path:line module._name` for each private name (one leading underscore) that a module takes
    from another of the package: `from .x import _f`, or `x._f` where `x` names a package module."""
    paths = {".".join(module_of(p, root)): p for p in (root / "kernelwright").rglob("*.py")}
    paths = {m.removesuffix(".__init__"): p for m, p in paths.items()}
    found = []
    for module, path in paths.items():
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = resolve(module, path, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in paths:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif base in paths and base != module and private(alias.name):
                        found.append(f"{path.relative_to(root)}:{node.lineno} {base}.{alias.name}")
            elif isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in paths})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and private(node.attr)
                    and aliases.get(node.value.id, module) != module):
                found.append(f"{path.relative_to(root)}:{node.lineno} {aliases[node.value.id]}.{node.attr}")
    return sorted(found)


def private(name: str) -> bool:
    """One leading underscore: the name is its module's own."""
    return name.startswith("_") and not name.startswith("__")


def resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative levels resolved against `module`)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))
