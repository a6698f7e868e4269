"""Plain data exchanged with the llm layer: what an agent asks for and what comes back.

These are stdlib dataclasses so agents, the store and the search engine can use them without
pulling in any SDK; every type round-trips through `to_dict()` / `from_dict()` (JSON-safe).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

#: Bumped whenever the fields that enter `CompletionRequest.stable_hash` change, so old cassettes
#: and exchange folders miss loudly instead of answering a different question.
HASH_VERSION = 1

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Message:
    """One chat turn. `role` is the chat role (system/user/assistant), not the agent role."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Message.role must be one of {ROLES}, got {self.role!r}")
        if not isinstance(self.content, str):
            raise TypeError(f"Message.content must be str, got {type(self.content).__name__}")


@dataclass
class CompletionRequest:
    """A prompt for one agent role. `metadata` travels to the caller's store (run id, ask id, ...)
    but never enters the hash, so bookkeeping cannot change which recorded answer matches."""

    messages: list[Message]
    role: str = "coder"
    max_tokens: int = 8192
    temperature: float = 0.2
    stop: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.messages = [m if isinstance(m, Message) else Message(**m) for m in self.messages]
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if not self.messages:
            raise ValueError("CompletionRequest needs at least one message")

    def hash_payload(self, model: str) -> dict[str, Any]:
        """The exact object hashed by `stable_hash` (documented in docs/providers.md)."""
        return {
            "v": HASH_VERSION,
            "model": model,
            "role": self.role,
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "max_tokens": int(self.max_tokens),
            "temperature": float(self.temperature),
            "stop": list(self.stop) if self.stop else None,
        }

    def stable_hash(self, model: str = "") -> str:
        """sha256 hex of the canonical JSON (sorted keys, no spaces, UTF-8) of `hash_payload`.

        Why these fields: they decide what a model answers (messages, agent role, sampling
        params, model name as the provider names it). `metadata` is left out on purpose.
        """
        canonical = json.dumps(self.hash_payload(model), sort_keys=True,
                               separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def estimated_input_tokens(self) -> int:
        """Rough count (4 characters a token) used before a call, when no tokenizer is at hand."""
        chars = sum(len(m.content) + len(m.role) + 4 for m in self.messages)
        return max(1, chars // 4)

    def to_dict(self, with_metadata: bool = True) -> dict[str, Any]:
        data = {
            "messages": [asdict(m) for m in self.messages],
            "role": self.role,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stop": self.stop,
        }
        if with_metadata:
            data["metadata"] = dict(self.metadata)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CompletionRequest":
        return cls(
            messages=[Message(**m) for m in data["messages"]],
            role=data.get("role", "coder"),
            max_tokens=data.get("max_tokens", 8192),
            temperature=data.get("temperature", 0.2),
            stop=data.get("stop"),
            metadata=dict(data.get("metadata") or {}),
        )


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class Completion:
    """A model's answer. `finish_reason` is normalised: "stop" (natural end or stop sequence),
    "length" (hit max_tokens: the answer is probably truncated), or the provider's own word."""

    text: str
    model: str
    provider: str
    usage: Usage
    cost_usd: float
    request_hash: str
    latency_s: float
    finish_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["usage"] = asdict(self.usage)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Completion":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["usage"] = Usage(**(values.get("usage") or {}))
        return cls(**values)
