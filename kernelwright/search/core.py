"""The ask/tell engine: a pure state machine that searches for a faster correct ModelNew.

The engine does no I/O, reads no clock, calls no model and runs no judge. It hands out asks
(`ask()`: prompts for agents, candidates to judge) and is told their results (`tell()`); drivers
(drivers/) answer the asks however they like. New asks are created only inside `tell()`,
`set_limits()` and the constructor, as a function of what was told, so the same sequence of
tells always yields the same asks: a run is resumed by building a fresh engine and replaying
the stored tells in order (the asks that had no result come out of `ask()` again).

One expansion job turns a node into a new candidate:

    [analyst] -> planner -> coder -> evaluation -> (failed?) repairer -> evaluation ... (<= K)

Each step is one ask; a job has at most one ask out at a time. Code an earlier candidate already
has is recorded as its duplicate instead of judged (duplicates.py); jobs of one node started
together each get their own direction in their prompts (siblings.py). The strategy chooses which node
a job expands, and learns the job's final candidate when it ends. A correct candidate that ends
its expansion among the best may start a tuning job (tuning.py: Templatizer, default instance,
tuner instances), whose asks come from the same counter and whose best instance joins the tree.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from kernelwright.agents.types import Code, Diagnosis, ParseFailure, Plan
from kernelwright.llm.types import Completion, CompletionRequest
from kernelwright.memory.trajectory import Trajectory, TrajectoryEntry, approach_key

from .asks import Ask, CompletionAsk, EvaluationAsk, Result
from .budget import SearchBudget, Limits
from .context import ContextBuilder, SkillRanker
from .duplicates import Duplicates, mark_duplicate
from .problem_info import ProblemInfo
from .results import AskFailure, EvalResult
from .settings import Settings
from .siblings import Siblings
from .strategies import SearchState, Strategy, make_strategy
from .tree import FAILED, INVALID, PASSED, ROOT_ID, Node, Tree
from .tuning import Tuning
from .values import node_value

AGENT_NAMES = ("planner", "coder", "repairer", "analyst")
# job stages
ANALYZE, PLAN, CODE, EVALUATE, REPAIR = "analyze", "plan", "code", "evaluate", "repair"


def _ms(node: Node) -> str:
    """A node's measured time per call in words ("1.22 ms", "85 us"; "?" when not timed)."""
    time = node.eval.median_ms if node.eval is not None else None
    if not time:
        return "?"
    return f"{time:.3g} ms" if time >= 0.1 else f"{time * 1000:.3g} us"


class EngineError(RuntimeError):
    """The engine was told something it did not ask (a replay log that does not match)."""


@dataclass
class Job:
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


def default_agents(backend: str | None = None, prompt_dirs=None, known_skills=None) -> dict[str, Any]:
    """The built-in agents; the code writers check answers for `backend`; with `known_skills` (the
    library's names) only citations of real skills become skill tags."""
    from kernelwright.agents import Analyst, Coder, Planner, Repairer, Templatizer

    return {"planner": Planner(prompt_dirs, known_skills=known_skills), "coder": Coder(prompt_dirs, backend=backend),
            "repairer": Repairer(prompt_dirs, backend=backend),
            "analyst": Analyst(prompt_dirs, known_skills=known_skills), "templatizer": Templatizer(prompt_dirs)}


