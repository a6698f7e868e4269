"""Answer completion asks with the llm layer's Router.

Each call's record (request without secrets, answer, usage, cost, provider, latency) comes back
through the Router's `on_call` hook and is stored with the result in one transaction, so a
killed run never holds a result without its call, nor a call without its result.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from kernelwright.llm.errors import (AnswerPending, ConfigError, LLMError, ProviderAuthError)
from kernelwright.llm.router import CallRecord, Router

from ..asks import Answer, CompletionAsk
from ..results import AskFailure
from .loop import Fatal, Pending


class RouterAnswerer:
    def __init__(self, router: Router, run_id: str, store=None, problem: str = ""):
        self.router = router
        self.run_id = run_id
        self.problem = problem  # named on exchange prompts (a suite's prompts share one folder)
        self.store = store  # failed calls are stored at once (they have no result to travel with)
        self._records: dict[str, dict[str, Any]] = {}
        router.on_call = self.on_call

    def on_call(self, record: CallRecord) -> None:
        ask_id = record.request.metadata.get("ask_id")
        data = record.to_dict()
        data.update(ask_id=ask_id, agent=record.request.metadata.get("agent", record.role))
        if record.error_type == AnswerPending.__name__:
            return  # not a call: a prompt written to a folder
        if record.completion is None and self.store is not None:
            self.store.save_llm_call(self.run_id, data)
            return
        self._records[ask_id] = data

    async def answer(self, ask: CompletionAsk) -> Answer:
        metadata = {**ask.request.metadata, "run_id": self.run_id, "ask_id": ask.id, "agent": ask.agent}
        if self.problem:
            metadata["problem"] = self.problem
        request = replace(ask.request, metadata=metadata)
        try:
            completion = await self.router.complete(request)
        except AnswerPending as exc:
            raise Pending("answer", exc.prompt_paths, str(exc)) from None
        except (ConfigError, ProviderAuthError) as exc:
            raise Fatal(f"{type(exc).__name__}: {exc}") from None
        except LLMError as exc:
            return Answer(AskFailure(type(exc).__name__, str(exc)))
        return Answer(completion, llm_call=self._records.pop(ask.id, None))
