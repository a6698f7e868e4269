"""The engine's jobs and the one interface they have to it.

Two kinds of job run inside the engine: expansions (expansion.py: a node turned into a new
candidate by the agents) and tuning jobs (tuning.py: a candidate templatized and its parameters
searched). Both read the engine's shared state and change it only through `JobHost`, which
`core.Engine` implements: an ask goes out, a node changed, what the running jobs still reserve of
the budget, a node joined the search tree. The engine stays the one owner of ask ids, outstanding
asks and the change list, so the same tells give the same asks whichever job made them.

`Job` (an expansion) lives here, not in the engine, because strategies read it too
(strategies/base.py): the engine imports the strategies, and they import nothing of the engine.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kernelwright.agents.types import Plan
from kernelwright.llm.types import Message
from kernelwright.memory.trajectory import Trajectory

from .asks import CompletionAsk, EvaluationAsk, SeedsAsk, SweepAsk
from .budget import SearchBudget
from .context import ContextBuilder
from .settings import Settings
from .tree import Node, Tree

if TYPE_CHECKING:  # tune/ is imported when a tuning job runs: the engine's import stays free of it
    from kernelwright.tune.state import TunerState
    from kernelwright.tune.template import Template

class EngineError(RuntimeError):
    """The engine was told something it did not ask (a replay log that does not match)."""


# an expansion's stages; a tuning job's
ANALYZE, PLAN, CODE, EVALUATE, REPAIR = "analyze", "plan", "code", "evaluate", "repair"
TEMPLATIZE, MEASURE = "templatize", "measure"


@dataclass
class Job:
    """One expansion: [analyst] -> planner -> coder -> evaluation -> (failed?) repairer ... (expansion.py)."""

    id: str
    parent_id: str  # the node this job expands (its search parent)
    action: str  # "draft" (from the reference) or "improve"
    stage: str = PLAN
    plan: Plan | None = None
    plan_text: str = ""
    approach_key: str = "unspecified"
    skill_tags: list[str] = field(default_factory=list)
    node_id: str | None = None  # latest candidate of this job
    repairs: int = 0
    retries: int = 0  # parse retries used at the current stage
    retry: tuple[str, Any] | None = None  # (unusable answer, ParseFailure) for a re-ask (Agent.retry_request)
    ask_id: str | None = None  # the ask out now; None while waiting for a sibling planner
    generation: int = 0  # beam search bookkeeping
    skills: list[Any] | None = None  # the ranked skills of this expansion, shared by its prompts
    attempt: int = 0  # expansion number of its node (siblings.py)
    attempts: int = 1  # expansions of its node in progress when it started, itself included


@dataclass
class TuneJob:
    """One tuning job: a candidate templatized, its default instance checked, its parameters tuned (tuning.py)."""

    id: str  # "tune1", ...: the job id of its asks
    node_id: str  # the candidate being templatized
    number: int = 1  # the run's n-th tuning job (seeds its tuner)
    stage: str = TEMPLATIZE
    ask_id: str | None = None
    retries: int = 0  # Templatizer re-asks used
    feedback: list[Message] = field(default_factory=list)  # the unusable answer + the parser's feedback
    failure: str | None = None  # why the last template was refused, shown to the Templatizer on a re-ask
    template: "Template | None" = None
    state: "TunerState | None" = None
    default_id: str | None = None  # the node of the current template's default instance
    asked: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)  # ask id -> (params, node id)
    instances: list[str] = field(default_factory=list)  # every instance node this job judged
    calls: int = 0
    evals: int = 0
    reserve: int = 0  # evaluations held back for this job when it started (expansions leave them alone)
    notes: list[str] = field(default_factory=list)  # what went wrong, in order
    seeds: list[dict[str, Any]] | None = None  # the seed cache's configurations, as told (None: not asked)
    sweeps: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # sweep ask id -> its configurations
    winners: dict[str, str] = field(default_factory=dict)  # evaluation ask id of a sweep's finalist -> sweep ask id
    finalists: dict[str, list[Any]] = field(default_factory=dict)  # sweep ask id -> runners-up (tune Measurements) untold
    unrun: list[dict[str, Any]] = field(default_factory=list)  # configurations a sweep never reached, to send again
    resent: set[str] = field(default_factory=set)  # config keys sent again once already
    sweep_log: list[dict[str, Any]] = field(default_factory=list)  # per sweep: configurations, timed, skipped
    sweep_cost: list[float] = field(default_factory=lambda: [0.0, 0.0])  # the sweeps' device and judge seconds


class JobHost(Protocol):
    """What the engine offers its jobs (an expansion's `Job`, tuning's `TuneJob`: anything with
    `id` and `ask_id`). The state is read (and changed in place: nodes, spend); the asks, the
    change list and the reservations go through the methods."""

    settings: Settings
    tree: Tree
    trajectory: Trajectory
    budget: SearchBudget
    contexts: ContextBuilder
    stop_reason: str | None

    def ask_completion(self, job: Any, agent: str) -> CompletionAsk:
        """A prompt for `agent` on `job`'s behalf (one LLM call spent); its text is written once
        everything told with it was heard (the job's `request(job, agent)`)."""

    def ask_evaluation(self, job: Any, node: Node, profile: bool = False, seed: Any = None) -> EvaluationAsk:
        """`node`'s code to judge on `job`'s behalf (one evaluation spent); `seed` (asks.SeedRecord):
        the driver records the verdict in the seed cache."""

    def ask_sweep(self, job: Any, of: Node, instances: list, template: str = "", device: str = "") -> SweepAsk:
        """Instances (asks.SweepItem) of `of`'s template benchmarked in one evaluation on
        `job`'s behalf (one evaluation spent); `template` and `device` let the driver record the
        times as seeds."""

    def ask_seeds(self, job: Any, template: str, device: str, limit: int) -> SeedsAsk:
        """The seed cache's best configurations for `template` on `device` (no budget spent)."""

    def changed(self, *node_ids: str) -> None:
        """These nodes were created or updated (the driver mirrors them to the store)."""

    def reserved(self, exclude: Any = None) -> tuple[int, int]:
        """Calls and evaluations the running jobs of every kind but `exclude` still hold back."""

    def in_progress(self, exclude: Any = None) -> list[tuple[str, str]]:
        """(approach, first step) of what the running jobs but `exclude` are doing, for planners."""

    def adopt(self, node: Node) -> None:
        """`node` joined the search tree outside an expansion (a tuned instance): the strategy learns it."""
