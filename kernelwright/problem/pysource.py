"""Names in Python source, read from its syntax tree: the one home of the helpers every static
scan of a program shares (the judge's candidate scan, the agents' code check, the reference scan).
Stdlib only.
"""
from __future__ import annotations

import ast


def attribute_chain(node: ast.AST) -> str:
    """`a.b.c` for an attribute chain; when the chain does not start at a name (`f().b.c`), the
    attributes it has (`b.c`): scans that must not miss a forbidden attribute read this one."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def dotted_name(node: ast.AST) -> str:
    """`a.b.c` for an attribute chain that starts at a name or a name itself; '' for anything else."""
    base = node
    while isinstance(base, ast.Attribute):
        base = base.value
    return attribute_chain(node) if isinstance(base, ast.Name) else ""


def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local names bound by imports anywhere in `tree`: `from torch import compile as c` makes c mean
    torch.compile, `import a.b` binds `a`, `import a.b as c` makes c mean a.b."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
    return names


def imported_modules(tree: ast.AST) -> set[str]:
    """The modules `tree` imports (`import a.b` -> a.b, `from a import b` -> a)."""
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def qualified(text: str, aliases: dict[str, str]) -> str:
    """`text` (a dotted name) with its first part replaced by what it was imported as."""
    head, _, rest = text.partition(".")
    return aliases.get(head, head) + (f".{rest}" if rest else "")
