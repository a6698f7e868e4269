"""Code-health counts of a kernelwright checkout: modules and lines per folder, import cycles between
files, imports inside functions (of the project's own modules and of others), and private names
(`_name`) one module takes from another. The figures in docs/architecture.md ("Code health") come
from here.

    python bench/code_health.py                 # this checkout
    python bench/code_health.py --root DIR      # another checkout, e.g. `git worktree add DIR ef9bfcd`
    python bench/code_health.py --json

Cycles are strongly connected components of the file import graph, function-level imports included
(the same graph tests/test_architecture.py checks).
"""
from __future__ import annotations

import argparse
import ast
import json
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def modules(root: Path) -> dict[str, Path]:
    package = root / "kernelwright"
    return {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
            for p in sorted(package.rglob("*.py"))}


def resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative levels resolved against `module`)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str, path: Path) -> list[tuple[str, list[str], bool]]:
    """(imported module, names taken from it, inside a function) for every import in the file."""
    tree = ast.parse(path.read_text())
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, [], in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = resolve(module, path, child)
                names = [alias.name for alias in child.names]
                found.append((base, names, in_function))
                found.extend((f"{base}.{n}", [], in_function) for n in names)  # `from pkg import module`
            visit(child, inner)

    visit(tree, False)
    return found


def counts(root: Path) -> dict:
    mods = modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    per_folder: Counter = Counter()
    lines: Counter = Counter()
    inner_own = inner_other = 0
    private: list[str] = []
    for module, path in mods.items():
        parts = module.split(".")
        folder = parts[1] if len(parts) > 2 or (len(parts) == 2 and path.name == "__init__.py") else "(top)"
        per_folder[folder] += 1
        lines[folder] += len(path.read_text().splitlines())
        for target, names, in_function in imports(module, path):
            own = target.startswith("kernelwright")
            if own and target in mods and target != module and not module.startswith(target + "."):
                graph[module].add(target)
            if in_function and names:
                inner_own += own
                inner_other += not own
            if own and target in mods and target != module:
                private += [f"{module} <- {target}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
    judge_folders = Counter(m.split(".")[2] if len(m.split(".")) > 3 else "(judge/)" for m in mods
                            if m.startswith("kernelwright.judge."))
    found = [sorted(c) for c in scc(graph) if len(c) > 1]
    return {"modules": len(mods), "modules_per_folder": dict(sorted(per_folder.items())),
            "lines_per_folder": dict(sorted(lines.items())), "judge_modules_per_home": dict(sorted(judge_folders.items())),
            "cycles": [[m.removeprefix("kernelwright.") for m in c] for c in sorted(found, key=len, reverse=True)],
            "function_level_imports": {"own": inner_own, "other": inner_other},
            "private_names_imported": sorted(private)}


def scc(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on.discard(member)
                    component.add(member)
                    if member == node:
                        break
                out.append(component)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout to count (default: this one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = counts(args.root.resolve())
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"modules: {result['modules']}")
    print("per folder (modules / lines): " + ", ".join(f"{k} {v}/{result['lines_per_folder'][k]}"
                                                       for k, v in result["modules_per_folder"].items()))
    print("judge/ homes: " + ", ".join(f"{k} {v}" for k, v in result["judge_modules_per_home"].items()))
    print(f"import cycles: {len(result['cycles'])} (" + "; ".join(f"{len(c)} files" for c in result["cycles"]) + ")")
    for cycle in result["cycles"]:
        print("  " + " <-> ".join(cycle))
    inner = result["function_level_imports"]
    print(f"imports inside functions: {inner['own'] + inner['other']} ({inner['own']} of the project's own modules)")
    print(f"private names taken from another module: {len(result['private_names_imported'])}")


if __name__ == "__main__":
    main()
