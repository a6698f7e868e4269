"""Kernel templates: an ordinary candidate file whose tunable parameters are declared.

A template is a Python candidate (it defines `ModelNew`) with two module-level assignments:

    KW_TUNE = {
        "params": {"BLOCK": [256, 512, 1024], "num_warps": [2, 4, 8]},
        "constraints": ["BLOCK >= num_warps * WARP_SIZE"],
        "defaults": {"BLOCK": 1024, "num_warps": 4},
        "sizes": {"N": 4096},          # optional: problem sizes the constraints may use
        "backend": "triton",           # optional: "triton" (default) or "cuda"
    }
    KW_PARAMS = dict(KW_TUNE["defaults"])

and code that reads its parameters from `KW_PARAMS`. `instantiate()` replaces the `KW_PARAMS`
statement by a literal dict, so an instance is a standalone candidate the judge checks like any
other. KW_TUNE is read with `ast.literal_eval`: parsing a template never runs its code.
Parameter domains are lists of values, or dicts (tune/params.py): ``{"values": [...]}``,
``{"choice": [...]}`` (categorical), ``{"range": [lo, hi], "step": s}``, ``{"pow2": [lo, hi]}`` (both
inclusive), with an optional ``kind`` and an activity condition ``when`` (with its ``off`` value).
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

from .constraints import FUNCTIONS, Constraint, ConstraintError, parse_constraint
from .hardware import LIMIT_NAMES
from .params import MAX_DOMAIN, PARAM_KINDS, ParamSpec, SpaceError, activity_constraint, infer_kind, parse_param

TUNE_NAME, PARAMS_NAME = "KW_TUNE", "KW_PARAMS"
BACKENDS = ("triton", "cuda")
__all__ = ["MAX_DOMAIN", "ParamSpec", "Template", "TemplateError", "config_key", "load_template", "parse_template",
           "vocabulary"]


def vocabulary() -> dict[str, Any]:
    """What a declaration may use, for whoever explains the format (the Templatizer's prompt):
    parameter kinds, the device-limit names and the functions constraints may call."""
    return {"kinds": dict(PARAM_KINDS), "limits": list(LIMIT_NAMES), "functions": list(FUNCTIONS)}


_KNOWN_KEYS = {"params", "constraints", "defaults", "sizes", "backend", "name", "meta"}


class TemplateError(ValueError):
    """A template that cannot be used; the message says what to fix (it may go back to an LLM)."""


@dataclass
class Template:
    source: str
    params: dict[str, tuple]  # name -> domain, in declaration order
    defaults: dict[str, Any]
    constraints: list[Constraint] = field(default_factory=list)
    sizes: dict[str, Any] = field(default_factory=dict)
    backend: str = "triton"
    name: str = "template"
    meta: dict[str, Any] = field(default_factory=dict)
    params_span: tuple[int, int] = (0, 0)  # 1-based first and last line of the KW_PARAMS statement
    specs: dict[str, ParamSpec] = field(default_factory=dict)  # kind, categorical, when (tune/params.py)

    def spec(self, name: str) -> ParamSpec:
        return self.specs.get(name) or ParamSpec(kind=infer_kind(name))

    @property
    def categorical(self) -> set[str]:
        """Parameters whose values have no order (the samplers treat them as categories)."""
        return {n for n, values in self.params.items()
                if self.spec(n).categorical or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                       for v in values)}

    def kinds(self) -> dict[str, str]:
        """Parameter -> its kind (tune/params.PARAM_KINDS)."""
        return {n: self.spec(n).kind for n in self.params}

    @property
    def hash(self) -> str:
        """Identity of the template for caching: any change to its text changes it."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @property
    def space_size(self) -> int:
        size = 1
        for values in self.params.values():
            size *= len(values)
        return size

    def instantiate(self, params: dict[str, Any] | None = None) -> str:
        """Candidate source with KW_PARAMS fixed to `params` (missing names take their default)."""
        chosen = self.complete(params or {})
        lines = self.source.splitlines(keepends=True)
        first, last = self.params_span
        literal = ", ".join(f"{k!r}: {v!r}" for k, v in chosen.items())
        statement = f"{PARAMS_NAME} = {{{literal}}}  # instance of template {self.name} ({self.hash})\n"
        return "".join(lines[: first - 1]) + statement + "".join(lines[last:])

    def default_instance(self) -> str:
        return self.instantiate(self.defaults)

    def restrict(self, fixed: dict[str, Any] | None = None, domains: dict[str, list] | None = None) -> "Template":
        """The same template over a smaller space: `fixed` pins parameters to one value, `domains`
        narrows others (to values of their declared domain). Source and hash are unchanged, so
        cached measurements still apply."""
        params = dict(self.params)
        defaults = dict(self.defaults)
        for name, values in (domains or {}).items():
            narrowed = tuple(v for v in values if v in self.params.get(name, ()))
            if name not in self.params or not narrowed:
                domain = list(self.params.get(name, ()))
                raise TemplateError(f"cannot narrow {name} to {values}: not in its domain {domain}")
            params[name] = narrowed
            if defaults[name] not in narrowed:
                defaults[name] = narrowed[0]
        for name, value in (fixed or {}).items():
            if name not in self.params or value not in self.params[name]:
                raise TemplateError(f"cannot fix {name}={value!r}: not in its domain")
            params[name], defaults[name] = (value,), value
        return dataclasses.replace(self, params=params, defaults=defaults)

    @property
    def groups(self) -> list[str]:
        """Parameter-name prefixes of independently tunable kernels (library templates), else [""]."""
        prefixes = [p for p in self.meta.get("groups", []) if isinstance(p, str)]
        return prefixes if len(prefixes) > 1 else [""]

    def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        """`params` checked against the domains, with defaults filled in, in declaration order."""
        unknown = set(params) - set(self.params)
        if unknown:
            raise TemplateError(f"unknown parameter(s) {', '.join(sorted(unknown))}; "
                                f"the template declares {', '.join(self.params)}")
        chosen = {}
        for name, domain in self.params.items():
            value = params.get(name, self.defaults[name])
            if value not in domain:
                raise TemplateError(f"{name}={value!r} is outside its domain {list(domain)}")
            chosen[name] = value
        return chosen


def config_key(params: dict[str, Any]) -> str:
    """Canonical text of a configuration: the key of caches and measured tables."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def parse_template(source: str, name: str = "template") -> Template:
    """Read the declaration of a template without running it; TemplateError says what is wrong."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TemplateError(f"the template is not valid Python (line {exc.lineno}: {exc.msg})") from None
    tune_node = _single_assignment(tree, TUNE_NAME)
    params_node = _single_assignment(tree, PARAMS_NAME)
    try:
        decl = ast.literal_eval(tune_node.value)
    except (ValueError, SyntaxError, TypeError):
        raise TemplateError(f"{TUNE_NAME} must be a literal dict (numbers, strings, lists, dicts only), "
                            f"line {tune_node.lineno}") from None
    if not isinstance(decl, dict):
        raise TemplateError(f"{TUNE_NAME} must be a dict, got {type(decl).__name__}")
    unknown = set(decl) - _KNOWN_KEYS
    if unknown:
        raise TemplateError(f"{TUNE_NAME} has unknown key(s) {', '.join(sorted(unknown))}; "
                            f"known: {', '.join(sorted(_KNOWN_KEYS))}")
    _check_whole_lines(source, params_node)
    if not _reads_params(tree, params_node):
        raise TemplateError(f"the code never reads {PARAMS_NAME}, so every instance would be the same kernel")
    params, specs = _params(_dict(decl, "params"))
    sizes = _dict(decl, "sizes", required=False)
    defaults = _defaults(_dict(decl, "defaults"), params)
    constraints = _constraints(decl.get("constraints", []) or [], params, specs, sizes)
    backend = decl.get("backend", "triton")
    if backend not in BACKENDS:
        raise TemplateError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return Template(
        source=source, params=params, defaults=defaults, constraints=constraints, sizes=dict(sizes),
        backend=backend, name=str(decl.get("name") or name), meta=dict(decl.get("meta") or {}),
        params_span=(params_node.lineno, params_node.end_lineno), specs=specs,
    )


def _params(declared: dict) -> tuple[dict[str, tuple], dict[str, ParamSpec]]:
    params, specs = {}, {}
    for name, spec in declared.items():
        try:
            params[name], specs[name] = parse_param(name, spec)
        except SpaceError as exc:
            raise TemplateError(str(exc)) from None
    if not params:
        raise TemplateError(f"{TUNE_NAME}['params'] declares no parameter")
    return params, specs


def _constraints(texts: list, params: dict[str, tuple], specs: dict[str, ParamSpec],
                 sizes: dict) -> list[Constraint]:
    """The declared constraints, then one per conditional parameter (`when`), each checked: known
    names only, no condition on the parameter it switches, no constraint that holds for no
    configuration whatever the parameters."""
    if not isinstance(texts, list):
        raise TemplateError(f"{TUNE_NAME}['constraints'] must be a list of expressions")
    known = set(params) | set(sizes) | set(LIMIT_NAMES)
    found = []
    for text in texts:
        try:
            constraint = parse_constraint(text, known)
        except ConstraintError as exc:
            raise TemplateError(str(exc)) from None
        if not constraint.names & set(params) and not constraint.names - set(sizes):
            holds, why = constraint.check(dict(sizes))
            if not holds:  # depends on the sizes alone and is false: the space is empty
                raise TemplateError(f"constraint {constraint.text!r} involves no parameter and is false at the "
                                    f"declared sizes ({why}), so it removes every configuration")
        found.append(constraint)
    for name, spec in specs.items():
        text = activity_constraint(name, spec)
        if text is None:
            continue
        try:
            condition = parse_constraint(spec.when, known)
        except ConstraintError as exc:
            raise TemplateError(f"parameter {name}: its 'when' is not usable: {exc}") from None
        if name in condition.names:
            raise TemplateError(f"parameter {name}: its 'when' ({spec.when!r}) names {name} itself; it must "
                                "depend on other parameters, the sizes or the device limits")
        found.append(parse_constraint(text, known))
    return found


def load_template(path) -> Template:
    path = Path(path)
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"cannot read template {path}: {exc}") from None
    return parse_template(source, name=path.stem)


