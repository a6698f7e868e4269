"""Templatize a reference that is a kernel already: the two-stage tuner's starting point.

A problem taken from a real project often brings its kernel (problem/reference.py): Triton
kernels, or a CUDA C++ extension. Its launch configuration, chosen once by its author for one GPU
and one size, is the first thing to tune. Without an LLM:

- `reference_candidate(source)` is the reference program as a candidate: `class ModelNew(Model)`
  runs the reference's own kernels (its default speedup is 1.0x, by construction);
- `templatize_reference(source, name)` makes that candidate a template (tune/template.py):
  * Triton: in every launch `kernel[grid](..., NAME=value, num_warps=value)` of a `@triton.jit`
    kernel the program defines, the keyword values whose name says they are a tile, block, vector,
    row-group or stage count (BLOCK, TILE, CHUNK, VEC, UNROLL, ROWS, ...) and the launch options
    `num_warps` / `num_stages` become parameters: an integer literal at the launch, or a name
    assigned once from an integer literal in the same function (or at module level), so a grid
    computed from the same name follows. A launch without `num_warps` gets it (Triton's default, 4).
  * CUDA: `constexpr int NAME = value;` and `#define NAME value` in the extension's source strings,
    for names of the same kinds (kThreads, BLOCK_SIZE, ...): the source string gets a placeholder
    that the candidate fills from KW_PARAMS before load_inline builds it (each instance is its own
    build: the build cache hashes the sources).
  Values that are powers of two get the powers of two from a quarter to four times the author's
  value (num_warps 1..16, num_stages 1..5); everything else stays as written (a block size computed
  from the problem's sizes is the kernel's semantics, not its tuning).

The default instance is the reference unchanged; every instance is judged like any candidate, so a
value the kernel cannot take fails there and the search moves on. `NoTemplate` says why a
reference offers nothing to tune.
"""
from __future__ import annotations

import ast
import pprint
import re
from dataclasses import dataclass, field

from ..problem.reference import scan_source
from .library import NoTemplate
from .template import PARAMS_NAME, TUNE_NAME, Template, parse_template

TUNABLE = re.compile(r"BLOCK|TILE|CHUNK|VEC|UNROLL|ROWS|COLS|THREADS|WARPS|GROUP_SIZE|SPLIT|PER_PROG|STAGES", re.I)
LAUNCH_OPTIONS = {"num_warps": [1, 2, 4, 8, 16], "num_stages": [1, 2, 3, 4, 5]}
TRITON_DEFAULT_WARPS = 4
MAX_VALUE = 16384
CANDIDATE_CLASS = '''

class ModelNew(Model):
    """The reference's own kernels as a candidate (kernelwright.tune.from_reference)."""
'''
_CUDA_CONST = re.compile(r"(constexpr\s+(?:unsigned\s+)?int\s+(\w+)\s*=\s*)(\d+)(\s*;)|(#define\s+(\w+)\s+)(\d+)\b")


@dataclass
class ReferenceTemplate:
    """A template of the reference's own kernels; `groups` has one line per tuned kernel."""

    template: Template
    groups: list[str] = field(default_factory=list)


@dataclass
class _Edit:
    start: int  # byte offsets into the source
    end: int
    text: str


@dataclass
class _Param:
    name: str
    value: int
    domain: list[int]
    group: str


def reference_candidate(source: str) -> str:
    """The reference program as a candidate whose ModelNew runs the reference's own kernels."""
    if "class ModelNew" in source:
        return source
    return source.rstrip("\n") + "\n" + CANDIDATE_CLASS


