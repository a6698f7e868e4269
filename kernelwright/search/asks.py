"""What the engine asks for, and the results it is told.

An ask is plain data: a driver may answer it in this process, write it to a folder for a person or
another machine, or store it and answer it after a restart. Every ask and result round-trips
through `to_dict()` / `from_dict()` (JSON-safe), because the run store keeps them as the replay log.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Union

from kernelwright.llm.types import Completion, CompletionRequest

from .results import AskFailure, EvalResult, SeedsResult, SweepOutcome


@dataclass
class CompletionAsk:
    """A prompt for one agent ("planner", "coder", "repairer", "analyst") of one expansion job."""

    id: str
    agent: str
    request: CompletionRequest | None  # None only inside the engine, until the prompt is written
    job_id: str = ""
    kind: str = "completion"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "completion", "id": self.id, "agent": self.agent, "job_id": self.job_id,
                "request": self.request.to_dict(with_metadata=False)}


@dataclass
class SeedRecord:
    """Where a tuning instance's verdict goes in the seed cache (tune/seeds.py): its template's
    source (family and shape), the run's device key and the instance's parameters."""

    template: str
    device: str
    params: dict[str, Any]


@dataclass
class EvaluationAsk:
    """Candidate code to judge. `kind` is "judge" (correctness + timing) for now. `seed`: a tuning
    instance whose verdict the driver records in the seed cache (tune_seeds), else None."""

    id: str
    candidate_id: str
    code: str
    job_id: str = ""
    kind: str = "judge"
    profile: bool = False  # profile it too when it passes (GPU targets, within the run's profile budget)
    seed: SeedRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {"type": "evaluation", "id": self.id, "candidate_id": self.candidate_id,
                "code": self.code, "job_id": self.job_id, "kind": self.kind}
        if self.profile:  # absent when False, so asks stored before the field existed hash the same
            data["profile"] = True
        if self.seed is not None:  # likewise
            data["seed"] = dataclasses.asdict(self.seed)
        return data


@dataclass
class SweepItem:
    """One configuration of a sweep: its parameters and its instance's source (the judge's
    `judge.sweep.SweepInstance`, as plain data here: the engine imports nothing of the judge)."""

    params: dict[str, Any]
    source: str


@dataclass
class SweepAsk:
    """Instances of one template to benchmark in ONE evaluation (`judge.api.judge_sweep`: each built,
    checked on one trial and timed; tuning.py, issue 33). Its times rank configurations; the
    fastest is then judged in full by an EvaluationAsk of its own. Answered with a `SweepOutcome`.
    `template` (the template's source) and `device` (the run's seed key) let the driver record the
    times in the seed cache (tune/seeds.py); "" when seeds are off."""

    id: str
    of: str  # the candidate whose template this is
    instances: list[SweepItem]
    job_id: str = ""
    template: str = ""
    device: str = ""
    kind: str = "sweep"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "sweep", "id": self.id, "of": self.of, "job_id": self.job_id, "template": self.template,
                "device": self.device, "instances": [{"params": dict(i.params), "source": i.source}
                                                     for i in self.instances]}


@dataclass
class SeedsAsk:
    """The configurations measured fastest earlier for this template family, device and shape (the
    driver reads tune.seeds.SeedCache): where a tuning job starts. An ask, not a read in the
    engine, so the answer is in the replay log and a resumed run asks the same configurations.
    Answered with `SeedsResult`."""

    id: str
    template: str  # the template's source
    device: str  # the seed cache's device key
    limit: int = 4
    job_id: str = ""
    kind: str = "seeds"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "seeds", "id": self.id, "job_id": self.job_id, "template": self.template,
                "device": self.device, "limit": self.limit}


Ask = Union[CompletionAsk, EvaluationAsk, SweepAsk, SeedsAsk]
Result = Union[Completion, EvalResult, SweepOutcome, SeedsResult, AskFailure]


def ask_from_dict(data: dict[str, Any]) -> Ask:
    kind = data.get("type")
    if kind == "completion":
        return CompletionAsk(id=data["id"], agent=data["agent"], job_id=data.get("job_id", ""),
                             request=CompletionRequest.from_dict(data["request"]))
    if kind == "evaluation":
        seed = data.get("seed")
        return EvaluationAsk(id=data["id"], candidate_id=data["candidate_id"], code=data["code"],
                             job_id=data.get("job_id", ""), kind=data.get("kind", "judge"),
                             profile=bool(data.get("profile", False)),
                             seed=SeedRecord(seed["template"], seed["device"], dict(seed["params"])) if seed else None)
    if kind == "sweep":
        return SweepAsk(id=data["id"], of=data["of"], job_id=data.get("job_id", ""),
                        template=data.get("template", ""), device=data.get("device", ""),
                        instances=[SweepItem(dict(i["params"]), i["source"]) for i in data["instances"]])
    if kind == "seeds":
        return SeedsAsk(id=data["id"], template=data["template"], device=data["device"],
                        limit=int(data.get("limit", 4)), job_id=data.get("job_id", ""))
    raise ValueError(f"unknown ask type {kind!r}")


def ask_hash(ask: Ask) -> str:
    """sha256 of the ask's canonical JSON: a stored ask and a re-created one match when equal."""
    canonical = json.dumps(ask.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def result_to_dict(result: Result) -> dict[str, Any]:
    """Tagged JSON of a result, for the replay log."""
    if isinstance(result, Completion):
        return {"type": "completion", **result.to_dict()}
    if isinstance(result, EvalResult):
        return {"type": "evaluation", **result.to_dict()}
    if isinstance(result, SweepOutcome):
        return {"type": "sweep", **result.to_dict()}
    if isinstance(result, SeedsResult):
        return {"type": "seeds", **dataclasses.asdict(result)}
    if isinstance(result, AskFailure):
        return {"type": "failure", **dataclasses.asdict(result)}
    raise TypeError(f"cannot store a result of type {type(result).__name__}")


def result_from_dict(data: dict[str, Any]) -> Result:
    data = dict(data)
    kind = data.pop("type", None)
    if kind == "completion":
        return Completion.from_dict(data)
    if kind == "evaluation":
        return EvalResult.from_dict(data)
    if kind == "sweep":
        return SweepOutcome.from_dict(data)
    if kind == "seeds":
        return SeedsResult(configs=[dict(c) for c in data.get("configs") or []])
    if kind == "failure":
        return AskFailure(**data)
    raise ValueError(f"unknown result type {kind!r}")


@dataclass
class Answer:
    """What a driver's answerer returns: the result told to the engine plus what the store keeps
    beside it (the full verdict JSON, the LLM call record), written in the same transaction."""

    result: Result
    verdict_json: str | None = None
    llm_call: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
