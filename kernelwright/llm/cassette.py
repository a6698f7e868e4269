"""Cassettes: recorded answers in a JSONL file, one call a line.

    {"hash": "<sha256 of the request, see CompletionRequest.stable_hash>",
     "request": {"model": ..., "messages": [...], "role": ..., "max_tokens": ..., "temperature": ...,
                 "stop": ...},
     "completion": {"text": ..., "model": ..., "provider": ..., "usage": {...}, "cost_usd": ...,
                    "request_hash": ..., "latency_s": ..., "finish_reason": ...},
     "recorded_at": "2025-01-01T00:00:00+00:00",
     "source": "openai:gpt-5 via record"}          # or "hand-written" for test fixtures

`request.model` is the model name that entered the hash (the spec's model), which can differ
from `completion.model` (the server's own, often dated, name). The same hash may appear on several
lines when a prompt was asked several times: replay hands them out in order.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .types import Completion, CompletionRequest

FORMAT_VERSION = 1


@dataclass
class CassetteEntry:
    hash: str
    request: dict[str, Any]
    completion: Completion
    recorded_at: str
    source: str

    @property
    def model(self) -> str:
        return self.request.get("model", "")

    def to_json(self) -> str:
        return json.dumps({"hash": self.hash, "request": self.request,
                           "completion": self.completion.to_dict(),
                           "recorded_at": self.recorded_at, "source": self.source,
                           "v": FORMAT_VERSION}, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> "CassetteEntry":
        data = json.loads(line)
        return cls(hash=data["hash"], request=data["request"],
                   completion=Completion.from_dict(data["completion"]),
                   recorded_at=data.get("recorded_at", ""), source=data.get("source", ""))

    @classmethod
    def make(cls, request: CompletionRequest, model: str, completion: Completion,
             source: str) -> "CassetteEntry":
        """An entry for `request` as hashed under `model`; metadata is left out on purpose."""
        return cls(hash=request.stable_hash(model),
                   request={"model": model, **request.to_dict(with_metadata=False)},
                   completion=completion, recorded_at=datetime.now(timezone.utc).isoformat(),
                   source=source)


def read_cassette(path: Path) -> list[CassetteEntry]:
    """All entries, in file order. A missing file is an empty cassette; a bad line is an error
    naming the file and line (a corrupt cassette must not replay half its answers silently)."""
    if not path.exists():
        return []
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append(CassetteEntry.from_json(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"cassette {path} line {number} is not a valid entry: {exc}") from None
    return entries


def append_entry(path: Path, entry: CassetteEntry) -> None:
    """Append one line and flush it, so an interrupted run keeps everything recorded so far."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(entry.to_json() + "\n")
        handle.flush()
