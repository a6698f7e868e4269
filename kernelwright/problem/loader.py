"""Load KernelBench-format problem files and candidate files.

A problem file is re-executed statement by statement so that a size override is applied right
after the statement that assigns it: constants derived later in the file (``bias_shape`` built from
``out_channels``) follow the override, and a later re-assignment is overridden again.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .errors import ProblemError, wrap

if TYPE_CHECKING:  # shrink.py imports torch at import time: imported when shrinking
    from .shrink import ShrinkBudget

REQUIRED_PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")


@dataclass
class Problem:
    """A loaded problem: the module with overrides applied, and what was overridden."""

    path: Path
    source: str
    module: types.ModuleType
    overrides: dict[str, Any] = field(default_factory=dict)
    shrunk: bool = False

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def Model(self) -> type:  # noqa: N802 - KernelBench's name
        return self.module.Model

    @property
    def constants(self) -> dict[str, Any]:
        """Module-level numbers, strings and tuples: the sizes a user may override."""
        return module_constants(self.module)

    def init_inputs(self, seed: int = 0) -> list:
        import torch  # noqa: PLC0415 -- loader.py stays torch-free at import: the judge's pool and batch scheduler, the agents and the search import it without torch

        torch.manual_seed(seed)
        return list(self.module.get_init_inputs())

    def make_model(self, seed: int = 0, device: str = "cpu", cls: type | None = None):
        """Build the reference (or `cls`, e.g. ModelNew) with the same seed, so weights match."""
        import torch  # noqa: PLC0415 -- loader.py stays torch-free at import: the judge's pool and batch scheduler, the agents and the search import it without torch

        init = self.init_inputs(seed)
        torch.manual_seed(seed)
        model = (cls or self.Model)(*init)
        return model.to(device)

    def make_inputs(self, seed: int = 0, variant: str = "given", device: str = "cpu") -> list:
        """Fresh inputs from `get_inputs()` under `seed`, reshaped in value by `variant`."""
        from .inputs import apply_variant  # noqa: PLC0415 -- loader.py stays torch-free at import: the judge's pool and batch scheduler, the agents and the search import it without torch

        import torch  # noqa: PLC0415 -- loader.py stays torch-free at import: the judge's pool and batch scheduler, the agents and the search import it without torch

        torch.manual_seed(seed)
        inputs = list(self.module.get_inputs())
        inputs = apply_variant(inputs, variant, seed)
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def parse_override(text: str) -> tuple[str, Any]:
    """`name=value` from the command line; the value is a Python literal where it parses as one."""
    if "=" not in text:
        raise ProblemError(f"size override {text!r} must look like name=value, e.g. batch_size=16")
    name, raw = (part.strip() for part in text.split("=", 1))
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return name, value


def module_constants(module: types.ModuleType) -> dict[str, Any]:
    return {
        k: v
        for k, v in vars(module).items()
        if not k.startswith("_") and isinstance(v, (int, float, str, tuple, bool))
    }


def _assigned_names(stmt: ast.stmt) -> set[str]:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    names: set[str] = set()
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.add(node.id)
    return names


def _module_name(path: Path, overrides: dict[str, Any]) -> str:
    digest = hashlib.sha1(f"{path.resolve()}|{sorted(overrides.items())!r}".encode()).hexdigest()[:10]
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    return f"kw_problem_{stem}_{digest}"


def exec_module(path: Path, source: str, overrides: dict[str, Any], name: str) -> types.ModuleType:
    """Run `source` as a fresh module, re-applying each override after any statement assigns it."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(f"syntax error: {exc.msg}", path=path, line=exc.lineno) from None
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__dict__["__builtins__"] = builtins
    sys.modules[name] = module  # inspect/linecache and torch.compile look modules up here
    assigned: set[str] = set()
    for stmt in tree.body:
        code = compile(ast.Module(body=[stmt], type_ignores=[]), str(path), "exec")
        try:
            exec(code, module.__dict__)
        except Exception as exc:  # noqa: BLE001 -- user code: any error becomes a ProblemError with its line
            raise wrap(exc, path, "running the module") from None
        hits = _assigned_names(stmt) & overrides.keys()
        for key in hits:
            module.__dict__[key] = overrides[key]
        assigned |= hits
    unknown = set(overrides) - assigned
    if unknown:
        known = ", ".join(sorted(k for k, v in module_constants(module).items() if not isinstance(v, str)))
        raise ProblemError(
            f"cannot override {', '.join(sorted(unknown))}: no module-level assignment of that name "
            f"(constants are: {known})",
            path=path,
        )
    return module


