"""Replay answers from a cassette, and record any provider into one.

Replay is strict by default: a request the cassette does not hold raises CassetteMiss naming the
request. With a fallback (`replay:PATH=INNER`) a miss is asked of INNER and recorded, which also
resumes an interrupted recording without paying twice for what is already on tape.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from .cassette import CassetteEntry, append_entry, read_cassette
from .config import Price
from .errors import CassetteMiss
from .provider import BuildInner, Provider
from .types import Completion, CompletionRequest


class RecordingProvider(Provider):
    """Asks `inner` and appends every answer to the cassette (never replays)."""

    def __init__(self, inner: Provider, cassette_path: str | Path, source: str | None = None):
        self.inner = inner
        self.path = Path(cassette_path)
        self.name, self.model = inner.name, inner.model
        self.spec = f"record:{self.path}={inner.spec}"
        self.source = source or f"{inner.spec} via record"

    @classmethod
    def from_spec(cls, spec, config, retry, build: BuildInner) -> "RecordingProvider":
        return cls(build(spec.inner), spec.path)

    @property
    def price(self) -> Price | None:
        return self.inner.price

    def request_hash(self, request: CompletionRequest) -> str:
        return self.inner.request_hash(request)

    async def complete(self, request: CompletionRequest) -> Completion:
        completion = await self.inner.complete(request)
        append_entry(self.path, CassetteEntry.make(request, self.inner.model, completion, self.source))
        return completion

    async def aclose(self) -> None:
        await self.inner.aclose()


class ReplayProvider(Provider):
    """Answers from a cassette. A prompt recorded n times is answered with its n recordings in
    order; asked more often, strict replay repeats the last one and a fallback asks the model."""

    name = "replay"

    def __init__(self, cassette_path: str | Path, fallback: RecordingProvider | None = None):
        self.path = Path(cassette_path)
        self.fallback = fallback
        self._by_hash: dict[str, list[CassetteEntry]] = {}
        self._models: list[str] = []
        for entry in read_cassette(self.path):
            self._add(entry)
        self._served: dict[str, int] = {}
        self.model = fallback.model if fallback else (
            self._models[0] if len(self._models) == 1 else "replay")
        self.spec = f"replay:{self.path}" + (f"={fallback.inner.spec}" if fallback else "")

    @classmethod
    def from_spec(cls, spec, config, retry, build: BuildInner) -> "ReplayProvider":
        """A miss goes to the inner spec, recorded into the same cassette (none: strict replay)."""
        return cls(spec.path, RecordingProvider(build(spec.inner), spec.path) if spec.inner else None)

    def request_hash(self, request: CompletionRequest) -> str:
        return self._lookup(request)[0]

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_hash.values())

    def _add(self, entry: CassetteEntry) -> None:
        self._by_hash.setdefault(entry.hash, []).append(entry)
        if entry.model not in self._models:
            self._models.append(entry.model)

    def _lookup(self, request: CompletionRequest) -> tuple[str, list[CassetteEntry]]:
        """The request's hash under each model on tape (and the fallback's), first hit wins."""
        models = list(self._models)
        if self.fallback:  # the model in use first
            models = [self.fallback.model] + [m for m in models if m != self.fallback.model]
        hashes = [request.stable_hash(model) for model in models]
        for request_hash in hashes:
            if request_hash in self._by_hash:
                return request_hash, self._by_hash[request_hash]
        return (hashes[0] if hashes else request.stable_hash("")), []

    async def complete(self, request: CompletionRequest) -> Completion:
        started = time.monotonic()
        request_hash, entries = self._lookup(request)
        served = self._served.get(request_hash, 0)
        if self.fallback and served >= len(entries):
            completion = await self.fallback.complete(request)  # recorded to the file by it
            entry = CassetteEntry.make(request, self.fallback.model, completion, self.fallback.source)
            self._add(entry)
            self._served[entry.hash] = len(self._by_hash[entry.hash])
            return completion
        if not entries:
            raise CassetteMiss(self._miss_message(request, request_hash), request_hash)
        self._served[request_hash] = served + 1
        recorded = entries[min(served, len(entries) - 1)].completion
        return replace(recorded, provider=self.name, request_hash=request_hash,
                       latency_s=time.monotonic() - started)

    def _miss_message(self, request: CompletionRequest, request_hash: str) -> str:
        last_user = next((m.content for m in reversed(request.messages) if m.role == "user"),
                         request.messages[-1].content)
        preview = " ".join(last_user.split())[:160]
        models = ", ".join(self._models) or "none (the cassette is empty or missing)"
        return (f"cassette {self.path} has no answer for request {request_hash[:12]} "
                f"(agent role {request.role!r}, {len(request.messages)} messages, last user "
                f"message: {preview!r}); models on tape: {models}. Record it with "
                f"record:{self.path}=SPEC, or replay with a fallback: replay:{self.path}=SPEC.")
