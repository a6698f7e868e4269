"""Which key goes to which endpoint.

A vendor key (OPENAI_API_KEY, ANTHROPIC_API_KEY: each hosted provider's `Vendor` in
`providers.PROVIDERS`) is sent only to that vendor's own host, never to a third-party or
self-hosted base URL; those get the env var named under [llm.endpoints].
"""
from __future__ import annotations

from urllib.parse import urlsplit

from .config import LLMConfig
from .errors import ConfigError
from .providers import Vendor
from .redact import redact_url


def is_vendor_host(base_url: str | None, vendor: Vendor) -> bool:
    return base_url is None or urlsplit(base_url).hostname == vendor.host


def resolve_key(base_url: str | None, config: LLMConfig, vendor: Vendor, provider: str) -> tuple[str, str]:
    """The key to send and a phrase naming where it came from (for auth error messages)."""
    shown = redact_url(base_url) if base_url else vendor.host
    if base_url and base_url in config.endpoints:
        env_name = config.endpoints[base_url].api_key_env
        key = config.endpoint_api_keys.get(base_url)
        if key is None:
            raise ConfigError(f"the key for {shown} is read from ${env_name}, which is not set")
        return key.get_secret_value(), f"${env_name}"
    if is_vendor_host(base_url, vendor):
        key = config.api_keys.get(vendor.env_name)
        if key is None:
            raise ConfigError(f"{vendor.env_name} is not set; export it to use "
                              f"{provider}:MODEL specs")
        return key.get_secret_value(), f"${vendor.env_name}"
    hint = f'[llm.endpoints."{shown}"] api_key_env = "NAME_OF_ENV_VAR" in the config'
    if vendor.placeholder is None:
        raise ConfigError(f"no key is configured for {shown}: add {hint}")
    return vendor.placeholder, f"{hint} (no key is configured for this endpoint)"
