"""Build a provider from a spec string: the spec's registry entry (`providers.PROVIDERS`) names the
class, and the class builds itself from the parsed spec (`Provider.from_spec`)."""
from __future__ import annotations

from typing import Awaitable, Callable

from . import providers
from .config import LLMConfig
from .errors import ConfigError
from .provider import Provider
from .retry import RetryPolicy
from .spec import ProviderSpec, parse_spec


def make_provider(spec: str | ProviderSpec, config: LLMConfig | None = None, *,
                  sleep: Callable[[float], Awaitable[None]] | None = None) -> Provider:
    """The provider a spec names. `config` defaults to LLMConfig.load() (TOML + environment);
    `sleep` replaces asyncio.sleep between retries (tests record the delays with it)."""
    config = config if config is not None else LLMConfig.load()
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    retry = RetryPolicy.from_config(config.retry, sleep)

    def build(one: ProviderSpec) -> Provider:
        entry = providers.kind(one.kind)
        if entry is None:
            raise ConfigError(f"no provider for spec kind {one.kind!r}")
        return entry.provider_class().from_spec(one, config, retry, build)

    return build(parsed)
