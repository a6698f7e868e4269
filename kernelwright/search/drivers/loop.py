"""The driver loop: answer the engine's asks concurrently, persisting as it goes.

Order of writes, which is what makes a killed run resumable with nothing lost:
1. an ask is stored before anyone starts answering it;
2. a result is stored (with its verdict or LLM call, one transaction) before the engine hears it;
3. the tree the engine changed is mirrored afterwards (a replay rebuilds it if the process dies
   in between).

An answerer that cannot answer yet raises `Pending` (an exchange prompt without its answer file, a
batch evaluation not yet judged); the loop keeps answering everything else and returns when only
pending asks are left.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from kernelwright.report.best import write_best

from ..asks import Answer, Ask, CompletionAsk, ask_from_dict, ask_hash, result_to_dict
from ..core import Engine
from ..results import AskFailure

log = logging.getLogger("kernelwright.search")


class Pending(Exception):
    """The ask cannot be answered now; `kind` is "answer" (exchange) or "evaluation" (batch)."""

    def __init__(self, kind: str, paths: list[Path], message: str):
        self.kind = kind
        self.paths = [Path(p) for p in paths]
        super().__init__(message)


class Fatal(Exception):
    """An error every later ask would hit too (a wrong LLM config, a bad key): stop the run."""


class ReplayDiverged(RuntimeError):
    """The stored log does not match what this version of the engine asks."""


class Answerer(Protocol):
    async def answer(self, ask: Ask) -> Answer: ...


@dataclass
class DriveOutcome:
    told: int = 0
    pending: dict[str, Pending] = field(default_factory=dict)  # ask id -> why it waits

    def pending_of(self, kind: str) -> list[Pending]:
        return [p for p in self.pending.values() if p.kind == kind]


def _ask_number(ask_id: str) -> int:
    digits = "".join(ch for ch in ask_id if ch.isdigit())
    return int(digits) if digits else 0


class Mirror:
    """Writes what the engine did into the store: asks, results, the changed part of the tree, and
    (given `best_path`) the best candidate's file whenever the best changes."""

    def __init__(self, store, run_id: str, objective: str, best_path: Path | None = None):
        self.store, self.run_id, self.objective = store, run_id, objective
        self.best_path = best_path
        self._best_written: str | None = None

    def persist_ask(self, ask: Ask) -> Ask:
        """Store `ask` unless stored already; return what is to be executed (the stored version
        wins, so a resumed exchange prompt is byte-identical to the one a person answered)."""
        payload, digest = ask.to_dict(), ask_hash(ask)
        stored = self.store.ask(self.run_id, ask.id)
        if stored is None:
            self.store.save_ask(self.run_id, payload, digest)
            return ask
        if stored["payload_hash"] == digest:
            return ask
        old = stored["payload"]
        if old.get("type") != payload["type"] or old.get("agent") != payload.get("agent") \
                or old.get("candidate_id") != payload.get("candidate_id"):
            raise ReplayDiverged(
                f"ask {ask.id} was stored as {old.get('type')}/{old.get('agent') or old.get('candidate_id')} "
                f"but the engine now asks {payload['type']}/{payload.get('agent') or payload.get('candidate_id')}: "
                "the run was made by a different version of kernelwright or with different settings")
        self.store.add_event(self.run_id, "ask_differs", {"ask": ask.id, "note": "stored version used"})
        return ask_from_dict(old)

    def save_answer(self, ask: Ask, answer: Answer, elapsed_s: float, with_next: bool = False) -> None:
        verdict = None
        if answer.verdict_json is not None:
            verdict = json.loads(answer.verdict_json)
        self.store.save_result(self.run_id, ask.id, result_to_dict(answer.result), elapsed_s,
                               verdict=verdict, llm_call=answer.llm_call, with_next=with_next)
        if isinstance(answer.result, AskFailure):
            log.warning("ask %s failed: %s: %s", ask.id, answer.result.kind, answer.result.message)
            self.store.add_event(self.run_id, "ask_failed", {"ask": ask.id, "kind": answer.result.kind,
                                                             "message": answer.result.message[:2000]})

    def sync_tree(self, engine: Engine) -> None:
        nodes = [node_row(n, self.objective) for n in engine.take_changed()]
        self.store.upsert_candidates(self.run_id, nodes)
        best = engine.best()
        snapshot = engine.snapshot()
        self.store.update_run(self.run_id, best_candidate=best.id if best else None,
                              best_speedup=snapshot["best_speedup"], spend=snapshot["spend"])
        if best is not None and self.best_path is not None and best.id != self._best_written:
            write_best(self.store, self.run_id, self.best_path, best.id)
            self._best_written = best.id


def node_row(node, objective: str) -> dict[str, Any]:
    """A node as the store's candidates table keeps it."""
    row = node.to_dict()
    row["speedup"] = node.speedup(objective)
    row["code_hash"] = hashlib.sha256(node.code.encode()).hexdigest() if node.code else None
    return row


def _waiting_on(running: dict[str, tuple[Ask, "asyncio.Task"]]) -> dict[str, int]:
    """Asks in flight: LLM answers and evaluations."""
    llm = sum(1 for ask, _ in running.values() if isinstance(ask, CompletionAsk))
    return {"llm": llm, "judge": len(running) - llm}


async def drive(engine: Engine, mirror: Mirror, *, completions: Answerer, evaluations: Answerer,
                clock: Callable[[], float], on_progress: Callable[[dict], None] | None = None) -> DriveOutcome:
    """Answer asks until the engine is done or only pending asks remain."""
    outcome = DriveOutcome()
    running: dict[str, tuple[Ask, asyncio.Task]] = {}
    said: dict[str, int] | None = None  # the asks in flight last told to on_progress
    try:
        while True:
            for ask in engine.ask():
                if ask.id in running or ask.id in outcome.pending:
                    continue
                to_run = mirror.persist_ask(ask)
                answerer = completions if isinstance(to_run, CompletionAsk) else evaluations
                running[ask.id] = (to_run, asyncio.create_task(answerer.answer(to_run), name=ask.id))
            if not running:
                break
            if on_progress is not None:  # what the run waits for now (the CLI's heartbeat says it)
                waiting = _waiting_on(running)
                if waiting != said:
                    said = waiting
                    on_progress({**engine.snapshot(), "waiting_on": waiting})
            done, _ = await asyncio.wait([t for _, t in running.values()], return_when=asyncio.FIRST_COMPLETED)
            arrived = []
            for task in sorted(done, key=lambda t: _ask_number(t.get_name())):
                ask, _ = running.pop(task.get_name())
                try:
                    arrived.append((ask, task.result()))
                except Pending as pending:
                    outcome.pending[ask.id] = pending
            if arrived:  # heard together: no prompt is written between two of them (a stale best)
                elapsed = clock()
                for index, (ask, answer) in enumerate(arrived):
                    mirror.save_answer(ask, answer, elapsed, with_next=index < len(arrived) - 1)
                engine.tell_many([(ask.id, answer.result) for ask, answer in arrived], elapsed)
                outcome.told += len(arrived)
                mirror.sync_tree(engine)
                if on_progress is not None:
                    on_progress({**engine.snapshot(), "waiting_on": _waiting_on(running)})
    finally:
        for _, task in running.values():
            task.cancel()
        if running:
            await asyncio.gather(*(t for _, t in running.values()), return_exceptions=True)
    return outcome
