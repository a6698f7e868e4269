"""A region written as a KernelBench problem file (templates/region_problem.py.tmpl).

Why the problem rebuilds the user's model instead of re-declaring the submodule: a submodule's
constructor arguments are not recorded anywhere in general (a layer may compute its shapes from a
config object), so copying them would work for some classes and silently differ for others.
Calling the spec and taking the submodule by its dotted path gives exactly that submodule, with
its code, settings and dtype. Its limits (docs/models.md): the spec must be importable where the
judge runs (its absolute path, or the module on KW_SEARCH_PATH), building the whole model must be
cheap enough to repeat per judged candidate, and must run on the meta device on a machine without
a GPU (the judge measures a problem's footprint there before shrinking it); weights are those of a
fresh build under the judge's seed, not trained ones (`apply` loads the trained ones).
"""
from __future__ import annotations

import inspect
import keyword
from pathlib import Path
from string import Template

from .calls import Arg, TensorSpec
from .regions import Region
from .spec import load_callable

TEMPLATE = Path(__file__).with_name("templates") / "region_problem.py.tmpl"
REGION_ATTR = "region"  # the attribute of the problem's Model that holds the submodule


def file_name(rank: int, region: Region) -> str:
    """`01_layers_0_attn.py`: rank first (a suite sorts by it), never a leading underscore."""
    stem = "".join(c if c.isalnum() else "_" for c in region.path) or "model"
    return f"{rank:02d}_{stem}.py"


def _param_names(args: list[Arg]) -> list[str]:
    names, used = [], set()
    for index, arg in enumerate(args):
        if arg.tensor is None:
            continue
        name = arg.name if arg.name and arg.name.isidentifier() and not keyword.iskeyword(arg.name) else f"arg{index}"
        while name in used or name == "self":
            name += "_"
        used.add(name)
        names.append(name)
    return names


def call_source(args: list[Arg]) -> tuple[str, str]:
    """(the forward's parameters, the submodule's call) for the recorded arguments."""
    names = iter(_param_names(args))
    params, parts = [], []
    for arg in args:
        value = arg.literal if arg.tensor is None else next(names)
        if arg.tensor is not None:
            params.append(value)
        parts.append(value if arg.name is None else f"{arg.name}={value}")
    return "".join(f", {p}" for p in params), ", ".join(parts)


def input_source(spec: TensorSpec) -> str:
    """One seeded random tensor like `spec` (the judge seeds before calling get_inputs)."""
    shape, dtype = repr(list(spec.shape)), f"torch.{spec.dtype}"
    if spec.dtype == "bool":
        if spec.low == spec.high and spec.low is not None:
            return f"torch.full({shape}, {bool(spec.low)!r}, dtype=torch.bool)"
        return f"torch.randint(0, 2, {shape}).bool()"
    if spec.low is not None and spec.high is not None:  # integers: uniform over the values seen
        low, high = int(spec.low), int(spec.high)
        if low == high:
            return f"torch.full({shape}, {low}, dtype={dtype})"
        return f"torch.randint({low}, {high + 1}, {shape}, dtype={dtype})"
    return f"torch.randn({shape}, dtype={dtype})"


def _args_literal(args: list[Arg]) -> str:
    rows = []
    for arg in args:
        if arg.tensor is None:
            rows.append({"name": arg.name, "literal": arg.literal})
        else:
            rows.append({"name": arg.name, "shape": list(arg.tensor.shape), "dtype": arg.tensor.dtype})
    return "[\n" + "".join(f"    {row!r},\n" for row in rows) + "]"


def render(region: Region, spec: str, search_path: list[str], clock: str, backward: bool) -> str:
    """The problem file's text for `region` of the model that `spec` builds."""
    record = region.record
    params, call = call_source(record.args)
    tensors = [a.tensor for a in record.args if a.tensor is not None]
    inputs = "\n".join(f"        {input_source(t)}," for t in tensors)
    if backward:
        counted = [i for i, t in enumerate(tensors) if t.requires_grad]
        work = f"KW_BACKWARD = True  # forward and backward are the work\nKW_GRAD_INPUTS = {counted!r}  # inputs that required grad"
    else:
        work = "# the forward is the work (extract --backward makes forward+backward the work)"
    count = len(region.paths)
    instances = f" over its {count} identical instances (KW_REGION_PATHS)" if count > 1 else ""
    step = "forward and backward" if backward else "forward"
    return Template(TEMPLATE.read_text()).substitute(
        title=f"{record.cls.rsplit('.', 1)[-1]} at `{region.path}`", spec=spec, path=region.path, cls=record.cls,
        share=f"{region.share:.1%}", clock="GPU kernel time" if clock == "cuda" else "CPU time", step=step,
        instances=instances, spec_literal=repr(spec), search_path=repr(list(search_path)),
        path_literal=repr(region.path), paths=repr(list(region.paths)), cls_literal=repr(record.cls),
        training=repr(record.training), args=_args_literal(record.args), share_value=repr(round(region.share, 6)),
        backward=work, load_callable=inspect.getsource(load_callable).rstrip() + "\n", params=params, call=call,
        inputs=inputs)
