"""The ask/tell engine: a pure state machine that searches for a faster correct ModelNew.

The engine does no I/O, reads no clock, calls no model and runs no judge. It hands out asks
(`ask()`: prompts for agents, candidates to judge) and is told their results (`tell()`); drivers
(drivers/) answer the asks however they like. New asks are created only inside `tell()`,
`set_limits()` and the constructor, as a function of what was told, so the same sequence of
tells always yields the same asks: a run is resumed by building a fresh engine and replaying
the stored tells in order (the asks that had no result come out of `ask()` again).

The work is done by jobs of two kinds, each behind the one interface the engine implements
(jobs.JobHost: ask, mark changed, what is reserved, adopt a node):

- expansions (expansion.py): a node turned into a new candidate,
  `[analyst] -> planner -> coder -> evaluation -> (failed?) repairer -> evaluation ... (<= K)`;
  the strategy chooses which node a job expands, and learns the job's final candidate;
- tuning jobs (tuning.py: Templatizer, default instance, tuner instances), started on a correct
  candidate that ends its expansion among the best; the best instance joins the tree;
- the start (start.py), when the run was given one (torch.compile's kernels, `kernelwright seed`):
  judged first, before any expansion starts; when it passes it joins the tree as the candidate to beat.

The engine owns what they share: the ask ids (one counter), the outstanding asks and which job
each belongs to, the list of changed nodes, and the order in which prompts are written.
"""
from __future__ import annotations

import random
from typing import Any, Mapping

from kernelwright.agents import Analyst, Coder, Planner, Repairer, Templatizer
from kernelwright.llm.types import Completion
from kernelwright.memory.trajectory import Trajectory

from .asks import Ask, CompletionAsk, EvaluationAsk, Result, SeedsAsk, SweepAsk
from .budget import SearchBudget, Limits
from .context import ContextBuilder, SkillRanker
from .expansion import Expansions
from .jobs import EngineError, Job
from .problem_info import ProblemInfo
from .results import AskFailure, EvalResult, SeedsResult, SweepOutcome
from .settings import Settings
from .start import Start, Starting
from .strategies import Strategy, make_strategy
from .tree import FAILED, PASSED, ROOT_ID, Node, Tree
from .tuning import Tuning
from .values import node_value

__all__ = ["AGENT_NAMES", "Engine", "EngineError", "default_agents"]

AGENT_NAMES = ("planner", "coder", "repairer", "analyst")


def default_agents(backend: str | None = None, prompt_dirs=None, known_skills=None) -> dict[str, Any]:
    """The built-in agents; the code writers check answers for `backend`; with `known_skills` (the
    library's names) only citations of real skills become skill tags."""
    return {"planner": Planner(prompt_dirs, known_skills=known_skills), "coder": Coder(prompt_dirs, backend=backend),
            "repairer": Repairer(prompt_dirs, backend=backend),
            "analyst": Analyst(prompt_dirs, known_skills=known_skills), "templatizer": Templatizer(prompt_dirs)}


# what each kind of ask is answered with (an AskFailure answers any), and its name in errors
_ANSWERS = {CompletionAsk: (Completion, "a completion"), EvaluationAsk: (EvalResult, "an evaluation"),
            SweepAsk: (SweepOutcome, "a sweep"), SeedsAsk: (SeedsResult, "the tuning seeds")}


