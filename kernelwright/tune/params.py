"""What one declared parameter of a template is: its values, its kind, and when it is active.

Block sizes are what a candidate's own `@triton.autotune` already searches. A template earns its
tuning by also declaring the layout and algorithm choices autotune cannot reach (issue 33): the
order of the programs over the tiles, split factors, pipeline stages against warps, vector width,
a persistent or one-shot grid, the precision scheme. A parameter is declared as a list of values,
or as a dict:

    "SPLIT_K": {"values": [1, 2, 4, 8], "kind": "split", "when": "K >= 4096", "off": 1}
    "GRID":    {"choice": ["oneshot", "persistent"], "kind": "grid"}
    "BLOCK_K": {"pow2": [32, 128]}                        # also {"range": [lo, hi], "step": s}

- exactly one value source: `values` (ordered), `choice` (categorical: no order between the values,
  so the samplers do not treat 8 as "between" 4 and 16), `range` or `pow2` (both ends included);
- `kind` (optional, inferred from the name): one of PARAM_KINDS; `grid`, `precision` and
  `algorithm` choices are categorical whatever their values;
- `when` (optional): a constraint expression over the other parameters, the sizes and the device
  limits; where it is false the parameter is inactive and only its `off` value (default: its first
  value) is allowed, so the space holds no configuration that differs only in an inactive choice.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MAX_DOMAIN = 4096  # values in one parameter's domain

# kind -> what it is (the Templatizer's prompt lists them from here)
PARAM_KINDS: dict[str, str] = {
    "block": "a tile or block size (what autotune already searches)",
    "warps": "warps per program (num_warps)",
    "stages": "software-pipeline stages (num_stages), traded against warps for registers and shared memory",
    "order": "the order programs walk the tiles in (grouped program order GROUP_M, tile order)",
    "split": "a split factor: one reduction spread over several programs (split-K, rows split over programs)",
    "vector": "vector width or elements per thread",
    "grid": "grid shape: a persistent grid of about NUM_SMS programs looping over tiles, or one program per tile",
    "precision": "the arithmetic precision scheme (tl.dot input_precision), only where the rules allow it",
    "unroll": "an unroll factor",
    "algorithm": "another algorithmic choice (a direct product or tl.dot, one pass or two)",
    "other": "anything else",
}
CATEGORICAL_KINDS = ("grid", "precision", "algorithm")
_SOURCES = ("values", "choice", "range", "pow2")
_SPEC_KEYS = set(_SOURCES) | {"step", "kind", "when", "off"}
_NAME_KINDS = [  # (pattern on the name without a kernel prefix such as g0_, kind)
    (r"num_warps$", "warps"), (r"num_stages$", "stages"), (r"(BLOCK|TILE)", "block"), (r"GROUP", "order"),
    (r"SPLIT", "split"), (r"VEC", "vector"), (r"(PERSISTENT|GRID)", "grid"), (r"PRECISION", "precision"),
    (r"UNROLL", "unroll"),
]


class SpaceError(ValueError):
    """A parameter declaration that does not describe a usable space (template.py makes it a TemplateError)."""


@dataclass(frozen=True)
class ParamSpec:
    """What a parameter is besides its values."""

    kind: str = "other"
    categorical: bool = False
    when: str | None = None  # the activity condition as declared
    off: Any = None  # its value where `when` is false


def infer_kind(name: str) -> str:
    bare = re.sub(r"^g\d+_", "", name)
    for pattern, kind in _NAME_KINDS:
        if re.search(pattern, bare, re.IGNORECASE):
            return kind
    return "other"


def parse_param(name: str, spec: Any) -> tuple[tuple, ParamSpec]:
    """(values, spec) of one declared parameter; SpaceError says what is wrong."""
    if not isinstance(name, str) or not name.isidentifier():
        raise SpaceError(f"parameter name {name!r} must be an identifier")
    if isinstance(spec, (list, tuple)):
        values, kind, when, off, choice = list(spec), infer_kind(name), None, None, False
    elif isinstance(spec, dict):
        values, choice = _values(name, spec), "choice" in spec
        kind = spec.get("kind", infer_kind(name))
        if kind not in PARAM_KINDS:
            raise SpaceError(f"parameter {name}: kind {kind!r} is not one of {', '.join(PARAM_KINDS)}")
        when, off = spec.get("when"), spec.get("off", values[0] if values else None)
    else:
        raise SpaceError(f"parameter {name}: give a list of values, or a dict with one of "
                         f"{', '.join(repr(s) for s in _SOURCES)}")
    values = _checked(name, values)
    if when is not None:
        if not isinstance(when, str) or not when.strip():
            raise SpaceError(f"parameter {name}: 'when' must be a constraint expression (a string)")
        if off not in values:
            raise SpaceError(f"parameter {name}: its 'off' value {off!r} (the value where {when!r} is false) "
                             f"is not in its domain {values}")
    elif isinstance(spec, dict) and "off" in spec:
        raise SpaceError(f"parameter {name}: 'off' means nothing without 'when'")
    categorical = choice or kind in CATEGORICAL_KINDS or not _numeric(values)
    return tuple(values), ParamSpec(kind, categorical, when.strip() if when else None, off if when else None)


def activity_constraint(name: str, spec: ParamSpec) -> str | None:
    """The constraint a `when` adds: the parameter is at its `off` value, or its condition holds."""
    return None if spec.when is None else f"{name} == {spec.off!r} or ({spec.when})"


def _values(name: str, spec: dict) -> list:
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise SpaceError(f"parameter {name}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                         f"known: {', '.join(sorted(_SPEC_KEYS))}")
    sources = [s for s in _SOURCES if s in spec]
    if len(sources) != 1:
        raise SpaceError(f"parameter {name}: give exactly one of {', '.join(repr(s) for s in _SOURCES)}"
                         + (f" (found {', '.join(sources)})" if sources else ""))
    if "step" in spec and sources != ["range"]:
        raise SpaceError(f"parameter {name}: 'step' belongs to a 'range'")
    source = sources[0]
    if source in ("values", "choice"):
        if not isinstance(spec[source], (list, tuple)):
            raise SpaceError(f"parameter {name}: {source!r} must be a list")
        return list(spec[source])
    bounds = spec[source]
    if not (isinstance(bounds, (list, tuple)) and len(bounds) == 2):
        raise SpaceError(f"parameter {name}: {source!r} takes [lo, hi]")
    lo, hi = bounds
    if source == "range":
        step = spec.get("step", 1)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi, step)) or step <= 0:
            raise SpaceError(f"parameter {name}: range bounds and step must be integers, step > 0")
        return list(range(lo, hi + 1, step))
    if not (isinstance(lo, int) and isinstance(hi, int) and 0 < lo <= hi):
        raise SpaceError(f"parameter {name}: pow2 bounds must be integers 0 < lo <= hi")
    return [1 << k for k in range(hi.bit_length()) if lo <= 1 << k <= hi]


def _checked(name: str, values: list) -> list:
    if not values:
        raise SpaceError(f"parameter {name} has an empty domain")
    if len(values) > MAX_DOMAIN:
        raise SpaceError(f"parameter {name} has {len(values)} values; at most {MAX_DOMAIN}")
    for value in values:
        if not isinstance(value, (int, float, str, bool)):
            raise SpaceError(f"parameter {name}: value {value!r} is not a number, string or bool")
    types = {"bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float)) else "string" for v in values}
    if len(types) > 1:
        raise SpaceError(f"parameter {name} mixes {' and '.join(sorted(types))} values {values}: one type per "
                         "parameter (a choice between numbers is {'choice': [...]})")
    if len(set(map(repr, values))) != len(values) or len(set(values)) != len(values):
        raise SpaceError(f"parameter {name} lists a value twice")
    return values


def _numeric(values: list) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