def _single_assignment(tree: ast.Module, target: str) -> ast.Assign:
    found = [
        node for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name) and node.targets[0].id == target
    ]
    if len(found) != 1:
        what = "none" if not found else f"{len(found)}"
        raise TemplateError(f"a template needs exactly one module-level assignment `{target} = ...`; found {what}")
    return found[0]


def _check_whole_lines(source: str, node: ast.Assign) -> None:
    lines = source.splitlines()
    last = lines[node.end_lineno - 1]
    if node.col_offset != 0 or last[node.end_col_offset:].split("#")[0].strip():
        raise TemplateError(f"`{PARAMS_NAME} = ...` must stand on its own line(s) (line {node.lineno})")


def _reads_params(tree: ast.Module, params_node: ast.Assign) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == PARAMS_NAME and isinstance(node.ctx, ast.Load):
            return True
    return False


def _dict(decl: dict, key: str, required: bool = True) -> dict:
    value = decl.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise TemplateError(f"{TUNE_NAME}[{key!r}] must be a dict")
    return value


def _defaults(defaults: dict, params: dict[str, tuple]) -> dict:
    missing = [p for p in params if p not in defaults]
    if missing:
        raise TemplateError(f"{TUNE_NAME}['defaults'] lacks {', '.join(missing)}: the default instance "
                            "must reproduce the original kernel, so every parameter needs its original value")
    extra = set(defaults) - set(params)
    if extra:
        raise TemplateError(f"defaults name undeclared parameter(s) {', '.join(sorted(extra))}")
    for name, value in defaults.items():
        if value not in params[name]:
            raise TemplateError(f"default {name}={value!r} is not in its domain {list(params[name])}")
    return {name: defaults[name] for name in params}
