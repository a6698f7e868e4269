"""The one interface every model source implements."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

from .config import LLMConfig, Price
from .errors import ConfigError
from .retry import RetryPolicy
from .spec import ProviderSpec
from .types import Completion, CompletionRequest

#: Builds the provider of an inner spec (a cassette's), as `registry.make_provider` does.
BuildInner = Callable[[ProviderSpec], "Provider"]


class Provider(ABC):
    """Answers a CompletionRequest. `name` is the provider family ("openai", "replay", ...),
    `model` the model id it sends, `spec` the redacted spec string it was built from."""

    name: str = ""
    model: str = ""
    spec: str = ""

    @classmethod
    def from_spec(cls, spec: ProviderSpec, config: LLMConfig, retry: RetryPolicy, build: BuildInner) -> "Provider":
        """The provider a parsed spec names (`providers.PROVIDERS` names the class for each prefix)."""
        raise ConfigError(f"{cls.__name__} cannot be built from a spec ({spec})")

    @abstractmethod
    async def complete(self, request: CompletionRequest) -> Completion:
        """Return the answer, or raise an LLMError (never an SDK exception)."""

    @property
    def price(self) -> Price | None:
        """Price per token, or None when unknown. Sources that cost nothing return a zero Price."""
        return Price(input_per_mtok=0.0, output_per_mtok=0.0)

    def request_hash(self, request: CompletionRequest) -> str:
        return request.stable_hash(self.model)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        price = self.price
        return price.cost(input_tokens, output_tokens) if price else 0.0

    async def aclose(self) -> None:  # noqa: B027 -- optional hook: most providers hold nothing to close
        """Release network clients; the default has nothing to release."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"
