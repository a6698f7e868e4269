"""Budgets of a run: LLM calls, tokens, dollars, GPU evaluations and wall time.

Calls and evaluations are counted when asked (so concurrent asks cannot overrun them) and are hard
limits; tokens, dollars and time are known only when an answer arrives, so they are soft limits:
no new ask is made once they are reached, and asks in flight may go over by their own size.
Wall time is the active time of the run (pauses are not counted), passed in by the driver: the
engine reads no clock.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

LIMIT_NAMES = ("max_calls", "max_tokens", "max_usd", "max_evals", "max_minutes")


@dataclass
class Limits:
    max_calls: int | None = None
    max_tokens: int | None = None
    max_usd: float | None = None
    max_evals: int | None = None
    max_minutes: float | None = None

    def __post_init__(self) -> None:
        for name in LIMIT_NAMES:
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"budget {name} must not be negative, got {value}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Limits":
        data = data or {}
        unknown = set(data) - set(LIMIT_NAMES)
        if unknown:
            raise ValueError(f"unknown budget names: {', '.join(sorted(unknown))}")
        return cls(**data)

    def merged(self, other: "Limits") -> "Limits":
        """These limits with every limit that `other` sets replacing ours."""
        values = self.to_dict()
        values.update({k: v for k, v in other.to_dict().items() if v is not None})
        return Limits(**values)


@dataclass
class Spend:
    calls: int = 0  # completion asks made
    tokens: int = 0  # input + output tokens of answers received
    usd: float = 0.0
    evals: int = 0  # evaluation asks made
    elapsed_s: float = 0.0  # active wall time, as last told by the driver

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class SearchBudget:
    limits: Limits = field(default_factory=Limits)
    spend: Spend = field(default_factory=Spend)

    def soft_reason(self) -> str | None:
        """The first soft limit reached (tokens, dollars, time), or None."""
        limits, spend = self.limits, self.spend
        if limits.max_tokens is not None and spend.tokens >= limits.max_tokens:
            return f"token budget reached ({spend.tokens:,} of {limits.max_tokens:,})"
        if limits.max_usd is not None and spend.usd >= limits.max_usd:
            return f"dollar budget reached (${spend.usd:.4f} of ${limits.max_usd:.4f})"
        if limits.max_minutes is not None and spend.elapsed_s >= limits.max_minutes * 60:
            return f"time budget reached ({spend.elapsed_s / 60:.1f} of {limits.max_minutes:g} minutes)"
        return None

    def calls_left(self) -> float:
        return float("inf") if self.limits.max_calls is None else self.limits.max_calls - self.spend.calls

    def evals_left(self) -> float:
        return float("inf") if self.limits.max_evals is None else self.limits.max_evals - self.spend.evals

    def can_start(self, calls: int, evals: int, reserved_calls: int = 0, reserved_evals: int = 0) -> str | None:
        """None when a job needing `calls` and `evals` more fits beside the reserved ones; else why not."""
        soft = self.soft_reason()
        if soft:
            return soft
        if calls + reserved_calls > self.calls_left():
            return f"LLM call budget reached ({self.spend.calls} of {self.limits.max_calls})"
        if evals + reserved_evals > self.evals_left():
            return f"evaluation budget reached ({self.spend.evals} of {self.limits.max_evals})"
        return None

    def record_completion(self, tokens: int, usd: float) -> None:
        self.spend.tokens += int(tokens)
        self.spend.usd += float(usd)

    def advance(self, elapsed_s: float | None) -> None:
        if elapsed_s is not None:
            self.spend.elapsed_s = max(self.spend.elapsed_s, float(elapsed_s))