class Engine:
    def __init__(self, problem: ProblemInfo, strategy: str | Strategy, budget: Limits | None = None,
                 settings: Settings | None = None, rng_seed: int = 0, *,
                 agents: Mapping[str, Any] | None = None, skills: SkillRanker | None = None,
                 skill_names: frozenset[str] | None = None, target: Any = None,
                 extra: Mapping[str, Any] | None = None, prompt_dirs: list[str] | None = None):
        """`target` is the evaluation device (judge.target.Target, read generically), `extra` goes
        to every AgentContext (e.g. the tolerances the judge applies); `prompt_dirs` are folders
        whose prompt files override the built-in ones by name (agents/templates.py)."""
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
        self.tuning = Tuning(self)  # the tuning step's jobs (tuning.py)
        self.siblings = Siblings()
        self.duplicates = Duplicates()
        self.jobs: dict[str, Job] = {}  # active jobs, in start order
        self.jobs_started = 0
        self.stop_reason: str | None = None
        self.profiled = 0  # passing candidates judged with a profile asked for
        self._outstanding: dict[str, Ask] = {}
        self._ask_jobs: dict[str, str] = {}
        self._ask_counter = 0
        self._changed: set[str] = {ROOT_ID}
        self._unrendered: list[tuple[CompletionAsk, Job]] = []  # asks whose prompt is written last
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

    def _filling(self) -> None:
        """Start what there is room for (tuning jobs first: they reserve their evaluations), then
        write the prompts of every new ask, in order."""
        self.tuning.start_due()
        self._fill()
        pending, self._unrendered = self._unrendered, []
        for ask, job in pending:
            ask.request = self.tuning.request(job) if ask.job_id in self.tuning.jobs else self._request(job, ask.agent)

    def _hear(self, ask_id: str, result: Result, elapsed_s: float | None) -> None:
        if ask_id not in self._outstanding:
            raise EngineError(f"ask {ask_id!r} is not outstanding (known: {', '.join(self._outstanding) or 'none'})")
        evaluation = isinstance(self._outstanding[ask_id], EvaluationAsk)
        if not isinstance(result, (EvalResult if evaluation else Completion, AskFailure)):
            raise EngineError(f"ask {ask_id!r} asked for {'an evaluation' if evaluation else 'a completion'}; "
                              f"it cannot take a {type(result).__name__}")
        ask = self._outstanding.pop(ask_id)
        self.budget.advance(elapsed_s)
        job_id = self._ask_jobs.pop(ask_id)
        if isinstance(result, Completion):
            self.budget.record_completion(result.usage.total_tokens, result.cost_usd)
        if isinstance(result, AskFailure) and result.kind == "BudgetExceeded":
            self.stop_reason = self.stop_reason or f"LLM budget: {result.message}"
        if job_id in self.tuning.jobs:
            return self.tuning.hear(job_id, ask, result)
        job = self.jobs[job_id]
        job.ask_id = None
        handler = {ANALYZE: self._on_analysis, PLAN: self._on_plan, CODE: self._on_code,
                   EVALUATE: self._on_evaluation, REPAIR: self._on_repair}[job.stage]
        handler(job, ask, result)

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
        self._record(node, self._gain(node) if result.passed else result.outcome)  # the latest entry now
        self._filling()

    def set_limits(self, limits: Limits, elapsed_s: float | None = None) -> None:
        """New budget limits (a resumed run with a larger budget); may start new jobs."""
        self.budget.limits = limits
        self.budget.advance(elapsed_s)
        if self.stop_reason and self.stop_reason.startswith("budget"):
            self.stop_reason = None
        self._filling()

    @property
    def done(self) -> bool:
        return not self.jobs and not self.tuning.jobs and not self._outstanding

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
                "active_jobs": len(self.jobs), "jobs_started": self.jobs_started,
                "outstanding": len(self._outstanding), "spend": self.budget.spend.to_dict(),
                "limits": self.budget.limits.to_dict(), "stop_reason": self.stop_reason,
                "done": self.done, "tuning": self.tuning.snapshot()}

    # ---- starting jobs -------------------------------------------------------------------

    def _state(self) -> SearchState:
        return SearchState(self.tree, self.settings, list(self.jobs.values()), self.jobs_started, self.rng)

    def _first_needs(self) -> tuple[int, int]:
        """Calls and evaluations a new job needs at least (planner? + coder, one evaluation)."""
        return (2 if self.settings.plan else 1), 1

    def _reserved(self, exclude: Job | None = None, tuning: bool = True) -> tuple[int, int]:
        """Calls and evaluations the running expansions (but `exclude`) still need, plus, with
        `tuning`, the evaluations the running tuning jobs hold back."""
        calls = evals = 0
        for job in self.jobs.values():
            if job is not exclude:
                c, e = self._needs(job)
                calls, evals = calls + c, evals + e
        return calls, evals + (self.tuning.reserved() if tuning else 0)

    def _after(self, stage: str) -> tuple[int, int]:
        """Calls and evaluations the shortest path still takes after `stage`'s own ask."""
        calls = {ANALYZE: (1 if self.settings.plan else 0) + 1, PLAN: 1}.get(stage, 0)
        return calls, (0 if stage == EVALUATE else 1)

    def _needs(self, job: Job) -> tuple[int, int]:
        """What `job` still reserves: the rest of its path, plus its current ask if not yet made."""
        calls, evals = self._after(job.stage)
        if job.ask_id is None:
            if job.stage == EVALUATE:
                evals += 1
            else:
                calls += 1
        return calls, evals

    def _fill(self) -> None:
        """Start jobs while there is room, budget and something the strategy wants expanded."""
        self._unblock_waiting()
        started: list[Job] = []
        while len(self.jobs) < self.settings.parallel and self.stop_reason is None:
            calls, evals = self._first_needs()
            reserved_calls, reserved_evals = self._reserved()
            why_not = self.budget.can_start(calls, evals, reserved_calls, reserved_evals)
            if why_not:
                self.stop_reason = f"budget: {why_not}"
                break
            parent_id = self.strategy.select(self._state())
            if parent_id is None:
                if not self.jobs and not self.tuning.jobs:  # a tuned instance may give it something
                    self.stop_reason = "search finished: the strategy has nothing left to expand"
                break
            started.append(self._start_job(parent_id))
        self.siblings.settle(started, self.jobs.values())

    def _start_job(self, parent_id: str) -> Job:
        self.jobs_started += 1
        job = Job(id=f"j{self.jobs_started}", parent_id=parent_id,
                  action="draft" if parent_id == ROOT_ID else "improve")
        self.jobs[job.id] = job
        self.strategy.started(job)
        self.siblings.number(job)
        parent = self.tree[parent_id]
        job.stage = PLAN if self.settings.plan else CODE
        if (self.settings.analyst and parent_id != ROOT_ID and parent.eval is not None
                and parent.diagnosis is None and self._optional_ok(job, 1 + self._first_needs()[0], 1)):
            job.stage = ANALYZE
        self._advance(job)
        return job

    def _advance(self, job: Job) -> None:
        """Issue the job's next ask for its current stage (or wait for a sibling planner)."""
        if job.stage in (ANALYZE, PLAN) and self._parent_busy(job):
            return  # one planner/analyst per node at a time: the next one sees the first's plan
        if job.stage == ANALYZE and self.tree[job.parent_id].diagnosis is not None:
            job.stage = PLAN if self.settings.plan else CODE  # a sibling job diagnosed it meanwhile
            return self._advance(job)
        agent = {ANALYZE: "analyst", PLAN: "planner", CODE: "coder", REPAIR: "repairer"}[job.stage]
        self._ask_completion(job, agent)

    def _parent_busy(self, job: Job) -> bool:
        """One planner (or analyst) at a time in the whole run, so each sees every plan made before
        it under "In progress" (two planners asked at once would propose the same idea)."""
        return any(other is not job and other.ask_id is not None and other.stage in (ANALYZE, PLAN)
                   for other in self.jobs.values())

    def _unblock_waiting(self) -> None:
        for job in list(self.jobs.values()):
            if job.ask_id is None and job.stage in (ANALYZE, PLAN):
                self._advance(job)

    # ---- asks ------------------------------------------------------------------------------

    def _new_ask_id(self) -> str:
        self._ask_counter += 1
        return f"a{self._ask_counter}"

    def _issue(self, job: Any, ask: Ask) -> None:
        self._outstanding[ask.id] = ask
        self._ask_jobs[ask.id] = job.id
        job.ask_id = ask.id

    def _ask_completion(self, job: Any, agent: str) -> None:
        """The ask is made now; its prompt is written once everything told with it was heard."""
        self.budget.spend.calls += 1
        ask = CompletionAsk(self._new_ask_id(), agent, None, job.id)
        self._issue(job, ask)
        self._unrendered.append((ask, job))

    def _ask_evaluation(self, job: Job, node: Node) -> None:
        self.budget.spend.evals += 1
        job.stage = EVALUATE
        profile = self.contexts.on_gpu() and self.profiled < self.settings.profile_evals
        self._issue(job, EvaluationAsk(self._new_ask_id(), node.id, node.code or "", job.id, profile=profile))

    def _optional_ok(self, job: Job, calls: int, evals: int) -> bool:
        """May `job` go off its reserved path (a repair, a re-ask, an analysis) needing `calls`
        and `evals` from here on, without eating what the other jobs reserved?"""
        reserved_calls, reserved_evals = self._reserved(exclude=job)
        return (self.budget.soft_reason() is None
                and self.budget.calls_left() >= calls + reserved_calls
                and self.budget.evals_left() >= evals + reserved_evals)

    def _request(self, job: Job, agent: str) -> CompletionRequest:
        parent = self.tree[job.parent_id]
        failure = None
        context_parent: Node | None = parent
        if agent == "repairer":
            context_parent = self.tree[job.node_id]
            failure = context_parent.reason
        elif agent in ("planner", "coder"):
            latest = self.tree.latest_failure(job.parent_id)
            failure = latest.reason if latest is not None else None
        in_progress = []
        if agent in ("planner", "analyst"):  # the Coder carries out its plan; others' plans are not its concern
            in_progress = [(j.approach_key, j.plan_text) for j in self.jobs.values() if j is not job and j.plan_text]
            in_progress += self.tuning.in_progress()
        attempt = self.siblings.attempt(job, agent, self.jobs.values()) if self.settings.sibling_directions else None
        ctx = self.contexts.build(agent, self.tree, self.trajectory, parent=context_parent,
                                  failure=failure, plan=job.plan if agent != "planner" else None,
                                  in_progress=in_progress, skills=self._skills_for(job, agent, parent),
                                  attempt=attempt)
        if job.retry is not None:  # the agent adds the unusable answer and the parser's feedback
            request = self.agents[agent].retry_request(ctx, *job.retry)
        else:
            request = self.agents[agent].request(ctx)
        if self.settings.temperature is not None:
            request = replace(request, temperature=self.settings.temperature)
        return request

    def _skills_for(self, job: Job, agent: str, parent: Node) -> list:
        """The expansion's ranking, made once (the planner's); the Coder and Repairer get the skills
        their plan cites first, then the same ranking."""
        if agent == "analyst":
            return []
        if job.skills is None:
            job.skills = self.contexts.rank_skills(parent)
        cited = [t for t in job.skill_tags if t not in {s.name for s in job.skills}]
        if agent == "planner" or not cited:
            return job.skills
        extra = [s for s in self.contexts.rank_skills(parent, cited=cited) if s.name in cited]
        return extra + job.skills

    # ---- results ---------------------------------------------------------------------------

    def _parse(self, job: Job, agent: str, result: Result) -> Any:
        """The parsed answer, a ParseFailure, or an AskFailure (passed through)."""
        if isinstance(result, AskFailure):
            return result
        if not isinstance(result, Completion):
            raise EngineError(f"{agent} ask of job {job.id} was answered with {type(result).__name__}")
        return self.agents[agent].parse(result.text)

    def _retry(self, job: Job, agent: str, result: Result, parsed: Any) -> bool:
        """Re-ask with the parser's feedback when allowed; True when a new ask went out."""
        if not isinstance(result, Completion) or job.retries >= self.settings.parse_retries:
            return False
        after_calls, after_evals = self._after(job.stage)
        if not self._optional_ok(job, 1 + after_calls, after_evals):
            return False
        job.retries += 1
        job.retry = (result.text, parsed)
        self._ask_completion(job, agent)
        return True

    def _next_stage(self, job: Job, stage: str) -> None:
        job.stage, job.retries, job.retry = stage, 0, None

    def _on_analysis(self, job: Job, ask: Ask, result: Result) -> None:
        parsed = self._parse(job, "analyst", result)
        parent = self.tree[job.parent_id]
        if isinstance(parsed, Diagnosis):
            parent.diagnosis, parent.bottleneck = parsed.text, parsed.bottleneck or parent.bottleneck
        else:
            parent.diagnosis = ""  # asked once; an unusable answer is not asked again
        self._changed.add(parent.id)
        self._next_stage(job, PLAN if self.settings.plan else CODE)
        self._advance(job)

    def _on_plan(self, job: Job, ask: Ask, result: Result) -> None:
        parsed = self._parse(job, "planner", result)
        if isinstance(parsed, AskFailure):
            return self._end_job(job, None)
        if isinstance(parsed, Plan):
            dead_end = self._dead_end(parsed)
            if dead_end is not None and self._retry(job, "planner", result, dead_end):
                return  # asked once more; a second proposal of the same idea is let through
            job.plan, job.plan_text = parsed, parsed.to_markdown()
            job.skill_tags = list(parsed.skill_tags)
            job.approach_key = parsed.approach_key or approach_key("\n".join(parsed.steps))
        elif self._retry(job, "planner", result, parsed):
            return
        self._next_stage(job, CODE)  # without a usable plan the Coder works from the context alone
        self._advance(job)

    def _dead_end(self, plan: Plan) -> ParseFailure | None:
        """Feedback for a plan whose approach the trajectory marks as a dead end, else None: the
        prompt lists dead ends, this makes sure one is not redone because a model ignored it."""
        label = plan.approach_key or ""
        if not self.trajectory.is_dead_end(label):
            return None
        reason = f"approach `{label}` was already tried in this run and is a dead end"
        return ParseFailure(agent="planner", reason=reason, feedback=(
            f"The {reason} (see 'Already tried'). Propose a different approach, in the same answer "
            "format as before."))

    def _on_code(self, job: Job, ask: Ask, result: Result) -> None:
        parsed = self._parse(job, "coder", result)
        if isinstance(parsed, AskFailure):
            return self._end_job(job, None)
        if not isinstance(parsed, Code):
            if self._retry(job, "coder", result, parsed):
                return
            node = self._new_node(job, parent_id=job.parent_id, action=job.action, code=None)
            self._fail_unusable(node, parsed)
            return self._end_job(job, node)
        node = self._new_node(job, parent_id=job.parent_id, action=job.action, code=parsed.source)
        if not self._judged_already(job, node):
            self._next_stage(job, EVALUATE)
            self._ask_evaluation(job, node)

    def _on_repair(self, job: Job, ask: Ask, result: Result) -> None:
        failed = self.tree[job.node_id]
        parsed = self._parse(job, "repairer", result)
        if isinstance(parsed, AskFailure):
            return self._end_job(job, failed)
        if not isinstance(parsed, Code):
            if self._retry(job, "repairer", result, parsed):
                return
            return self._end_job(job, failed)
        node = self._new_node(job, parent_id=failed.id, action="repair", code=parsed.source)
        if not self._judged_already(job, node):
            self._next_stage(job, EVALUATE)
            self._ask_evaluation(job, node)

    def _on_evaluation(self, job: Job, ask: Ask, result: Result) -> None:
        node = self.tree[job.node_id]
        if isinstance(result, AskFailure):  # the judge itself failed: repairing the code cannot help
            node.status, node.reason = FAILED, f"evaluation failed ({result.kind}): {result.message}"
            self._record(node, "crash")
            return self._end_job(job, node)
        if not isinstance(result, EvalResult):
            raise EngineError(f"evaluation ask {ask.id} was answered with {type(result).__name__}")
        node.eval = result
        node.status = PASSED if result.passed else FAILED
        node.reason = result.error
        node.bottleneck = result.bottleneck
        node.value = node_value(node, self.settings.objective)
        if result.passed and isinstance(ask, EvaluationAsk) and ask.profile:
            self.profiled += 1
        self._record(node, self._gain(node) if result.passed else result.outcome)
        if node.passed or not self._may_repair(job):
            return self._end_job(job, node)
        node.repairs += 1
        job.repairs += 1
        self._next_stage(job, REPAIR)
        self._ask_completion(job, "repairer")

    def _gain(self, node: Node) -> str:
        """"faster" when a correct candidate beat what its expansion set out to beat (its search
        parent; for a first version, the best correct candidate judged before it, if any), else
        "slower": the trajectory's word for "no gain"."""
        speed = node.speedup(self.settings.objective) or 0.0
        rival = self._rival(node)
        return "faster" if rival is None or speed > (rival.speedup(self.settings.objective) or 0.0) else "slower"

    def _rival(self, node: Node) -> Node | None:
        """What `node`'s expansion set out to beat: its search parent, or for a first version the
        fastest correct candidate judged before it (None: nothing to beat)."""
        parent = self.tree[node.search_parent] if node.search_parent else None
        if parent is not None and parent.id != ROOT_ID:
            return parent
        earlier = [n for n in self.tree.passing() if n.id != node.id and n.order < node.order]
        return max(earlier, key=lambda n: n.speedup(self.settings.objective) or 0.0, default=None)

    def _no_gain_reason(self, node: Node) -> str:
        """Why a correct candidate counts as no gain: its time and what it did not beat."""
        rival, objective = self._rival(node), self.settings.objective
        if rival is None:
            return ""
        return (f"{node.id} ran {_ms(node)} per call ({node.speedup(objective) or 0:.2f}x), not faster than "
                f"{rival.id} ({_ms(rival)}, {rival.speedup(objective) or 0:.2f}x)")

    def _may_repair(self, job: Job) -> bool:
        return job.repairs < self.settings.max_repairs and self._optional_ok(job, 1, 1)

    # ---- nodes, memory, job end -------------------------------------------------------------

    def _new_node(self, job: Job, parent_id: str, action: str, code: str | None) -> Node:
        node = Node(id=self.tree.new_id(), parent_id=parent_id, search_parent=job.parent_id,
                    action=action, code=code, plan=job.plan_text, approach_key=job.approach_key,
                    skill_tags=list(job.skill_tags), job_id=job.id,
                    depth=self.tree[job.parent_id].depth + 1)
        self.tree.add(node)
        job.node_id = node.id
        self._changed.add(node.id)
        return node

    def _judged_already(self, job: Job, node: Node) -> bool:
        """When an earlier candidate has `node`'s code, record `node` as its duplicate and end the
        job (no evaluation asked, none spent); True then."""
        original = self.duplicates.original(self.tree, node) if self.settings.dedupe else None
        if original is None:
            return False
        mark_duplicate(node, original)
        self._record(node, "duplicate")
        self._end_job(job, node)
        return True

    def _fail_unusable(self, node: Node, parsed: Any) -> None:
        node.status = INVALID
        node.reason = f"the answer held no usable code: {getattr(parsed, 'reason', parsed)}"
        self._record(node, "rejected")

    def _record(self, node: Node, outcome: str) -> None:
        speed = node.speedup(self.settings.objective)
        reason = self._no_gain_reason(node) if outcome == "slower" else (node.reason or "").strip().split("\n\n")[0]
        time = node.eval.median_ms if node.eval is not None and node.eval.passed else None
        self.trajectory.add(TrajectoryEntry(
            candidate_id=node.id, parent_id=node.parent_id, action=node.action, plan=node.plan,
            approach_key=node.approach_key, outcome=outcome,
            speedup=speed if speed and speed > 0 else None,
            reason=reason[:400], time_ms=time if time and time > 0 else None))
        self._changed.add(node.id)

    def _end_job(self, job: Job, leaf: Node | None) -> None:
        del self.jobs[job.id]
        self.strategy.job_done(self.tree, job, leaf)
        touched = [n for n in self.tree if n.job_id == job.id]  # the leaf among them
        path = self.tree.ancestors(leaf.id if leaf else job.parent_id)  # visits changed along it
        self._changed.update(n.id for n in touched + path)
        self._changed.add(job.parent_id)
        self.tuning.consider(leaf)

