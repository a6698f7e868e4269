"""LLM settings: a TOML file for what may be shared (specs, prices, limits), environment variables
for what may not (keys). Keys are SecretStr fields excluded from every dump.

The TOML is the `[llm]` table of the kernelwright config file (kernelwright.configfile: --config,
else $KW_CONFIG, else ./kernelwright.toml), or an LLM-only file; see docs/providers.md for a
complete example.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from kernelwright import configfile, envvars

from . import providers
from .errors import ConfigError

ENV_DEFAULT_SPEC = "KW_LLM"  # KERNELWRIGHT_LLM still read, with a deprecation note
ENV_CONFIG_PATH = "KW_CONFIG"  # KERNELWRIGHT_LLM_CONFIG still read
ENV_ROLE_PREFIX = "KW_LLM_ROLE_"  # KERNELWRIGHT_LLM_ROLE_* still read
DEFAULT_CONFIG_FILE = configfile.DEFAULT_NAME


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a typo in the TOML is an error, not a silent default


class Price(_Strict):
    """US dollars per million tokens."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


class ModelOptions(_Strict):
    """Wire details that differ between models. None means "pick the usual default"."""

    send_temperature: bool | None = None  # reasoning models (o*, gpt-5) reject a temperature
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    extra_body: dict = Field(default_factory=dict)  # passed through, e.g. {"top_k": 20} for vLLM


class Endpoint(_Strict):
    """Which environment variable holds the key for one OpenAI-/Anthropic-compatible base URL."""

    api_key_env: str


class RetryConfig(_Strict):
    max_retries: int = Field(5, ge=0)
    base_delay_s: float = Field(1.0, ge=0)
    max_delay_s: float = Field(60.0, ge=0)
    retry_after_cap_s: float = Field(300.0, ge=0)  # a Retry-After longer than this is cut to it


class BudgetConfig(_Strict):
    max_calls: int | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0)
    max_usd: float | None = Field(None, ge=0)


class LLMConfig(_Strict):
    default: str | None = None  # spec used by roles without an override
    roles: dict[str, str] = Field(default_factory=dict)  # agent role -> spec
    prices: dict[str, Price] = Field(default_factory=dict)  # model name (or prefix) -> price
    models: dict[str, ModelOptions] = Field(default_factory=dict)  # model name (or prefix)
    endpoints: dict[str, Endpoint] = Field(default_factory=dict)  # base URL -> key env var
    timeout_s: float = Field(600.0, gt=0)
    concurrency: int = Field(4, ge=1)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    # every registered provider's key, by its variable (providers.PROVIDERS): OPENAI_API_KEY, ...
    api_keys: dict[str, SecretStr] = Field(default_factory=dict, exclude=True, repr=False)
    endpoint_api_keys: dict[str, SecretStr] = Field(default_factory=dict, exclude=True, repr=False)

    @classmethod
    def load(cls, path: str | Path | None = None, env: Mapping[str, str] | None = None) -> "LLMConfig":
        """TOML (explicit path, else $KW_CONFIG, else ./kernelwright.toml if present) overlaid
        with environment variables."""
        env = os.environ if env is None else env
        path = configfile.find(path, env)
        data = _read_toml(Path(path)) if path else {}
        data = _apply_env(data, env)
        try:
            config = cls.model_validate(data)
        except ValidationError as exc:
            where = f" in {path}" if path else ""
            raise ConfigError(f"invalid LLM config{where}:\n{exc}") from None
        return config.with_keys_from(env)

    def with_keys_from(self, env: Mapping[str, str]) -> "LLMConfig":
        """Copy with keys read from the environment (the only place keys come from)."""
        endpoint_keys = {url: SecretStr(env[e.api_key_env])
                         for url, e in self.endpoints.items() if env.get(e.api_key_env)}
        vendor_keys = {v.env_name: SecretStr(env[v.env_name]) for v in providers.vendors() if env.get(v.env_name)}
        return self.model_copy(update={"api_keys": vendor_keys, "endpoint_api_keys": endpoint_keys})

    def spec_for(self, role: str) -> str | None:
        return self.roles.get(role, self.default)

    def price_for(self, model: str) -> Price | None:
        return _lookup(self.prices, model)

    def options_for(self, model: str) -> ModelOptions:
        return _lookup(self.models, model) or ModelOptions()

    def secrets(self) -> list[str]:
        """Every key value, for scrubbing error messages."""
        keys = [*self.api_keys.values(), *self.endpoint_api_keys.values()]
        return [k.get_secret_value() for k in keys]


def _lookup(table: Mapping[str, object], model: str):
    """Exact model name first, else the longest configured prefix ("claude-sonnet-4-5" prices
    "claude-sonnet-4-5-20250929")."""
    if model in table:
        return table[model]
    prefixes = [key for key in table if model.startswith(key)]
    return table[max(prefixes, key=len)] if prefixes else None


def _read_toml(path: Path) -> dict:
    try:
        data = configfile.read(path).get("llm", {})  # [llm] of the config, or an LLM-only file
    except configfile.ConfigFileError as exc:
        raise ConfigError(str(exc)) from None
    for key in data:
        if key in ("api_keys", "endpoint_api_keys") or key.endswith("_api_key"):
            names = ", ".join(v.env_name for v in providers.vendors())
            raise ConfigError(f"{path}: {key} may not be set in a file; keys come only from "
                              f"environment variables ({names}, or the api_key_env named under [llm.endpoints])")
    return data


def _apply_env(data: dict, env: Mapping[str, str]) -> dict:
    data = dict(data)
    default = envvars.get(ENV_DEFAULT_SPEC, env)
    if default:
        data["default"] = default
    roles = dict(data.get("roles") or {})
    for role, value in envvars.with_prefix(ENV_ROLE_PREFIX, env).items():
        roles[role.lower()] = value
    if roles:
        data["roles"] = roles
    return data
