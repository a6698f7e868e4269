"""Fixtures for the llm tests: a scripted loopback server and a sleep that records the delays it
was asked for instead of waiting."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_server import FakeLLMServer  # noqa: E402
from llm_helpers import RecordingSleep  # noqa: E402


@pytest.fixture
def server():
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """No proxy may divert the tests' loopback traffic (nor send it anywhere else)."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
