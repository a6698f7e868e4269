"""Short-term memory: what this run has tried, what came of it, and why it failed.

The trajectory is pure data (serialisable to a list of dicts for the store). Its digest is the
"Already tried" block of agent prompts: grouped by approach so a dead end costs one line however
often it was hit, best successes first, and cut to a character budget.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable

ACTIONS = frozenset({"draft", "improve", "repair", "tune", "seed"})  # seed: the run's start (search/start.py)
# "faster" / "slower": a correct candidate that did / did not improve on what its expansion set out
# to beat (the engine decides: its search parent, or for a first version the best correct candidate)
# "duplicate": the same code as an earlier candidate, not judged again (search/duplicates.py)
OUTCOMES = frozenset({"pass", "compile_error", "wrong", "crash", "timeout", "slower", "faster", "rejected",
                      "duplicate"})
FAILURES = frozenset({"compile_error", "wrong", "crash", "timeout", "rejected"})
PASSING = frozenset({"pass", "faster", "slower"})
SHOWN = {"faster": "improved", "slower": "no gain",  # outcome words as prompts show them
         "duplicate": "same code as an earlier candidate"}
REASON_CHARS = 200


def approach_key(plan: str = "") -> str:
    """The label of an idea when the planner gave none: the plan's first non-empty line, whole
    (Markdown bullets and numbering stripped), or "unspecified"."""
    first = next((line for line in plan.splitlines() if line.strip()), "")
    first = re.sub(r"^\s*(?:[#>*\-]+|\d+[.)])\s*", "", first)
    return " ".join(first.split()) or "unspecified"


def approach_id(label: str) -> str:
    """What makes two labels the same idea: case, punctuation and spacing do not count."""
    return " ".join(re.findall(r"[a-z0-9]+", (label or "").casefold())) or "unspecified"


def _one_line(text: str, limit: int = REASON_CHARS) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip() + "…"


@dataclass(frozen=True)
class TrajectoryEntry:
    candidate_id: str
    parent_id: str | None
    action: str
    plan: str
    approach_key: str = ""
    outcome: str = "pass"
    speedup: float | None = None
    reason: str = ""
    time_ms: float | None = None  # the candidate's measured time per call (a correct one), when known

    def __post_init__(self) -> None:
        for name in ("candidate_id", "plan", "approach_key", "reason"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string, got {getattr(self, name)!r}")
        if not self.candidate_id.strip():
            raise ValueError("candidate_id must not be empty")
        if self.parent_id is not None and not isinstance(self.parent_id, str):
            raise ValueError(f"parent_id must be a string or None, got {self.parent_id!r}")
        if self.action not in ACTIONS:
            raise ValueError(f"action {self.action!r} is not one of {sorted(ACTIONS)}")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is not one of {sorted(OUTCOMES)}")
        if self.speedup is not None:
            if isinstance(self.speedup, bool) or not isinstance(self.speedup, (int, float)) \
                    or not math.isfinite(self.speedup) or self.speedup <= 0:
                raise ValueError(f"speedup must be a positive finite number or None, got {self.speedup!r}")
            object.__setattr__(self, "speedup", float(self.speedup))
        if self.time_ms is not None:
            if isinstance(self.time_ms, bool) or not isinstance(self.time_ms, (int, float)) \
                    or not math.isfinite(self.time_ms) or self.time_ms <= 0:
                raise ValueError(f"time_ms must be a positive finite number or None, got {self.time_ms!r}")
            object.__setattr__(self, "time_ms", float(self.time_ms))
        label = " ".join(self.approach_key.split()) or approach_key(self.plan)
        object.__setattr__(self, "approach_key", label)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrajectoryEntry":
        if not isinstance(data, dict):
            raise ValueError(f"a trajectory entry must be a dict, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown trajectory entry keys {sorted(unknown)}")
        return cls(**data)


@dataclass
class _Group:
    """All entries of one approach, summarised for the digest."""

    key: str
    entries: list[TrajectoryEntry]

    @property
    def label(self) -> str:
        return self.entries[0].approach_key

    @property
    def best(self) -> float | None:
        speedups = [e.speedup for e in self.entries if e.speedup is not None and e.outcome in PASSING]
        return max(speedups) if speedups else None

    @property
    def best_time(self) -> float | None:
        times = [e.time_ms for e in self.entries if e.time_ms is not None and e.outcome in PASSING]
        return min(times) if times else None

    def ids(self) -> str:
        return ", ".join(e.candidate_id for e in self.entries)

    @property
    def succeeded(self) -> bool:
        return any(e.outcome == "faster" for e in self.entries)

    def count(self, outcomes: Iterable[str]) -> int:
        wanted = set(outcomes)
        return sum(e.outcome in wanted for e in self.entries)

    def outcome_counts(self) -> str:
        counts: dict[str, int] = {}
        for e in self.entries:
            counts[e.outcome] = counts.get(e.outcome, 0) + 1
        return ", ".join(f"{SHOWN.get(o, o)} ×{n}" if n > 1 else SHOWN.get(o, o) for o, n in counts.items())

    def last_reason(self, outcomes: Iterable[str]) -> str:
        wanted = set(outcomes)
        reasons = [e.reason for e in self.entries if e.outcome in wanted and e.reason.strip()]
        return _one_line(reasons[-1]) if reasons else ""


def _speed(group: _Group) -> str:
    """"1.39×" or "1.39× (6.41 ms)": the best speedup and, when measured, its time per call."""
    time = group.best_time
    if time is None:
        return f"{group.best:.2f}×"
    shown = f"{time:.3g} ms" if time >= 0.1 else f"{time * 1000:.3g} us"
    return f"{group.best:.2f}× ({shown})"


class Trajectory:
    def __init__(self, entries: Iterable[TrajectoryEntry] = ()) -> None:
        self._entries: list[TrajectoryEntry] = []
        for entry in entries:
            self.add(entry)

    def add(self, entry: TrajectoryEntry) -> None:
        if any(e.candidate_id == entry.candidate_id for e in self._entries):
            raise ValueError(f"candidate {entry.candidate_id!r} is already in the trajectory")
        self._entries.append(entry)

    @property
    def entries(self) -> tuple[TrajectoryEntry, ...]:
        return tuple(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def already_tried(self, label: str) -> bool:
        wanted = approach_id(label)
        return any(approach_id(e.approach_key) == wanted for e in self._entries)

    def _groups(self) -> list[_Group]:
        groups: dict[str, _Group] = {}
        for entry in self._entries:
            key = approach_id(entry.approach_key)
            groups.setdefault(key, _Group(key, [])).entries.append(entry)
        return list(groups.values())

    def _is_dead_end(self, group: _Group) -> bool:
        """Never improved, and either failed twice (a repeat of earlier code counts: it brought
        nothing new) or measured no gain; never the approach that produced the best candidate so far."""
        best = self.best()
        if best is not None and best in group.entries:
            return False
        return not group.succeeded and (group.count(FAILURES | {"duplicate"}) >= 2 or group.count(["slower"]) >= 1)

    def dead_ends(self) -> list[str]:
        """Labels of the approaches that are dead ends (see _is_dead_end)."""
        return [g.label for g in self._groups() if self._is_dead_end(g)]

    def is_dead_end(self, label: str) -> bool:
        return approach_id(label) in {approach_id(d) for d in self.dead_ends()}

    def why_dead(self, label: str) -> str:
        """For an approach that is a dead end: its outcomes and the latest cause, one line ("" for
        any other approach)."""
        wanted = approach_id(label)
        for group in self._groups():
            if group.key == wanted and self._is_dead_end(group):
                reason = group.last_reason(FAILURES | {"slower"})
                return group.outcome_counts() + (f"; {reason}" if reason else "")
        return ""

    def best(self) -> TrajectoryEntry | None:
        measured = [e for e in self._entries if e.speedup is not None and e.outcome in PASSING]
        return max(measured, key=lambda e: e.speedup, default=None)

    def digest(self, max_items: int = 12, max_chars: int = 2000) -> str:
        """Markdown 'Already tried' list within the limits; '' when nothing was tried yet."""
        if not self._entries or max_items <= 0:
            return ""
        lines = self._digest_lines()
        header = "## Already tried\n"
        out, used = [header], len(header)
        for shown, line in enumerate(lines):
            if shown >= max_items or used + len(line) + 1 > max_chars:
                more = f"- … {len(lines) - shown} more approaches not shown\n"
                if used + len(more) <= max_chars:
                    out.append(more)
                break
            out.append(line + "\n")
            used += len(line) + 1
        return "".join(out) if len(out) > 1 else ""

    def _digest_lines(self) -> list[str]:
        groups = self._groups()
        wins = sorted((g for g in groups if g.succeeded), key=lambda g: -(g.best or 0))
        dead = sorted((g for g in groups if self._is_dead_end(g)), key=lambda g: -len(g.entries))
        shown = {g.key for g in wins} | {g.key for g in dead}
        rest = [g for g in groups if g.key not in shown]
        lines = [f"- `{g.label}` ({g.ids()}): worked, best {_speed(g)} ({g.outcome_counts()})" if g.best
                 else f"- `{g.label}` ({g.ids()}): worked ({g.outcome_counts()})" for g in wins]
        for g in dead:
            reason = g.last_reason(FAILURES | {"slower"})
            speed = f", best {_speed(g)}" if g.best else ""
            lines.append(f"- `{g.label}` ({g.ids()}): DEAD END ({g.outcome_counts()}{speed})"
                         + (f"; why: {reason}" if reason else ""))
        for g in rest:
            reason = g.last_reason(FAILURES)
            speed = f", best {_speed(g)}" if g.best else ""
            lines.append(f"- `{g.label}` ({g.ids()}): {g.outcome_counts()}{speed}" + (f"; last: {reason}" if reason else ""))
        return lines

    def to_dicts(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self._entries]

    @classmethod
    def from_dicts(cls, rows: Iterable[dict[str, Any]]) -> "Trajectory":
        return cls(TrajectoryEntry.from_dict(row) for row in rows)
