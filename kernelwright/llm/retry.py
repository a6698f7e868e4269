"""Retries with capped exponential backoff that honour the server's Retry-After.

The SDKs' own retries are switched off (max_retries=0) so the policy lives here in one place,
is the same for every provider, and can be tested with an injected `sleep`.
"""
from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from datetime import datetime, timezone
from typing import Awaitable, Callable, Mapping, TypeVar

from .config import RetryConfig
from .errors import LLMError

log = logging.getLogger("kernelwright.llm")
T = TypeVar("T")


@dataclass
class Failure:
    """How one failed attempt should be handled: `error` is what the caller sees if we stop."""

    error: LLMError
    retryable: bool
    retry_after_s: float | None = None


@dataclass
class RetryPolicy:
    max_retries: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    retry_after_cap_s: float = 300.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)

    @classmethod
    def from_config(cls, config: RetryConfig, sleep=None) -> "RetryPolicy":
        return cls(config.max_retries, config.base_delay_s, config.max_delay_s,
                   config.retry_after_cap_s, sleep or asyncio.sleep)

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Retry-After wins when the server sent one; otherwise full-jitter exponential backoff."""
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.retry_after_cap_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** attempt))
        return self.rng.uniform(ceiling / 2, ceiling)


async def run_with_retries(attempt: Callable[[], Awaitable[T]],
                           classify: Callable[[BaseException], Failure],
                           policy: RetryPolicy) -> T:
    """Call `attempt` until it succeeds, a failure is not retryable, or retries run out.
    The errors `classify` builds name the provider, so the log lines and the final error do too."""
    for number in range(policy.max_retries + 1):
        try:
            return await attempt()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK/transport error is classified below
            failure = classify(exc)
        if not failure.retryable or number == policy.max_retries:
            if failure.retryable:
                failure.error.args = (f"{failure.error} (gave up after {number + 1} attempts)",)
            raise failure.error from None
        wait = policy.delay(number, failure.retry_after_s)
        log.warning("%s; retry %d/%d in %.2fs", failure.error, number + 1, policy.max_retries, wait)
        await policy.sleep(wait)
    raise AssertionError("unreachable")


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