def templatize_reference(source: str, name: str = "reference") -> ReferenceTemplate:
    """A template of the reference's launch configuration; NoTemplate when it has none to tune."""
    info = scan_source(source)
    if info.kind == "torch":
        raise NoTemplate("the reference runs PyTorch ops, not kernels of its own: use the template library")
    candidate = reference_candidate(source)
    tree = ast.parse(candidate)
    raw = candidate.encode()
    offsets = _line_offsets(raw)
    if info.kind == "triton":
        params, edits = _triton_sites(tree, offsets, set(info.triton_kernels))
    else:
        params, edits = _cuda_sites(tree, offsets, raw)
    if not params:
        what = "launch options or integer tile sizes" if info.kind == "triton" else "integer constants"
        raise NoTemplate(f"the reference's {info.kind} kernels have no {what} that could be tuned")
    text = _apply(raw, edits).decode()
    text = _insert_declaration(text, tree, params, info.kind, name)
    groups = sorted({p.group for p in params}, key=[p.group for p in params].index)
    template = parse_template(text, name=f"{name}_reference")
    label = {"": ", ".join(info.cuda_kernels) or "extension"}
    lines = [f"{label.get(g, g.rstrip('_'))}: " + ", ".join(f"{p.name}={p.value}" for p in params if p.group == g)
             for g in groups]
    return ReferenceTemplate(template, lines)


# ---------------------------------------------------------------- Triton launches


def _triton_sites(tree: ast.Module, offsets: list[int], kernels: set[str]) -> tuple[list[_Param], list[_Edit]]:
    params: list[_Param] = []
    edits: list[_Edit] = []
    claimed: dict[tuple[int, int], str] = {}  # literal span -> parameter that owns it
    seen: dict[str, int] = {}
    for scope, call in _launches(tree, kernels):
        kernel = call.func.value.id
        seen[kernel] = seen.get(kernel, 0) + 1
        group = f"{kernel}_" if seen[kernel] == 1 else f"{kernel}{seen[kernel]}_"
        names = {kw.arg for kw in call.keywords}
        for kw in call.keywords:
            if kw.arg is None or not (kw.arg in LAUNCH_OPTIONS or TUNABLE.search(kw.arg)):
                continue
            literal = _literal_for(kw.value, scope, tree)
            if literal is None:
                continue
            span = (literal.lineno, literal.col_offset)
            if span in claimed:  # a variable shared by two launches: one parameter
                continue
            domain = _domain(kw.arg, literal.value)
            if domain is None:
                continue
            param = _Param(group + kw.arg, literal.value, domain, group)
            claimed[span] = param.name
            params.append(param)
            edits.append(_Edit(_offset(offsets, literal.lineno, literal.col_offset),
                               _offset(offsets, literal.end_lineno, literal.end_col_offset),
                               f'{PARAMS_NAME}["{param.name}"]'))
        if "num_warps" not in names and None not in names:  # (a **kwargs launch may carry num_warps)
            param = _Param(group + "num_warps", TRITON_DEFAULT_WARPS, LAUNCH_OPTIONS["num_warps"], group)
            params.append(param)
            edits.append(_insertion(call, offsets, f'num_warps={PARAMS_NAME}["{param.name}"]'))
    return params, edits


def _launches(tree: ast.Module, kernels: set[str]):
    """(enclosing function or None, call) for every `kernel[grid](...)` launch, in source order."""
    found = []

    def visit(node: ast.AST, scope):
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Subscript)
                    and isinstance(child.func.value, ast.Name) and child.func.value.id in kernels):
                found.append((scope, child))
            visit(child, inner)

    visit(tree, None)
    return sorted(found, key=lambda pair: (pair[1].lineno, pair[1].col_offset))


def _literal_for(value: ast.AST, scope, tree: ast.Module) -> ast.Constant | None:
    """The integer literal a launch keyword's value is: itself, or the one assignment of its name."""
    if _is_int(value):
        return value
    if not isinstance(value, ast.Name):
        return None
    for body in ([scope] if scope is not None else []) + [tree]:
        assigned = _assignments(body, value.id, top_level=body is tree)
        if assigned:
            return assigned[0].value if len(assigned) == 1 and _is_int(assigned[0].value) else None
    return None


