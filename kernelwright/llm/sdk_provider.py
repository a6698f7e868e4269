"""What the openai and anthropic providers share: key lookup, per-loop client, retries, cost.

Subclasses say how to build the SDK client, how to shape the request and how to read the answer.
The SDK module is imported inside methods only, so `import kernelwright.llm` never needs it.
"""
from __future__ import annotations

import time
from abc import abstractmethod
from types import ModuleType

from .config import LLMConfig, Price
from . import providers
from .keys import resolve_key
from .provider import BuildInner, Provider
from .retry import RetryPolicy, run_with_retries
from .sdk_client import LoopLocalClient
from .sdk_errors import CallContext, classify_sdk_error
from .spec import ProviderSpec
from .types import Completion, CompletionRequest, Usage


class SDKProvider(Provider):
    """`name` is the provider's spec prefix; its key's variable and host are its registry entry's."""

    def __init__(self, spec: ProviderSpec, config: LLMConfig, retry: RetryPolicy):
        self.vendor = providers.kind(self.name).vendor
        self.model = spec.model
        self.base_url = spec.base_url
        self.spec = str(spec)
        self.config = config
        self.retry = retry
        self._api_key, key_source = resolve_key(spec.base_url, config, self.vendor, self.name)
        self._ctx = CallContext(self.name, self.spec, key_source, config.secrets())
        self._client = LoopLocalClient(self._make_client)

    @classmethod
    def from_spec(cls, spec: ProviderSpec, config: LLMConfig, retry: RetryPolicy, build: BuildInner) -> "SDKProvider":
        return cls(spec, config, retry)

    @property
    def price(self) -> Price | None:
        return self.config.price_for(self.model)

    async def complete(self, request: CompletionRequest) -> Completion:
        sdk = self._sdk()
        params = self._params(request)
        started = time.monotonic()

        async def attempt():
            return self._read(await self._create(self._client.get(), params))

        text, usage, finish, model = await run_with_retries(
            attempt, lambda exc: classify_sdk_error(exc, sdk, self._ctx), self.retry)
        return Completion(text=text, model=model or self.model, provider=self.name, usage=usage,
                          cost_usd=self.cost(usage.input_tokens, usage.output_tokens),
                          request_hash=self.request_hash(request),
                          latency_s=time.monotonic() - started, finish_reason=finish)

    async def aclose(self) -> None:
        await self._client.aclose()

    @abstractmethod
    def _sdk(self) -> ModuleType:
        """Import and return the SDK module."""

    @abstractmethod
    def _make_client(self):
        """A new async SDK client with the SDK's own retries off."""

    @abstractmethod
    async def _create(self, client, params: dict):
        """One API call."""

    @abstractmethod
    def _params(self, request: CompletionRequest) -> dict:
        """Keyword arguments of the API call."""

    @abstractmethod
    def _read(self, response) -> tuple[str, Usage, str | None, str | None]:
        """(text, usage, finish_reason, model) from a response; ProviderResponseError if malformed."""
