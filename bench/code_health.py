"""Code-health counts of a kernelwright checkout: modules and lines per folder, import cycles between
files, imports inside functions (of the project's own modules and of others), and private names
(`_name`) one module takes from another. The figures in docs/architecture.md ("Code health") come
from here.

    python bench/code_health.py                 # this checkout
    python bench/code_health.py --root DIR      # another checkout, e.g. `git worktree add DIR ef9bfcd`
    python bench/code_health.py --json

Cycles are strongly connected components of the file import graph, function-level imports included
(tests/import_graph.py: the graph tests/test_architecture.py checks, read by the same code).
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the import graph's one reader, shared with the architecture test

from import_graph import cycles, module_graph, private_names_taken, resolve  # noqa: E402 -- after the path


def modules(root: Path) -> dict[str, Path]:
    package = root / "kernelwright"
    return {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
            for p in sorted(package.rglob("*.py"))}


def function_level_imports(module: str, path: Path) -> tuple[int, int]:
    """(of the project's own modules, of others): the `from X import ...` statements inside functions."""
    own = other = 0

    def visit(node: ast.AST, in_function: bool) -> None:
        nonlocal own, other
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.ImportFrom):
                mine = resolve(module, path, child).startswith("kernelwright")
                own, other = own + mine, other + (not mine)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(path.read_text()), False)
    return own, other


def counts(root: Path) -> dict:
    mods = modules(root)
    per_folder: Counter = Counter()
    lines: Counter = Counter()
    inner_own = inner_other = 0
    for module, path in mods.items():
        parts = module.split(".")
        folder = parts[1] if len(parts) > 2 or (len(parts) == 2 and path.name == "__init__.py") else "(top)"
        per_folder[folder] += 1
        lines[folder] += len(path.read_text().splitlines())
        own, other = function_level_imports(module, path)
        inner_own, inner_other = inner_own + own, inner_other + other
    judge_folders = Counter(m.split(".")[2] if len(m.split(".")) > 3 else "(judge/)" for m in mods
                            if m.startswith("kernelwright.judge."))
    found = [sorted(c) for c in cycles(module_graph(root))]
    return {"modules": len(mods), "modules_per_folder": dict(sorted(per_folder.items())),
            "lines_per_folder": dict(sorted(lines.items())), "judge_modules_per_home": dict(sorted(judge_folders.items())),
            "cycles": sorted(found, key=len, reverse=True),
            "function_level_imports": {"own": inner_own, "other": inner_other},
            "private_names_imported": private_names_taken(root)}


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
