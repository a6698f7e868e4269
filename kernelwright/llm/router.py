"""The one object agents' drivers call: picks the provider for the agent role, enforces the shared
budget and concurrency limit, and hands every call to the caller's store through `on_call`."""
from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Mapping

from .budget import LLMBudget
from .config import LLMConfig
from .errors import ConfigError
from .provider import Provider
from .registry import make_provider
from .types import Completion, CompletionRequest

log = logging.getLogger("kernelwright.llm")


@dataclass
class CallRecord:
    """One request and its outcome, as the run store persists it (secrets never enter it)."""

    role: str
    spec: str
    request: CompletionRequest
    request_hash: str
    started_at: str
    completion: Completion | None = None
    error_type: str | None = None
    error: str | None = None
    budget: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "spec": self.spec, "request": self.request.to_dict(),
                "request_hash": self.request_hash, "started_at": self.started_at,
                "completion": self.completion.to_dict() if self.completion else None,
                "error_type": self.error_type, "error": self.error, "budget": self.budget}


OnCall = Callable[[CallRecord], "Awaitable[None] | None"]


class Router:
    """`await router.complete(request)` answers with the provider of `request.role`.

    Specs: `role_specs` (e.g. from CLI flags) beat `config.roles`, which beat `default_spec`
    (e.g. `--llm`), which beats `config.default`. Roles sharing a spec share one provider.
    """

    def __init__(self, config: LLMConfig | None = None, default_spec: str | None = None, *,
                 role_specs: Mapping[str, str] | None = None,
                 providers: Mapping[str, Provider] | None = None,
                 on_call: OnCall | None = None,
                 sleep: Callable[[float], Awaitable[None]] | None = None):
        self.config = config if config is not None else LLMConfig.load()
        self.default_spec = default_spec or self.config.default
        self.role_specs = {**self.config.roles, **(role_specs or {})}
        self.budget = LLMBudget.from_config(self.config.budget)
        self.on_call = on_call
        self._sleep = sleep
        self._by_role: dict[str, Provider] = dict(providers or {})
        self._by_spec: dict[str, Provider] = {}
        self._semaphore: asyncio.Semaphore | None = None
        self._loop = None
        for role in self.role_specs:  # bad specs and missing prices surface now, not mid-run
            self.provider_for(role)
        if self.default_spec:
            self._provider_for_spec(self.default_spec)

    def spec_for(self, role: str) -> str:
        spec = self.role_specs.get(role, self.default_spec)
        if not spec:
            raise ConfigError(f"no LLM is configured for agent role {role!r}: pass --llm SPEC, "
                              "set KW_LLM, or set default / [llm.roles] in the config")
        return spec

    def provider_for(self, role: str) -> Provider:
        if role not in self._by_role:
            self._by_role[role] = self._provider_for_spec(self.spec_for(role))
        return self._by_role[role]

    def _provider_for_spec(self, spec: str) -> Provider:
        key = spec.strip()
        if key not in self._by_spec:
            provider = make_provider(spec, self.config, sleep=self._sleep)
            self._check_priced(provider)
            self._by_spec[key] = provider
        return self._by_spec[key]

    def _check_priced(self, provider: Provider) -> None:
        if self.budget.max_usd is not None and provider.price is None:
            raise ConfigError(
                f"a dollar budget is set but {provider.spec} has no price: add "
                f'[llm.prices."{provider.model}"] input_per_mtok = ..., output_per_mtok = ... '
                "(0 for a self-hosted model)")

    async def complete(self, request: CompletionRequest) -> Completion:
        provider = self.provider_for(request.role)
        record = CallRecord(request.role, provider.spec, request, provider.request_hash(request),
                            datetime.now(timezone.utc).isoformat())
        try:
            async with self._limit():
                reservation = self.budget.reserve(request, provider.price)
                try:
                    record.completion = await provider.complete(request)
                except BaseException:
                    self.budget.release(reservation)
                    raise
                self.budget.commit(reservation, record.completion)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # LLMError in practice; recorded whatever it is, then re-raised
            record.error_type, record.error = type(exc).__name__, str(exc)
            record.budget = self.budget.snapshot()
            await self._report(record)
            raise
        record.budget = self.budget.snapshot()
        await self._report(record)
        self._log(record)
        return record.completion

    def _limit(self) -> asyncio.Semaphore:
        """The concurrency limit, made anew when the router is used from a new event loop."""
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore, self._loop = asyncio.Semaphore(self.config.concurrency), loop
        return self._semaphore

    async def _report(self, record: CallRecord) -> None:
        if self.on_call is not None:
            result = self.on_call(record)
            if inspect.isawaitable(result):
                await result

    @staticmethod
    def _log(record: CallRecord) -> None:
        c = record.completion
        log.info("%s %s %s: %d+%d tokens, $%.4f, %.1fs", record.role, record.spec,
                 record.request_hash[:12], c.usage.input_tokens, c.usage.output_tokens,
                 c.cost_usd, c.latency_s)

    async def aclose(self) -> None:
        for provider in {id(p): p for p in [*self._by_spec.values(), *self._by_role.values()]}.values():
            await provider.aclose()