def read_source(path: str | Path) -> tuple[Path, str]:
    path = Path(path)
    if not path.is_file():
        raise ProblemError("file not found", path=path)
    try:
        return path, path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"cannot read file: {exc}", path=path) from None


def load_problem(
    path: str | Path,
    overrides: dict[str, Any] | None = None,
    shrink: bool | ShrinkBudget | None = None,
) -> Problem:
    """Load a KernelBench problem; `shrink=True` fits its sizes to a CPU budget (see shrink.py)."""
    path, source = read_source(path)
    overrides = dict(overrides or {})
    module = exec_module(path, source, overrides, _module_name(path, overrides))
    missing = [n for n in REQUIRED_PROBLEM_NAMES if not hasattr(module, n)]
    if missing:
        raise ProblemError(missing_problem_names(missing), path=path)
    problem = Problem(path=path, source=source, module=module, overrides=overrides)
    if shrink:
        from .shrink import ShrinkBudget, shrink_problem  # noqa: PLC0415 -- loader.py stays torch-free at import: the judge's pool and batch scheduler, the agents and the search import it without torch

        budget = shrink if isinstance(shrink, ShrinkBudget) else ShrinkBudget()
        problem = shrink_problem(problem, budget, load_problem)
    return problem


def missing_problem_names(missing: list[str]) -> str:
    """What to tell the author of a problem file that lacks `missing` of REQUIRED_PROBLEM_NAMES:
    one that defines none of them is not a KernelBench problem at all (another Python file, or a
    file that only looks like one), which says more than a list of every name."""
    if set(missing) >= set(REQUIRED_PROBLEM_NAMES):
        return (f"not a KernelBench problem file: it defines none of {', '.join(REQUIRED_PROBLEM_NAMES)} "
                "(a problem defines class Model(torch.nn.Module), get_inputs() returning the forward's inputs, "
                "and get_init_inputs() returning Model's constructor arguments; see examples/problems/)")
    return f"a problem file must define {', '.join(REQUIRED_PROBLEM_NAMES)}; missing: {', '.join(missing)}"


def load_candidate(path: str | Path, cls_name: str = "ModelNew") -> types.ModuleType:
    """Import a candidate file; broken files raise ProblemError naming the file and line."""
    path, source = read_source(path)
    name = f"kw_candidate_{hashlib.sha1(source.encode()).hexdigest()[:12]}"
    module = exec_module(path, source, {}, name)
    if not hasattr(module, cls_name):
        raise ProblemError(f"the candidate must define class {cls_name}", path=path)
    if not isinstance(getattr(module, cls_name), type):
        raise ProblemError(f"{cls_name} must be a class", path=path)
    return module


def _params(fn: Callable) -> list[inspect.Parameter]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.name != "self"]


def _accepts(params: list[inspect.Parameter], count: int) -> bool:
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required) <= count <= len(positional)


def check_signatures(problem: Problem, candidate_cls: type, path: str | Path) -> None:
    """ModelNew must take the reference's constructor arguments and forward inputs."""
    n_init = len(problem.init_inputs())
    if not _accepts(_params(candidate_cls.__init__), n_init):
        raise ProblemError(
            f"{candidate_cls.__name__}.__init__ must accept the {n_init} arguments of get_init_inputs() "
            f"(the reference's signature is {inspect.signature(problem.Model.__init__)})",
            path=path,
            line=_line_of(candidate_cls.__init__),
        )
    n_fwd = len(_params(problem.Model.forward))
    if not _accepts(_params(candidate_cls.forward), n_fwd):
        raise ProblemError(
            f"{candidate_cls.__name__}.forward must accept the {n_fwd} inputs of the reference forward "
            f"{inspect.signature(problem.Model.forward)}",
            path=path,
            line=_line_of(candidate_cls.forward),
        )


def _line_of(fn: Callable) -> int | None:
    code = getattr(fn, "__code__", None)
    return code.co_firstlineno if code else None
