"""Expansion jobs: a node of the search tree turned into a new candidate by the agents.

    [analyst] -> planner -> coder -> evaluation -> (failed?) repairer -> evaluation ... (<= K)

Each step is one ask, made through the engine (jobs.JobHost); a job has at most one ask out at a
time. Code an earlier candidate already has is recorded as its duplicate instead of judged
(duplicates.py); jobs of one node started together each get their own direction in their prompts
(siblings.py). The strategy chooses which node a job expands, and learns the job's final candidate
when it ends; the engine hears of that candidate too (`on_leaf`: it may start a tuning job on it).

Pure like the engine: every decision is a function of what was told.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from kernelwright.agents.types import Code, Diagnosis, ParseFailure, Plan
from kernelwright.llm.types import Completion, CompletionRequest
from kernelwright.memory.trajectory import TrajectoryEntry, approach_key

from .asks import Ask, EvaluationAsk, Result
from .duplicates import Duplicates, mark_duplicate
from .jobs import ANALYZE, CODE, EVALUATE, PLAN, REPAIR, EngineError, Job, JobHost
from .results import AskFailure, EvalResult
from .siblings import Siblings
from .strategies import SearchState, Strategy
from .tree import FAILED, INVALID, PASSED, ROOT_ID, Node
from .values import node_value


def _ms(node: Node) -> str:
    """A node's measured time per call in words ("1.22 ms", "85 us"; "?" when not timed)."""
    time = node.eval.median_ms if node.eval is not None else None
    if not time:
        return "?"
    return f"{time:.3g} ms" if time >= 0.1 else f"{time * 1000:.3g} us"


