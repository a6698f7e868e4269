"""Spec strings: one short string picks a provider and a model.

    openai:gpt-5                                   OpenAI (key from OPENAI_API_KEY)
    openai:qwen2.5-coder@http://localhost:8000/v1  any OpenAI-compatible endpoint
    vllm:MODEL / sglang:MODEL / ollama:MODEL       same, with that server's default local URL
    anthropic:claude-sonnet-4-5                    Anthropic (key from ANTHROPIC_API_KEY)
    replay:PATH                                    strict replay of a cassette
    replay:PATH=INNER_SPEC                         replay; on a miss ask INNER_SPEC and record it
    record:PATH=INNER_SPEC                         ask INNER_SPEC and record every answer
    exchange:DIR                                   prompts as files in DIR, answers written by hand

The base URL is split off at "@http://" or "@https://" only, so model ids that contain "@"
(e.g. Vertex's "claude-3-5-sonnet@20240620") still work.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ConfigError
from .redact import redact_url

#: Local OpenAI-compatible servers and the URL each serves by default.
LOCAL_SERVERS = {
    "vllm": "http://localhost:8000/v1",
    "sglang": "http://localhost:30000/v1",
    "ollama": "http://localhost:11434/v1",
}
KINDS = ("openai", "anthropic", "replay", "record", "exchange", *LOCAL_SERVERS)
_URL_AT = re.compile(r"@(https?://\S+)$")

SPEC_HELP = (
    "expected one of: openai:MODEL, openai:MODEL@BASE_URL, anthropic:MODEL, vllm:MODEL, "
    "sglang:MODEL, ollama:MODEL, replay:CASSETTE.jsonl, replay:CASSETTE.jsonl=SPEC, "
    "record:CASSETTE.jsonl=SPEC, exchange:DIR"
)


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
        if self.kind in ("openai", "anthropic"):
            url = f"@{redact_url(self.base_url)}" if self.base_url else ""
            return f"{self.kind}:{self.model}{url}"
        if self.kind == "exchange":
            return f"exchange:{self.path}"
        inner = f"={self.inner}" if self.inner else ""
        return f"{self.kind}:{self.path}{inner}"


def parse_spec(spec: str) -> ProviderSpec:
    """Parse a spec string, raising ConfigError that shows the accepted forms."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"LLM spec {spec!r} has no provider prefix; {SPEC_HELP}")
    kind, rest = spec.strip().split(":", 1)
    kind = kind.lower()
    if kind not in KINDS:
        raise ConfigError(f"unknown LLM provider {kind!r} in spec {spec!r}; {SPEC_HELP}")
    if not rest:
        raise ConfigError(f"LLM spec {spec!r} is missing its argument; {SPEC_HELP}")
    if kind in ("replay", "record"):
        return _parse_wrapper(kind, rest, spec)
    if kind == "exchange":
        return ProviderSpec("exchange", model="exchange", path=rest)
    return _parse_model(kind, rest, spec)


def _parse_model(kind: str, rest: str, spec: str) -> ProviderSpec:
    match = _URL_AT.search(rest)
    model, base_url = (rest[: match.start()], match.group(1)) if match else (rest, None)
    if not model:
        raise ConfigError(f"LLM spec {spec!r} names no model; {SPEC_HELP}")
    if kind in LOCAL_SERVERS:
        return ProviderSpec("openai", model=model, base_url=base_url or LOCAL_SERVERS[kind])
    return ProviderSpec(kind, model=model, base_url=base_url)


def _parse_wrapper(kind: str, rest: str, spec: str) -> ProviderSpec:
    path, sep, inner = rest.partition("=")
    if not path:
        raise ConfigError(f"LLM spec {spec!r} names no cassette path; {SPEC_HELP}")
    if kind == "record" and not sep:
        raise ConfigError(f"record spec {spec!r} needs the provider to record: "
                          f"record:{path}=openai:gpt-5 (for example)")
    inner_spec = parse_spec(inner) if sep else None
    if inner_spec and inner_spec.kind in ("replay", "record"):
        raise ConfigError(f"LLM spec {spec!r}: a cassette cannot wrap another cassette")
    return ProviderSpec(kind, model=inner_spec.model if inner_spec else "", path=path,
                        inner=inner_spec)
