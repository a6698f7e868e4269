"""Spec strings: one short string picks a provider and a model.

    openai:gpt-5                                   OpenAI (key from OPENAI_API_KEY)
    openai:qwen2.5-coder@http://localhost:8000/v1  any OpenAI-compatible endpoint
    record:PATH=INNER_SPEC                         ask INNER_SPEC and record every answer

The prefixes and what follows each are the provider registry's (`providers.PROVIDERS`, which
docs/providers.md renders): a model (and an optional base URL), a path, or a cassette wrapping
another spec. The base URL is split off at "@http://" or "@https://" only, so model ids that
contain "@" (e.g. Vertex's "claude-3-5-sonnet@20240620") still work.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import providers
from .errors import ConfigError
from .redact import redact_url

_URL_AT = re.compile(r"@(https?://\S+)$")


def spec_help() -> str:
    """The accepted forms, for error messages (every form of every registered provider)."""
    return "expected one of: " + ", ".join(providers.spec_forms())


@dataclass(frozen=True)
class ProviderSpec:
    """A parsed spec. `kind` is the provider family after aliases ("vllm" becomes "openai")."""

    kind: str
    model: str = ""
    base_url: str | None = None
    path: str | None = None
    inner: "ProviderSpec | None" = None

    def __str__(self) -> str:
        """The spec as a user would write it, with any credentials in the URL removed."""
        if self.path is None:  # a model spec; the others name a file or folder
            url = f"@{redact_url(self.base_url)}" if self.base_url else ""
            return f"{self.kind}:{self.model}{url}"
        inner = f"={self.inner}" if self.inner else ""
        return f"{self.kind}:{self.path}{inner}"


def parse_spec(spec: str) -> ProviderSpec:
    """Parse a spec string, raising ConfigError that shows the accepted forms."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"LLM spec {spec!r} has no provider prefix; {spec_help()}")
    name, rest = spec.strip().split(":", 1)
    entry = providers.kind(name.lower())
    if entry is None:
        raise ConfigError(f"unknown LLM provider {name.lower()!r} in spec {spec!r}; {spec_help()}")
    if not rest:
        raise ConfigError(f"LLM spec {spec!r} is missing its argument; {spec_help()}")
    if entry.takes == providers.WRAPPER:
        return _parse_wrapper(entry, rest, spec)
    if entry.takes == providers.PATH:
        return ProviderSpec(entry.name, model=entry.name, path=rest)
    return _parse_model(entry, rest, spec)


def _parse_model(entry: providers.ProviderKind, rest: str, spec: str) -> ProviderSpec:
    match = _URL_AT.search(rest)
    model, base_url = (rest[: match.start()], match.group(1)) if match else (rest, None)
    if not model:
        raise ConfigError(f"LLM spec {spec!r} names no model; {spec_help()}")
    if entry.family:
        return ProviderSpec(entry.family, model=model, base_url=base_url or entry.local_url)
    return ProviderSpec(entry.name, model=model, base_url=base_url)


def _parse_wrapper(entry: providers.ProviderKind, rest: str, spec: str) -> ProviderSpec:
    path, sep, inner = rest.partition("=")
    if not path:
        raise ConfigError(f"LLM spec {spec!r} names no cassette path; {spec_help()}")
    if entry.wraps == "required" and not sep:
        raise ConfigError(f"{entry.name} spec {spec!r} needs the provider to {entry.name}: "
                          f"{entry.name}:{path}=openai:gpt-5 (for example)")
    inner_spec = parse_spec(inner) if sep else None
    if inner_spec and providers.kind(inner_spec.kind).takes == providers.WRAPPER:
        raise ConfigError(f"LLM spec {spec!r}: a cassette cannot wrap another cassette")
    return ProviderSpec(entry.name, model=inner_spec.model if inner_spec else "", path=path,
                        inner=inner_spec)