class Expansions:
    """The engine's expansion jobs, in start order."""

    def __init__(self, host: JobHost, strategy: Strategy, agents: Mapping[str, Any], rng,
                 on_leaf: Callable[[Node | None], None]):
        self.host = host
        self.strategy = strategy
        self.agents = agents
        self.rng = rng
        self.on_leaf = on_leaf
        self.siblings = Siblings()
        self.duplicates = Duplicates()
        self.jobs: dict[str, Job] = {}  # active jobs, in start order
        self.started = 0
        self.profiled = 0  # passing candidates judged with a profile asked for

    # ---- what they reserve ---------------------------------------------------------------

    def first_needs(self) -> tuple[int, int]:
        """Calls and evaluations a new job needs at least (planner? + coder, one evaluation)."""
        return (2 if self.host.settings.plan else 1), 1

    def reserved(self, exclude: Any = None) -> tuple[int, int]:
        """Calls and evaluations the running expansions (but `exclude`) still need."""
        calls = evals = 0
        for job in self.jobs.values():
            if job is not exclude:
                c, e = self._needs(job)
                calls, evals = calls + c, evals + e
        return calls, evals

    def _after(self, stage: str) -> tuple[int, int]:
        """Calls and evaluations the shortest path still takes after `stage`'s own ask."""
        calls = {ANALYZE: (1 if self.host.settings.plan else 0) + 1, PLAN: 1}.get(stage, 0)
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

    def _optional_ok(self, job: Job, calls: int, evals: int) -> bool:
        """May `job` go off its reserved path (a repair, a re-ask, an analysis) needing `calls`
        and `evals` from here on, without eating what the other jobs reserved?"""
        budget = self.host.budget
        reserved_calls, reserved_evals = self.host.reserved(exclude=job)
        return (budget.soft_reason() is None
                and budget.calls_left() >= calls + reserved_calls
                and budget.evals_left() >= evals + reserved_evals)

    def in_progress(self, exclude: Any = None) -> list[tuple[str, str]]:
        return [(j.approach_key, j.plan_text) for j in self.jobs.values() if j is not exclude and j.plan_text]

    # ---- starting jobs -------------------------------------------------------------------

    def state(self) -> SearchState:
        return SearchState(self.host.tree, self.host.settings, list(self.jobs.values()), self.started, self.rng)

    def fill(self, others_running: bool) -> None:
        """Start jobs while there is room, budget and something the strategy wants expanded
        (`others_running`: tuning jobs that may still give the strategy something)."""
        host = self.host
        self._unblock_waiting()
        started: list[Job] = []
        while len(self.jobs) < host.settings.parallel and host.stop_reason is None:
            calls, evals = self.first_needs()
            reserved_calls, reserved_evals = host.reserved()
            why_not = host.budget.can_start(calls, evals, reserved_calls, reserved_evals)
            if why_not:
                host.stop_reason = f"budget: {why_not}"
                break
            parent_id = self.strategy.select(self.state())
            if parent_id is None:
                if not self.jobs and not others_running:  # a tuned instance may give it something
                    host.stop_reason = "search finished: the strategy has nothing left to expand"
                break
            started.append(self._start_job(parent_id))
        self.siblings.settle(started, self.jobs.values())

    def _start_job(self, parent_id: str) -> Job:
        settings = self.host.settings
        self.started += 1
        job = Job(id=f"j{self.started}", parent_id=parent_id,
                  action="draft" if parent_id == ROOT_ID else "improve")
        self.jobs[job.id] = job
        self.strategy.started(job)
        self.siblings.number(job)
        parent = self.host.tree[parent_id]
        job.stage = PLAN if settings.plan else CODE
        if (settings.analyst and parent_id != ROOT_ID and parent.eval is not None
                and parent.diagnosis is None and self._optional_ok(job, 1 + self.first_needs()[0], 1)):
            job.stage = ANALYZE
        self._advance(job)
        return job

    def _advance(self, job: Job) -> None:
        """Issue the job's next ask for its current stage (or wait for a sibling planner)."""
        if job.stage in (ANALYZE, PLAN) and self._parent_busy(job):
            return  # one planner/analyst per node at a time: the next one sees the first's plan
        if job.stage == ANALYZE and self.host.tree[job.parent_id].diagnosis is not None:
            job.stage = PLAN if self.host.settings.plan else CODE  # a sibling job diagnosed it meanwhile
            return self._advance(job)
        agent = {ANALYZE: "analyst", PLAN: "planner", CODE: "coder", REPAIR: "repairer"}[job.stage]
        self.host.ask_completion(job, agent)

    def _parent_busy(self, job: Job) -> bool:
        """One planner (or analyst) at a time in the whole run, so each sees every plan made before
        it under "In progress" (two planners asked at once would propose the same idea)."""
        return any(other is not job and other.ask_id is not None and other.stage in (ANALYZE, PLAN)
                   for other in self.jobs.values())

    def _unblock_waiting(self) -> None:
        for job in list(self.jobs.values()):
            if job.ask_id is None and job.stage in (ANALYZE, PLAN):
                self._advance(job)

    # ---- prompts ---------------------------------------------------------------------------

    def _ask_evaluation(self, job: Job, node: Node) -> None:
        job.stage = EVALUATE
        profile = self.host.contexts.on_gpu() and self.profiled < self.host.settings.profile_evals
        self.host.ask_evaluation(job, node, profile=profile)

    def request(self, job: Job, agent: str) -> CompletionRequest:
        host = self.host
        tree = host.tree
        parent = tree[job.parent_id]
        failure = None
        context_parent: Node | None = parent
        if agent == "repairer":
            context_parent = tree[job.node_id]
            failure = context_parent.reason
        elif agent in ("planner", "coder"):
            latest = tree.latest_failure(job.parent_id)
            failure = latest.reason if latest is not None else None
        in_progress = []
        if agent in ("planner", "analyst"):  # the Coder carries out its plan; others' plans are not its concern
            in_progress = host.in_progress(exclude=job)
        attempt = self.siblings.attempt(job, agent, self.jobs.values()) if host.settings.sibling_directions else None
        ctx = host.contexts.build(agent, tree, host.trajectory, parent=context_parent,
                                  failure=failure, plan=job.plan if agent != "planner" else None,
                                  in_progress=in_progress, skills=self._skills_for(job, agent, parent),
                                  attempt=attempt)
        if job.retry is not None:  # the agent adds the unusable answer and the parser's feedback
            request = self.agents[agent].retry_request(ctx, *job.retry)
        else:
            request = self.agents[agent].request(ctx)
        if host.settings.temperature is not None:
            request = replace(request, temperature=host.settings.temperature)
        return request

    def _skills_for(self, job: Job, agent: str, parent: Node) -> list:
        """The expansion's ranking, made once (the planner's); the Coder and Repairer get the skills
        their plan cites first, then the same ranking."""
        if agent == "analyst":
            return []
        contexts = self.host.contexts
        if job.skills is None:
            job.skills = contexts.rank_skills(parent)
        cited = [t for t in job.skill_tags if t not in {s.name for s in job.skills}]
        if agent == "planner" or not cited:
            return job.skills
        extra = [s for s in contexts.rank_skills(parent, cited=cited) if s.name in cited]
        return extra + job.skills

    # ---- results ---------------------------------------------------------------------------

    def hear(self, job_id: str, ask: Ask, result: Result) -> None:
        job = self.jobs[job_id]
        job.ask_id = None
        handler = {ANALYZE: self._on_analysis, PLAN: self._on_plan, CODE: self._on_code,
                   EVALUATE: self._on_evaluation, REPAIR: self._on_repair}[job.stage]
        handler(job, ask, result)

    def _parse(self, job: Job, agent: str, result: Result) -> Any:
        """The parsed answer, a ParseFailure, or an AskFailure (passed through)."""
        if isinstance(result, AskFailure):
            return result
        if not isinstance(result, Completion):
            raise EngineError(f"{agent} ask of job {job.id} was answered with {type(result).__name__}")
        return self.agents[agent].parse(result.text)

    def _retry(self, job: Job, agent: str, result: Result, parsed: Any) -> bool:
        """Re-ask with the parser's feedback when allowed; True when a new ask went out."""
        if not isinstance(result, Completion) or job.retries >= self.host.settings.parse_retries:
            return False
        after_calls, after_evals = self._after(job.stage)
        if not self._optional_ok(job, 1 + after_calls, after_evals):
            return False
        job.retries += 1
        job.retry = (result.text, parsed)
        self.host.ask_completion(job, agent)
        return True

    def _next_stage(self, job: Job, stage: str) -> None:
        job.stage, job.retries, job.retry = stage, 0, None

    def _on_analysis(self, job: Job, ask: Ask, result: Result) -> None:
        parsed = self._parse(job, "analyst", result)
        parent = self.host.tree[job.parent_id]
        if isinstance(parsed, Diagnosis):
            parent.diagnosis, parent.bottleneck = parsed.text, parsed.bottleneck or parent.bottleneck
        else:
            parent.diagnosis = ""  # asked once; an unusable answer is not asked again
        self.host.changed(parent.id)
        self._next_stage(job, PLAN if self.host.settings.plan else CODE)
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
        if not self.host.trajectory.is_dead_end(label):
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
        failed = self.host.tree[job.node_id]
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
        node = self.host.tree[job.node_id]
        if isinstance(result, AskFailure):  # the judge itself failed: repairing the code cannot help
            node.status, node.reason = FAILED, f"evaluation failed ({result.kind}): {result.message}"
            self.record(node, "crash")
            return self._end_job(job, node)
        if not isinstance(result, EvalResult):
            raise EngineError(f"evaluation ask {ask.id} was answered with {type(result).__name__}")
        node.eval = result
        node.status = PASSED if result.passed else FAILED
        node.reason = result.error
        node.bottleneck = result.bottleneck
        node.value = node_value(node, self.host.settings.objective)
        if result.passed and isinstance(ask, EvaluationAsk) and ask.profile:
            self.profiled += 1
        self.record(node, self.gain(node) if result.passed else result.outcome)
        if node.passed or not self._may_repair(job):
            return self._end_job(job, node)
        node.repairs += 1
        job.repairs += 1
        self._next_stage(job, REPAIR)
        self.host.ask_completion(job, "repairer")

    def gain(self, node: Node) -> str:
        """"faster" when a correct candidate beat what its expansion set out to beat (its search
        parent; for a first version, the best correct candidate judged before it, if any), else
        "slower": the trajectory's word for "no gain"."""
        objective = self.host.settings.objective
        speed = node.speedup(objective) or 0.0
        rival = self._rival(node)
        return "faster" if rival is None or speed > (rival.speedup(objective) or 0.0) else "slower"

    def _rival(self, node: Node) -> Node | None:
        """What `node`'s expansion set out to beat: its search parent, or for a first version the
        fastest correct candidate judged before it (None: nothing to beat)."""
        tree = self.host.tree
        parent = tree[node.search_parent] if node.search_parent else None
        if parent is not None and parent.id != ROOT_ID:
            return parent
        earlier = [n for n in tree.passing() if n.id != node.id and n.order < node.order]
        return max(earlier, key=lambda n: n.speedup(self.host.settings.objective) or 0.0, default=None)

    def _no_gain_reason(self, node: Node) -> str:
        """Why a correct candidate counts as no gain: its time and what it did not beat."""
        rival, objective = self._rival(node), self.host.settings.objective
        if rival is None:
            return ""
        return (f"{node.id} ran {_ms(node)} per call ({node.speedup(objective) or 0:.2f}x), not faster than "
                f"{rival.id} ({_ms(rival)}, {rival.speedup(objective) or 0:.2f}x)")

    def _may_repair(self, job: Job) -> bool:
        return job.repairs < self.host.settings.max_repairs and self._optional_ok(job, 1, 1)

    # ---- nodes, memory, job end -------------------------------------------------------------

    def _new_node(self, job: Job, parent_id: str, action: str, code: str | None) -> Node:
        tree = self.host.tree
        node = Node(id=tree.new_id(), parent_id=parent_id, search_parent=job.parent_id,
                    action=action, code=code, plan=job.plan_text, approach_key=job.approach_key,
                    skill_tags=list(job.skill_tags), job_id=job.id,
                    depth=tree[job.parent_id].depth + 1)
        tree.add(node)
        job.node_id = node.id
        self.host.changed(node.id)
        return node

    def _judged_already(self, job: Job, node: Node) -> bool:
        """When an earlier candidate has `node`'s code, record `node` as its duplicate and end the
        job (no evaluation asked, none spent); True then."""
        original = self.duplicates.original(self.host.tree, node) if self.host.settings.dedupe else None
        if original is None:
            return False
        mark_duplicate(node, original)
        self.record(node, "duplicate")
        self._end_job(job, node)
        return True

    def _fail_unusable(self, node: Node, parsed: Any) -> None:
        node.status = INVALID
        node.reason = f"the answer held no usable code: {getattr(parsed, 'reason', parsed)}"
        self.record(node, "rejected")

    def record(self, node: Node, outcome: str) -> None:
        """The node's line in the trajectory (what was tried, the result, why it failed)."""
        speed = node.speedup(self.host.settings.objective)
        reason = self._no_gain_reason(node) if outcome == "slower" else (node.reason or "").strip().split("\n\n")[0]
        time = node.eval.median_ms if node.eval is not None and node.eval.passed else None
        self.host.trajectory.add(TrajectoryEntry(
            candidate_id=node.id, parent_id=node.parent_id, action=node.action, plan=node.plan,
            approach_key=node.approach_key, outcome=outcome,
            speedup=speed if speed and speed > 0 else None,
            reason=reason[:400], time_ms=time if time and time > 0 else None))
        self.host.changed(node.id)

    def _end_job(self, job: Job, leaf: Node | None) -> None:
        tree = self.host.tree
        del self.jobs[job.id]
        self.strategy.job_done(tree, job, leaf)
        touched = [n for n in tree if n.job_id == job.id]  # the leaf among them
        path = tree.ancestors(leaf.id if leaf else job.parent_id)  # visits changed along it
        self.host.changed(*(n.id for n in touched + path))
        self.host.changed(job.parent_id)
        self.on_leaf(leaf)
