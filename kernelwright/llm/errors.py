"""Errors of the llm layer. Every one carries a message a user can act on; none carries a secret.

A driver catches `LLMError` around each call: `AnswerPending` means "pause and resume later",
`BudgetExceeded` means "stop asking", provider errors mean the call failed for good.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from kernelwright.exits import EXIT_PAUSED

#: Exit status for a run that paused on unanswered exchange prompts (BSD EX_TEMPFAIL:
#: "try again later"), distinct from success (0) and failure (1, 2): kernelwright/exits.py's.
EXIT_ANSWER_PENDING = EXIT_PAUSED


class LLMError(Exception):
    """Base of every error raised by kernelwright.llm."""


class ConfigError(LLMError):
    """A spec string or config file is wrong; the message names the bad value and the fix."""


class AnswerPending(LLMError):
    """The exchange provider wrote prompt file(s) whose answer does not exist yet.

    Nothing is lost: the prompt stays on disk, and asking the same request again (after
    `--resume`) finds the answer once someone writes it.
    """

    def __init__(self, prompt_paths: Iterable[Path | str], answer_paths: Iterable[Path | str] = ()):
        self.prompt_paths = sorted({Path(p) for p in prompt_paths})
        self.answer_paths = sorted({Path(p) for p in answer_paths})
        super().__init__(self._message())

    def _message(self) -> str:
        count = len(self.prompt_paths)
        lines = [f"{count} prompt(s) wait for an answer:"]
        lines += [f"  {p}" for p in self.prompt_paths[:20]]
        if count > 20:
            lines.append(f"  ... and {count - 20} more")
        lines.append("Write each answer into the file of the same name ending in .answer.md "
                     "(X.prompt.md -> X.answer.md), then resume the run with --resume.")
        return "\n".join(lines)

    @classmethod
    def combine(cls, errors: Iterable["AnswerPending"]) -> "AnswerPending":
        """Merge the pending prompts of many concurrent asks into one error for the driver."""
        errors = list(errors)
        return cls([p for e in errors for p in e.prompt_paths],
                   [p for e in errors for p in e.answer_paths])


class BudgetExceeded(LLMError):
    """The next call could exceed a budget (calls, tokens or dollars); it was not made."""


class CassetteMiss(LLMError):
    """A strict replay found no recorded answer for this request."""

    def __init__(self, message: str, request_hash: str):
        self.request_hash = request_hash
        super().__init__(message)


class ProviderError(LLMError):
    """A provider call failed for good. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, provider: str = "", status: int | None = None):
        self.provider = provider
        self.status = status
        super().__init__(message)


class ProviderAuthError(ProviderError):
    """401/403: the key is missing, wrong or lacks access. Never retried."""


class ProviderRequestError(ProviderError):
    """400/404/422...: the request itself is wrong (unknown model, too long, bad param). Never retried."""


class ProviderUnavailable(ProviderError):
    """429/5xx/timeouts/connection errors that persisted through every retry."""


class ProviderResponseError(ProviderError):
    """The endpoint answered with something that is not a valid completion (garbage, wrong shape)."""
