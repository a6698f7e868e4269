"""Retry-After parsing and backoff bounds."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from kernelwright.llm.retry import RetryPolicy, parse_retry_after


def test_retry_after_forms():
    assert parse_retry_after({"retry-after": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    when = datetime.now(timezone.utc) + timedelta(seconds=30)
    assert parse_retry_after({"retry-after": format_datetime(when, usegmt=True)}) == pytest.approx(30, abs=2)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None


def test_backoff_grows_and_is_capped():
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0)
    for attempt in range(8):
        ceiling = min(8.0, 2.0 ** attempt)
        assert ceiling / 2 <= policy.delay(attempt, None) <= ceiling
    assert policy.delay(0, 42.0) == 42.0
    assert RetryPolicy(retry_after_cap_s=10).delay(0, 42.0) == 10.0
