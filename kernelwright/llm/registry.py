"""Build a provider from a spec string."""
from __future__ import annotations

from typing import Awaitable, Callable

from .config import LLMConfig
from .errors import ConfigError
from .exchange import ExchangeProvider
from .provider import Provider
from .replay import RecordingProvider, ReplayProvider
from .retry import RetryPolicy
from .spec import ProviderSpec, parse_spec


def make_provider(spec: str | ProviderSpec, config: LLMConfig | None = None, *,
                  sleep: Callable[[float], Awaitable[None]] | None = None) -> Provider:
    """The provider a spec names. `config` defaults to LLMConfig.load() (TOML + environment);
    `sleep` replaces asyncio.sleep between retries (tests record the delays with it)."""
    config = config if config is not None else LLMConfig.load()
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    return _build(parsed, config, RetryPolicy.from_config(config.retry, sleep))


def _build(spec: ProviderSpec, config: LLMConfig, retry: RetryPolicy) -> Provider:
    if spec.kind == "openai":
        from .openai_provider import OpenAIProvider

        return OpenAIProvider(spec, config, retry)
    if spec.kind == "anthropic":
        from .anthropic_provider import AnthropicProvider

        return AnthropicProvider(spec, config, retry)
    if spec.kind == "exchange":
        return ExchangeProvider(spec.path)
    if spec.kind == "record":
        return RecordingProvider(_build(spec.inner, config, retry), spec.path)
    if spec.kind == "replay":
        fallback = None
        if spec.inner is not None:
            fallback = RecordingProvider(_build(spec.inner, config, retry), spec.path)
        return ReplayProvider(spec.path, fallback)
    raise ConfigError(f"no provider for spec kind {spec.kind!r}")
