"""The exchange provider: a person or an outside agent answers prompts through files.

Layout of the folder, for a request whose stable hash starts with <h12>:

    <h12>.prompt.md     readable prompt: role, parameters, each message as a section, instructions
    <h12>.request.json  the same request as JSON (for scripts and outside agents)
    <h12>.answer.md     written by whoever answers (<h12>.answer.txt is read too)

Asking writes the prompt files (once: the same request always maps to the same files) and raises
AnswerPending while no non-empty answer exists. The run stops cleanly; after answers are written,
`--resume` asks the same requests again and finds them.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from string import Template

from kernelwright.files import atomic_write

from .errors import AnswerPending, ConfigError
from .provider import BuildInner, Provider
from .types import Completion, CompletionRequest, Usage

TEMPLATES = Path(__file__).parent / "templates"
SHORT_HASH = 12
ANSWER_SUFFIXES = (".answer.md", ".answer.txt")


@dataclass(frozen=True)
class PendingPrompt:
    """A prompt that waits for its answer file."""

    hash: str
    prompt_path: Path
    answer_path: Path
    request: CompletionRequest
    created_at: str


def files_for(folder: Path, request_hash: str) -> dict[str, Path]:
    short = request_hash[:SHORT_HASH]
    return {"prompt": folder / f"{short}.prompt.md", "request": folder / f"{short}.request.json",
            "answer": folder / f"{short}.answer.md"}


def read_answer(folder: Path, short: str) -> str | None:
    """The answer text, or None while no answer file holds anything but whitespace."""
    for suffix in ANSWER_SUFFIXES:
        path = folder / f"{short}{suffix}"
        if path.is_file():
            text = path.read_text(encoding="utf-8-sig")
            if text.strip():
                return text
    return None


def list_pending(folder: str | Path) -> list[PendingPrompt]:
    """Prompts in `folder` without an answer yet, oldest first."""
    folder = Path(folder)
    pending = []
    for sidecar in sorted(folder.glob("*.request.json")):
        data = json.loads(sidecar.read_text(encoding="utf-8"))
        short = sidecar.name[: -len(".request.json")]
        if read_answer(folder, short) is None:
            paths = files_for(folder, data["hash"])
            pending.append(PendingPrompt(data["hash"], paths["prompt"], paths["answer"],
                                         CompletionRequest.from_dict(data["request"]),
                                         data.get("created_at", "")))
    return sorted(pending, key=lambda p: (p.created_at, p.hash))


class ExchangeProvider(Provider):
    name = "exchange"

    def __init__(self, folder: str | Path, model: str = "exchange"):
        self.folder = Path(folder)
        self.model = model
        self.spec = f"exchange:{self.folder}"

    @classmethod
    def from_spec(cls, spec, config, retry, build: BuildInner) -> "ExchangeProvider":
        return cls(spec.path)

    async def complete(self, request: CompletionRequest) -> Completion:
        started = time.monotonic()
        request_hash = self.request_hash(request)
        paths = files_for(self.folder, request_hash)
        self._check_collision(paths["request"], request_hash)
        text = read_answer(self.folder, request_hash[:SHORT_HASH])
        if text is None:
            self._write_prompt(request, request_hash, paths)
            raise AnswerPending([paths["prompt"]], [paths["answer"]])
        usage = Usage(request.estimated_input_tokens(), max(1, len(text) // 4))  # estimates
        return Completion(text=text, model=self.model, provider=self.name, usage=usage,
                          cost_usd=0.0, request_hash=request_hash,
                          latency_s=time.monotonic() - started, finish_reason="stop")

    def _check_collision(self, sidecar: Path, request_hash: str) -> None:
        if sidecar.is_file():
            recorded = json.loads(sidecar.read_text(encoding="utf-8")).get("hash")
            if recorded != request_hash:
                raise ConfigError(f"{sidecar} belongs to request {recorded}, not {request_hash}; "
                                  "two prompts share a 12-digit prefix - move that file away")

    def _write_prompt(self, request: CompletionRequest, request_hash: str, paths: dict) -> None:
        """Write the prompt and its sidecar once; a re-asked prompt keeps its original files."""
        if paths["prompt"].is_file() and paths["request"].is_file():
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        created_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        sidecar = {"hash": request_hash, "model": self.model, "created_at": created_at,
                   "prompt_file": paths["prompt"].name, "answer_file": paths["answer"].name,
                   "request": request.to_dict()}
        atomic_write(paths["request"], json.dumps(sidecar, indent=2, ensure_ascii=False) + "\n")
        atomic_write(paths["prompt"], render_prompt(request, request_hash, created_at, paths))


def render_prompt(request: CompletionRequest, request_hash: str, created_at: str,
                  paths: dict[str, Path]) -> str:
    message_template = Template((TEMPLATES / "exchange_message.md").read_text(encoding="utf-8"))
    count = len(request.messages)
    sections = "".join(
        message_template.substitute(number=i, count=count, role=m.role, content=m.content.rstrip())
        for i, m in enumerate(request.messages, start=1))
    page = Template((TEMPLATES / "exchange_prompt.md").read_text(encoding="utf-8"))
    problem = request.metadata.get("problem") or "named in the messages below"
    run = request.metadata.get("run_id")
    return page.substitute(
        short=request_hash[:SHORT_HASH], hash=request_hash, role=request.role,
        problem=f"`{problem}`" + (f" (run `{run}`)" if run else ""),
        max_tokens=request.max_tokens, temperature=request.temperature,
        stop=", ".join(f"`{s}`" for s in request.stop) if request.stop else "none",
        created_at=created_at, answer_name=paths["answer"].name,
        request_name=paths["request"].name, messages=sections.rstrip() + "\n")
