"""Verdicts judged again after a system error, read back into a batch run on `--resume`.

`kernelwright judge --batch DIR --retry-errors` judges again, once, the requests whose verdict is a
system error (judge/scheduling/batch.py `system_error`) and replaces the verdict file with one that carries the
`rejudged_after_system_error` flag. A run that had already stored the first verdict takes the new
one on its next resume: for every evaluation whose stored verdict is a system error (the same
rule) and whose request's verdict file now carries that flag and differs, the store's verdict is
replaced in place and an "amend" entry is journaled (store.RunStore.amend_verdict), then the
engine hears it (`Engine.amend`): the node's status and speedups, the tree, the best candidate and
the report follow. A replay tells the engine the journaled amendment, never the folder, so a later
resume replays the same. The candidate's own verdict (correct, or its fault) is never replaced.

The template autotuner's runs (search/drivers/autotune.py, no engine) take them by the same rule
(`find` over their instances' requests): the store's verdict, the instance's row and measurement
are replaced in one transaction with the same "amend" entry, and the tuner, replayed from the
store, follows (its measured time, its best instance).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.judge.scheduling import batch, batch_folder
from kernelwright.judge.verdict import Verdict

from ..results import EvalResult


@dataclass(frozen=True)
class Requested:
    """A stored evaluation and the name of its request in the batch folder."""

    ask_id: str | None  # None: a run without asks (the template tuner's instances)
    candidate_id: str
    name: str  # the request's name: its verdict file is NAME + batch_folder.VERDICT_SUFFIX


@dataclass(frozen=True)
class Amendment:
    ask_id: str | None
    candidate_id: str
    verdict: dict[str, Any]  # the verdict judged again, as the store keeps it
    result: EvalResult  # what the engine hears
    replaced: str  # why the stored verdict was a system error
    judged: Verdict  # the verdict judged again, as read

    def payload(self) -> dict[str, Any]:
        """The journal entry's payload: what a replay tells the engine."""
        return {"ask_id": self.ask_id, "candidate_id": self.candidate_id, "result": self.result.to_dict(),
                "replaced": self.replaced}


def asked(store, run_id: str, prefix: str = "") -> list[Requested]:
    """The evaluations an engine asked for (request NAME: PREFIX + candidate id)."""
    return [Requested(ask["id"], ask["candidate_id"], f"{prefix}{ask['candidate_id']}") for ask in store.asks(run_id)
            if ask["kind"] == "evaluation" and ask.get("candidate_id") and ask.get("result") is not None]


def find(store, run_id: str, folder: Path, requested: list[Requested]) -> list[Amendment]:
    """The stored verdicts of `requested` that a re-judged verdict file in `folder` replaces."""
    found = []
    for item in requested:
        stored = store.verdict(run_id, item.candidate_id)
        # the batch runner's rule: not judged, or correct with a baseline out of GPU memory
        why = batch.verdict_system_error(stored) if stored else None
        new = _rejudged(folder / f"{item.name}{batch_folder.VERDICT_SUFFIX}") if why else None
        if new is not None and json.loads(new.to_json()) != stored:
            found.append(Amendment(item.ask_id, item.candidate_id, json.loads(new.to_json()),
                                   EvalResult.from_verdict(new), why, new))
    return found


def apply(store, run_id: str, engine, folder: Path, prefix: str, elapsed_s: float) -> list[Amendment]:
    """Store and journal each amendment, then tell the engine (the order a replay follows)."""
    found = find(store, run_id, folder, asked(store, run_id, prefix))
    for amendment in found:
        store.amend_verdict(run_id, amendment.candidate_id, amendment.verdict, amendment.payload(), elapsed_s)
        engine.amend(amendment.candidate_id, amendment.result)
    return found


def replay(engine, payload: dict[str, Any]) -> None:
    """A journaled amendment, told again to a replaying engine."""
    engine.amend(payload["candidate_id"], EvalResult.from_dict(payload["result"]))


def _rejudged(path: Path) -> Verdict | None:
    """The verdict file at `path` when it is there, readable and judged again after a system error."""
    try:
        verdict = Verdict.from_json(path.read_text())
    except (OSError, ValueError, TypeError):
        return None
    return verdict if any(f.code == batch.REJUDGED for f in verdict.flags) else None
