"""Fit a problem's sizes to a CPU budget.

KernelBench sizes are GPU sizes: some inputs take gigabytes. For CPU runs we halve the largest
size-like module constant until the inputs, parameters and outputs fit a byte budget and the
forward fits a FLOP budget. The footprint is measured on the meta device (nothing is allocated),
and a halving that breaks the model (a shape error on meta) is undone and that constant kept.
The resulting overrides are recorded in the Problem and in every verdict.
"""
from __future__ import annotations

import re
from typing import Any, Callable
from dataclasses import dataclass


from .errors import ProblemError, deepest_frame_in
from .footprint import Footprint, measure

# constants whose value is semantics, not size: never halved
_SEMANTIC = re.compile(
    r"kernel|stride|pad|dilation|group|head|axis|eps|momentum|scale|factor|prob|p_drop|dropout|"
    r"layers|alpha|beta|negative_slope|lambd|threshold|value|min|max|^dim$|_dim$|^dim_?\d?$",
    re.IGNORECASE,
)
# ...but these suffixes of "_dim" are sizes (embed_dim, hidden_dim, input_dim, ...)
_SIZE_DIM = re.compile(r"(embed|hidden|input|output|in|out|model|feature|ff|inner|head_?)_?dim$|^dim\d*$", re.I)


@dataclass(frozen=True)
class ShrinkBudget:
    max_bytes: int = 8 * 2**20  # inputs + parameters + outputs
    max_flops: float = 2e8  # one forward pass
    min_size: int = 4  # no size constant is halved below this


def size_constants(problem) -> dict[str, int]:
    """Integer module constants that look like sizes (batch, channels, spatial, features)."""
    sizes = {}
    for name, value in problem.constants.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 8:
            continue
        if _SEMANTIC.search(name) and not _SIZE_DIM.search(name):
            continue
        sizes[name] = value
    return sizes


def unmeasurable(exc: BaseException, path) -> ProblemError:
    """The problem's own function that failed while its sizes were measured (get_inputs(),
    get_init_inputs(), Model's constructor), named with its line; the meta device said as where
    it ran, since a function can fail there only (it reads a tensor's values)."""
    frame = deepest_frame_in(exc, path)
    where = ("Model's constructor" if frame.name == "__init__" else f"{frame.name}()") \
        if frame is not None and frame.name != "<module>" else "the problem's code"
    return ProblemError(f"{where} failed with {type(exc).__name__}: {exc} (called on the meta device, where "
                        "the problem's sizes are measured before they are shrunk for the CPU)",
                        path=path, line=frame.lineno if frame is not None else None)


def _fits(fp: Footprint, budget: ShrinkBudget) -> bool:
    return fp.bytes <= budget.max_bytes and fp.flops <= budget.max_flops


def shrink_problem(problem, budget: ShrinkBudget, load_problem: Callable[..., Any]):
    """Return the problem reloaded with halved size constants (`load_problem(path, overrides)`, the
    loader's, passed in so this module needs no import of it) until it fits `budget`."""
    try:
        footprint = measure(problem)
    except Exception as exc:  # noqa: BLE001 -- a model meta cannot run: keep sizes, say why
        raise unmeasurable(exc, problem.path) from None
    overrides = dict(problem.overrides)
    frozen = set(overrides)  # user overrides are never changed
    current = problem
    while not _fits(footprint, budget):
        sizes = {k: v for k, v in size_constants(current).items() if k not in frozen and v // 2 >= budget.min_size}
        if not sizes:
            break
        name = max(sizes, key=sizes.get)
        trial = {**overrides, name: sizes[name] // 2}
        try:
            candidate = load_problem(problem.path, trial)
            footprint_next = measure(candidate)
        except Exception:  # noqa: BLE001 -- user code: a size whose halving breaks the model stays
            frozen.add(name)  # halving this one breaks the model: keep it
            continue
        overrides, current, footprint = trial, candidate, footprint_next
    current.shrunk = current.overrides != problem.overrides
    return current
