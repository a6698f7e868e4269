"""What the server accepts: bounded sizes, well-formed values, and one error type for refusals.

Every tool checks its arguments here before anything runs. A refusal is a `ToolInputError` with a
short code a client can branch on, a sentence a model can act on, and the argument it concerns;
the tools layer turns it into a structured tool error (`is_error` with `{"error": {...}}`), never a
protocol failure or a crash of the server.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

# error codes
BAD_PATH = "bad_path"  # outside the workspace, missing, or the wrong kind of file
TOO_LARGE = "too_large"  # over a size bound
BAD_VALUE = "bad_value"  # malformed or out of range
NOT_FOUND = "not_found"  # no such run, skill or candidate
UNSUPPORTED = "unsupported"  # this installation cannot do it
CONFLICT = "conflict"  # the state of a run does not allow it (already running, nothing to stop)
INTERNAL = "internal"  # a bug or a failure of the server itself, not of the input

_SIZE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class ToolInputError(ValueError):
    """A refused input: `code` (above), a message for a model, the argument it concerns."""

    def __init__(self, code: str, message: str, field: str | None = None):
        super().__init__(message)
        self.code, self.field = code, field

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self), "field": self.field}


@dataclass(frozen=True)
class Limits:
    """Size bounds of one server. Defaults fit any real KernelBench problem and candidate."""

    code_bytes: int = 256 * 1024  # candidate source
    problem_bytes: int = 1024 * 1024  # problem file on disk
    query_chars: int = 500  # skills_search query
    spec_chars: int = 300  # an LLM spec string
    path_chars: int = 4096
    max_trials: int = 50
    max_budget: int = 500  # evaluations of one optimize run
    max_sizes: int = 32  # size overrides in one call
    max_results: int = 20  # skills_search k
    max_listing: int = 1000  # problems listed for one suite, candidates in a tree
    judge_slots: int = 2  # judge, profile and baseline calls running at once


def text(value: Any, field: str, max_bytes: int, *, allow_empty: bool = False) -> str:
    """A string within `max_bytes` (UTF-8), without NUL characters."""
    if not isinstance(value, str):
        raise ToolInputError(BAD_VALUE, f"`{field}` must be a string", field)
    size = len(value.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise ToolInputError(TOO_LARGE, f"`{field}` is {size} bytes; at most {max_bytes} are accepted", field)
    if "\x00" in value:
        raise ToolInputError(BAD_VALUE, f"`{field}` contains a NUL character", field)
    if not allow_empty and not value.strip():
        raise ToolInputError(BAD_VALUE, f"`{field}` is empty", field)
    return value


def integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolInputError(BAD_VALUE, f"`{field}` must be an integer", field)
    if not low <= value <= high:
        raise ToolInputError(BAD_VALUE, f"`{field}` must be between {low} and {high}, got {value}", field)
    return value


def sizes(value: dict[str, Any] | None, limits: Limits) -> dict[str, int | float]:
    """Problem size overrides: a few NAME -> finite number pairs (the problem checks the names)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ToolInputError(BAD_VALUE, "`sizes` must be an object of NAME: number", "sizes")
    if len(value) > limits.max_sizes:
        raise ToolInputError(TOO_LARGE, f"`sizes` has {len(value)} entries; at most {limits.max_sizes}", "sizes")
    out: dict[str, int | float] = {}
    for name, number in value.items():
        if not isinstance(name, str) or not _SIZE_NAME.match(name):
            raise ToolInputError(BAD_VALUE, f"size name {name!r} is not a Python identifier", "sizes")
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            raise ToolInputError(BAD_VALUE, f"size {name} must be a finite number, got {number!r}", "sizes")
        out[name] = number
    return out


def skill_name(value: Any) -> str:
    name = text(value, "name", 100)
    if not _SKILL_NAME.match(name):
        raise ToolInputError(BAD_VALUE, f"skill names are kebab-case (e.g. vectorized-access), got {name!r}", "name")
    return name


def run_name(value: str, field: str = "run") -> str:
    """A run folder's name (no separators), as used in resource URIs."""
    if not _RUN_NAME.match(value or ""):
        raise ToolInputError(BAD_VALUE, f"`{field}` {value!r} is not a run folder name", field)
    return value


def choice(value: Any, field: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ToolInputError(BAD_VALUE, f"`{field}` must be one of {', '.join(allowed)}, got {value!r}", field)
    return value


def string_list(value: list[str] | None, field: str, allowed: frozenset[str] | None = None,
                max_items: int = 16) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > max_items:
        raise ToolInputError(BAD_VALUE, f"`{field}` must be a list of at most {max_items} strings", field)
    out = []
    for item in value:
        if not isinstance(item, str) or len(item) > 64:
            raise ToolInputError(BAD_VALUE, f"`{field}` must hold short strings, got {item!r}", field)
        item = item.strip().lower()
        if allowed is not None and item not in allowed:
            raise ToolInputError(BAD_VALUE, f"`{field}`: {item!r} is not one of {', '.join(sorted(allowed))}", field)
        out.append(item)
    return out