class Engine:
    """The ask/tell core; implements jobs.JobHost for its expansions and tuning jobs."""

    def __init__(self, problem: ProblemInfo, strategy: str | Strategy, budget: Limits | None = None,
                 settings: Settings | None = None, rng_seed: int = 0, *,
                 agents: Mapping[str, Any] | None = None, skills: SkillRanker | None = None,
                 skill_names: frozenset[str] | None = None, target: Any = None,
                 extra: Mapping[str, Any] | None = None, prompt_dirs: list[str] | None = None,
                 start: Start | None = None):
        """`target` is the evaluation device (judge.target.Target, read generically), `extra` goes
        to every AgentContext (e.g. the tolerances the judge applies); `prompt_dirs` are folders
        whose prompt files override the built-in ones by name (agents/templates.py); `start` is a
        candidate to judge first and start from (start.py: the inductor seed)."""
        self.problem = problem
        self.settings = settings or Settings()
        self.strategy = make_strategy(strategy, self.settings) if isinstance(strategy, str) else strategy
        self.budget = SearchBudget(budget or Limits())
        self.agents = dict(agents) if agents is not None else default_agents(problem.backend, prompt_dirs, known_skills=skill_names)
        missing = [a for a in AGENT_NAMES if a not in self.agents]
        if missing:
            raise ValueError(f"agents missing: {', '.join(missing)}")
        self.tree = Tree(problem.source)
        self.trajectory = Trajectory()
        self.contexts = ContextBuilder(problem, self.settings, skills, target=target, extra=extra,
                                       skill_names=skill_names)
        self.seed = rng_seed
        self.rng = random.Random(rng_seed)
        self.stop_reason: str | None = None
        self.tuning = Tuning(self, self.agents, rng_seed)  # the tuning step's jobs (tuning.py)
        self.expansions = Expansions(self, self.strategy, self.agents, self.rng, on_leaf=self.tuning.consider)
        self._outstanding: dict[str, Ask] = {}
        self._ask_jobs: dict[str, str] = {}
        self._ask_counter = 0
        self._changed: set[str] = {ROOT_ID}
        self._unrendered: list[tuple[CompletionAsk, Any]] = []  # asks whose prompt is written last
        self.starting = Starting(self, start)  # the start's evaluation: the first ask, when given
        self.starting.begin()
        self._filling()

    # ---- the public surface -------------------------------------------------------------

    def ask(self) -> list[Ask]:
        """Every ask not yet told, oldest first (the same list until something is told)."""
        return list(self._outstanding.values())

    def tell(self, ask_id: str, result: Result, elapsed_s: float | None = None) -> None:
        """The result of one ask; `elapsed_s` is the run's active wall time now (for the budget)."""
        self.tell_many([(ask_id, result)], elapsed_s)

    def tell_many(self, results: list[tuple[str, Result]], elapsed_s: float | None = None) -> None:
        """Results that arrived together (a batch of verdicts imported at once): the engine hears
        them all before it starts jobs or writes any prompt, so no prompt quotes a stale best."""
        for ask_id, result in results:
            self._hear(ask_id, result, elapsed_s)
        self._filling()

    def set_target(self, target: Any) -> None:
        """The evaluation device became known (or better known); later prompts describe it."""
        self.contexts.target = target

    def amend(self, node_id: str, result: EvalResult) -> None:
        """A judged candidate's verdict replaced (judged again after a system error: the driver
        found it): the node's status, value and the best follow it, and the trajectory says so.
        What was decided on the old verdict (a repair asked, statistics backed up) stays."""
        if node_id not in self.tree.nodes or self.tree[node_id].eval is None:
            raise EngineError(f"candidate {node_id!r} was never judged: no verdict to replace")
        node = self.tree[node_id]
        node.eval, node.status, node.reason = result, PASSED if result.passed else FAILED, result.error
        node.bottleneck = result.bottleneck
        node.value = node_value(node, self.settings.objective)
        self.trajectory = Trajectory(e for e in self.trajectory.entries if e.candidate_id != node_id)
        if not self.starting.amended(node):
            self.expansions.record(node, self.expansions.gain(node) if result.passed else result.outcome)  # the latest entry now
        self._filling()

    def set_limits(self, limits: Limits, elapsed_s: float | None = None) -> None:
        """New budget limits (a resumed run with a larger budget); may start new jobs."""
        self.budget.limits = limits
        self.budget.advance(elapsed_s)
        if self.stop_reason and self.stop_reason.startswith("budget"):
            self.stop_reason = None
        self._filling()

    @property
    def jobs(self) -> dict[str, Job]:
        """The running expansions, in start order."""
        return self.expansions.jobs

    @property
    def done(self) -> bool:
        return not self.expansions.jobs and not self.tuning.jobs and not self._outstanding

    def best(self) -> Node | None:
        return self.tree.best(self.settings.objective)

    def take_changed(self) -> list[Node]:
        """Nodes created or updated since the last call (the driver mirrors them to the store)."""
        changed = [self.tree[i] for i in sorted(self._changed, key=lambda i: self.tree[i].order)]
        self._changed.clear()
        return changed

    def snapshot(self) -> dict[str, Any]:
        best = self.best()
        return {"best_id": best.id if best else None,
                "best_speedup": best.speedup(self.settings.objective) if best else None,
                "candidates": len(self.tree) - 1, "passing": len(self.tree.passing()),
                "active_jobs": len(self.expansions.jobs), "jobs_started": self.expansions.started,
                "outstanding": len(self._outstanding), "spend": self.budget.spend.to_dict(),
                "limits": self.budget.limits.to_dict(), "stop_reason": self.stop_reason,
                "done": self.done, "tuning": self.tuning.snapshot(), "start": self.starting.snapshot()}

    # ---- jobs.JobHost: what the jobs may do ------------------------------------------------

    def ask_completion(self, job: Any, agent: str) -> CompletionAsk:
        """The ask is made now; its prompt is written once everything told with it was heard."""
        self.budget.spend.calls += 1
        ask = CompletionAsk(self._new_ask_id(), agent, None, job.id)
        self._issue(job, ask)
        self._unrendered.append((ask, job))
        return ask

    def ask_evaluation(self, job: Any, node: Node, profile: bool = False, seed: Any = None) -> EvaluationAsk:
        self.budget.spend.evals += 1
        ask = EvaluationAsk(self._new_ask_id(), node.id, node.code or "", job.id, profile=profile, seed=seed)
        self._issue(job, ask)
        return ask

    def ask_sweep(self, job: Any, of: Node, instances: list, template: str = "", device: str = "") -> SweepAsk:
        self.budget.spend.evals += 1
        ask = SweepAsk(self._new_ask_id(), of.id, list(instances), job.id, template=template, device=device)
        self._issue(job, ask)
        return ask

    def ask_seeds(self, job: Any, template: str, device: str, limit: int) -> SeedsAsk:
        ask = SeedsAsk(self._new_ask_id(), template, device, limit, job.id)
        self._issue(job, ask)
        return ask

    def changed(self, *node_ids: str) -> None:
        self._changed.update(node_ids)

    def reserved(self, exclude: Any = None) -> tuple[int, int]:
        """Calls and evaluations the running expansions (but `exclude`) still need, plus the
        evaluations the running tuning jobs (but `exclude`) hold back."""
        calls, evals = self.expansions.reserved(exclude)
        return calls, evals + self.tuning.reserved(exclude)

    def in_progress(self, exclude: Any = None) -> list[tuple[str, str]]:
        return self.expansions.in_progress(exclude) + self.tuning.in_progress()

    def adopt(self, node: Node) -> None:
        self.strategy.adopted(self.tree, node)

    # ---- the engine's own bookkeeping ------------------------------------------------------

    def _filling(self) -> None:
        """Start what there is room for (tuning jobs first: they reserve their evaluations), then
        write the prompts of every new ask, in order. Nothing starts while the start is judged."""
        if not self.starting.waiting:
            self.tuning.start_due()
            self.expansions.fill(others_running=bool(self.tuning.jobs))
        pending, self._unrendered = self._unrendered, []
        for ask, job in pending:
            owner = self.tuning if ask.job_id in self.tuning.jobs else self.expansions
            ask.request = owner.request(job, ask.agent)

    def _hear(self, ask_id: str, result: Result, elapsed_s: float | None) -> None:
        if ask_id not in self._outstanding:
            raise EngineError(f"ask {ask_id!r} is not outstanding (known: {', '.join(self._outstanding) or 'none'})")
        wanted, what = _ANSWERS[type(self._outstanding[ask_id])]
        if not isinstance(result, (wanted, AskFailure)):
            raise EngineError(f"ask {ask_id!r} asked for {what}; it cannot take a {type(result).__name__}")
        ask = self._outstanding.pop(ask_id)
        self.budget.advance(elapsed_s)
        job_id = self._ask_jobs.pop(ask_id)
        if isinstance(result, Completion):
            self.budget.record_completion(result.usage.total_tokens, result.cost_usd)
        if isinstance(result, AskFailure) and result.kind == "BudgetExceeded":
            self.stop_reason = self.stop_reason or f"LLM budget: {result.message}"
        if job_id in self.starting.jobs:
            self.starting.hear(job_id, ask, result)
            self.expansions.profiled += int(self.starting.profiled)
            return
        owner = self.tuning if job_id in self.tuning.jobs else self.expansions
        owner.hear(job_id, ask, result)

    def _new_ask_id(self) -> str:
        self._ask_counter += 1
        return f"a{self._ask_counter}"

    def _issue(self, job: Any, ask: Ask) -> None:
        self._outstanding[ask.id] = ask
        self._ask_jobs[ask.id] = job.id
        job.ask_id = ask.id
