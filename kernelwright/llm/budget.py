"""Budgets on calls, tokens and dollars, checked before a call is made.

A call first reserves its worst case (estimated prompt tokens + max_tokens of output, priced at
the model's rate); the reservation is replaced by the real usage when the answer arrives, or
released if the call fails. Concurrent calls therefore cannot overrun a budget together.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .config import BudgetConfig, Price
from .errors import BudgetExceeded
from .types import Completion, CompletionRequest


@dataclass(eq=False)  # compared by identity: two equal holds are still two holds
class Reservation:
    calls: int
    tokens: int
    usd: float


@dataclass
class LLMBudget:
    max_calls: int | None = None
    max_tokens: int | None = None
    max_usd: float | None = None
    calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    _reserved: list[Reservation] = field(default_factory=list, repr=False)

    @classmethod
    def from_config(cls, config: BudgetConfig) -> "LLMBudget":
        return cls(config.max_calls, config.max_tokens, config.max_usd)

    def reserve(self, request: CompletionRequest, price: Price | None) -> Reservation:
        """Hold the worst case of `request`, or raise BudgetExceeded without holding anything."""
        tokens_in = request.estimated_input_tokens()
        worst_tokens = tokens_in + request.max_tokens
        worst_usd = price.cost(tokens_in, request.max_tokens) if price else 0.0
        held = self._held()
        self._check("calls", self.max_calls, self.calls + held.calls, 1)
        self._check("tokens", self.max_tokens, self.tokens + held.tokens, worst_tokens)
        self._check("dollars", self.max_usd, self.usd + held.usd, worst_usd)
        reservation = Reservation(1, worst_tokens, worst_usd)
        self._reserved.append(reservation)
        return reservation

    def commit(self, reservation: Reservation, completion: Completion) -> None:
        self.release(reservation)
        self.calls += 1
        self.tokens += completion.usage.total_tokens
        self.usd += completion.cost_usd

    def release(self, reservation: Reservation) -> None:
        if reservation in self._reserved:
            self._reserved.remove(reservation)

    def snapshot(self) -> dict:
        """Used and allowed amounts, for reports and the run store."""
        return {"calls": self.calls, "tokens": self.tokens, "usd": round(self.usd, 6),
                "max_calls": self.max_calls, "max_tokens": self.max_tokens, "max_usd": self.max_usd}

    def _held(self) -> Reservation:
        return Reservation(sum(r.calls for r in self._reserved),
                           sum(r.tokens for r in self._reserved),
                           sum(r.usd for r in self._reserved))

    @staticmethod
    def _check(what: str, limit, used, needed) -> None:
        if limit is not None and used + needed > limit:
            raise BudgetExceeded(
                f"LLM budget for {what} would be exceeded: {_fmt(used)} used or in flight, the next "
                f"call may need up to {_fmt(needed)}, the limit is {_fmt(limit)}. The call was not made.")


def _fmt(value) -> str:
    return f"{value:,.4f}" if isinstance(value, float) else f"{value:,}"