def _assignments(node: ast.AST, name: str, top_level: bool) -> list[ast.Assign]:
    nodes = node.body if top_level else list(ast.walk(node))
    return [n for n in nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name]


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _domain(name: str, value: int) -> list[int] | None:
    if name in LAUNCH_OPTIONS:
        domain = list(LAUNCH_OPTIONS[name])
        return domain if value in domain else sorted(set(domain) | {value})
    if value < 1 or value & (value - 1):
        return None  # not a power of two: likely semantics, leave it
    low = 32 if "THREAD" in name.upper() else 1
    high = 1024 if "THREAD" in name.upper() else MAX_VALUE
    domain = [v for v in (value >> 2, value >> 1, value, value << 1, value << 2) if low <= v <= high]
    return domain if value in domain and len(domain) > 1 else None


def _insertion(call: ast.Call, offsets: list[int], text: str) -> _Edit:
    """An edit adding keyword `text` before the call's closing parenthesis."""
    end = _offset(offsets, call.end_lineno, call.end_col_offset) - 1  # the ")"
    args = call.args + [kw.value for kw in call.keywords]
    if not args:
        return _Edit(end, end, text)
    last = max(args, key=lambda a: (a.end_lineno, a.end_col_offset))
    after = _offset(offsets, last.end_lineno, last.end_col_offset)
    return _Edit(after, after, ", " + text)


# ---------------------------------------------------------------- CUDA sources


def _cuda_sites(tree: ast.Module, offsets: list[int], raw: bytes) -> tuple[list[_Param], list[_Edit]]:
    params: list[_Param] = []
    edits: list[_Edit] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value):
            continue
        start = _offset(offsets, node.lineno, node.col_offset)
        end = _offset(offsets, node.end_lineno, node.end_col_offset)
        literal = raw[start:end].decode()
        fills = []
        for match in _CUDA_CONST.finditer(literal):
            const, digits = (match.group(2), match.group(3)) if match.group(2) else (match.group(6), match.group(7))
            domain = _domain(const, int(digits))
            if not TUNABLE.search(const) or domain is None or any(p.name == const for p in params):
                continue
            params.append(_Param(const, int(digits), domain, ""))
            number = match.start(3) if match.group(2) else match.start(7)
            place = start + len(literal[:number].encode())
            edits.append(_Edit(place, place + len(digits), f"@KW_{const}@"))
            fills.append(f'.replace("@KW_{const}@", str({PARAMS_NAME}["{const}"]))')
        if fills:
            edits.append(_Edit(start, start, "("))
            edits.append(_Edit(end, end, ")" + "".join(fills)))
    return params, edits


# ---------------------------------------------------------------- text edits


def _line_offsets(raw: bytes) -> list[int]:
    starts = [0]
    for index, byte in enumerate(raw):
        if byte == 0x0A:
            starts.append(index + 1)
    return starts


def _offset(offsets: list[int], line: int, col: int) -> int:
    """Byte offset of an AST position (1-based line, UTF-8 byte column)."""
    return offsets[line - 1] + col


def _apply(raw: bytes, edits: list[_Edit]) -> bytes:
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        raw = raw[:edit.start] + edit.text.encode() + raw[edit.end:]
    return raw


def _insert_declaration(text: str, tree: ast.Module, params: list[_Param], backend: str, name: str) -> str:
    """KW_TUNE and KW_PARAMS after the module's imports (before any code that reads them)."""
    groups = list(dict.fromkeys(p.group for p in params))
    decl = {
        "name": f"{name}_reference",
        "backend": "cuda" if backend == "cuda" else "triton",
        "params": {p.name: p.domain for p in params},
        "defaults": {p.name: p.value for p in params},
        "meta": {"origin": "the reference's own kernels (kernelwright.tune.from_reference)",
                 **({"groups": groups} if len(groups) > 1 else {})},
    }
    block = (f"\n# launch configuration of the reference's own kernels, as tunable parameters\n"
             f"{TUNE_NAME} = {pprint.pformat(decl, width=110, sort_dicts=False)}\n"
             f"{PARAMS_NAME} = dict({TUNE_NAME}[\"defaults\"])\n")
    imports = [n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    after = max(imports) if imports else 0
    lines = text.splitlines(keepends=True)
    return "".join(lines[:after]) + block + "".join(lines[after:])
