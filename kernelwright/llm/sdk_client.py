"""One SDK client per event loop.

An async HTTP client's connection pool belongs to the loop that opened it; a provider that lives
across several `asyncio.run` calls (a paused and resumed run, a test suite) must not reuse it.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable


class LoopLocalClient:
    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self._client = None
        self._loop = None

    def get(self):
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client, self._loop = self._factory(), loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.close()
        self._client = self._loop = None
