"""Helpers shared by the llm tests (imported by the test modules and conftest)."""
from __future__ import annotations

import asyncio

from fake_server import FakeLLMServer

from kernelwright.llm.config import LLMConfig

# Hand-written fake keys: the tests assert none of them is ever written anywhere.
TEST_OPENAI_KEY = "sk-test-openai-DO-NOT-LEAK-1234567890"
TEST_ENDPOINT_KEY = "sk-test-endpoint-DO-NOT-LEAK-abcdef"
TEST_ANTHROPIC_KEY = "sk-ant-test-DO-NOT-LEAK-0987654321"
ALL_TEST_KEYS = (TEST_OPENAI_KEY, TEST_ENDPOINT_KEY, TEST_ANTHROPIC_KEY)


class RecordingSleep:
    """Stands in for asyncio.sleep: remembers each requested delay, then yields to the loop."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def make_config(server: FakeLLMServer | None = None, **overrides) -> LLMConfig:
    """A config whose endpoint keys point at the fake server; retries are quick but real."""
    env = {"OPENAI_API_KEY": TEST_OPENAI_KEY, "ANTHROPIC_API_KEY": TEST_ANTHROPIC_KEY,
           "FAKE_ENDPOINT_KEY": TEST_ENDPOINT_KEY}
    data = {"timeout_s": 2.0, "retry": {"max_retries": 3, "base_delay_s": 0.01, "max_delay_s": 0.05}}
    if server is not None:
        data["endpoints"] = {server.openai_base_url: {"api_key_env": "FAKE_ENDPOINT_KEY"},
                             server.base_url: {"api_key_env": "FAKE_ENDPOINT_KEY"}}
    for key, value in overrides.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return LLMConfig.model_validate(data).with_keys_from(env)


def run(coro):
    return asyncio.run(coro)
