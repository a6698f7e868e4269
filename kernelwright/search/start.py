"""The candidate a run starts from: written before round 1 (torch.compile's own kernels, exported by
`kernelwright seed`: docs/seed.md), judged like any candidate, and put in the search tree as a
child of the reference when it passes, so the planners of round 1 see it as the best candidate so
far, the one to beat, with its verdict and profile.

    engine = Engine(problem, "mcts", limits, settings, start=Start(code=seed_source))

The engine asks for its evaluation in its constructor (the first ask, `a1`) and starts no
expansion before the verdict is in. A start that passes joins the tree the way a tuned instance
does (jobs.JobHost.adopt: the strategy learns it); one that fails stays out of the search tree
(no search parent: no planner sees its failure) and the run goes on from the reference. Pure like
the engine: what happens is a function of what was told.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelwright.memory.trajectory import TrajectoryEntry

from .asks import Ask, EvaluationAsk, Result
from .jobs import JobHost
from .results import EvalResult
from .tree import FAILED, PASSED, ROOT_ID, Node
from .values import node_value

JOB_ID = "start"
ACTION = "seed"  # the node's action; reports read its origin from the code's `# origin:` line


@dataclass(frozen=True)
class Start:
    """The code of the starting candidate and what the prompts and the trajectory call it."""

    code: str
    label: str = "torch.compile's own kernels (inductor seed)"
    plan: str = ("torch.compile's (inductor's) own Triton kernels, exported as a standalone ModelNew by "
                 "`kernelwright seed`: the speed of torch.compile, the candidate to beat")


@dataclass
class StartJob:
    """The one job of the start: its evaluation (`id` and `ask_id` are what the engine reads)."""

    id: str = JOB_ID
    node_id: str = ""
    ask_id: str | None = None


class Starting:
    """The start's evaluation, asked by the engine before anything else."""

    def __init__(self, host: JobHost, start: Start | None):
        self.host = host
        self.start = start
        self.jobs: dict[str, StartJob] = {}
        self.node_id: str | None = None
        self.profiled = False

    def begin(self) -> None:
        """The start's node (outside the search tree until it passes) and its evaluation ask."""
        if self.start is None:
            return
        host = self.host
        node = Node(id=host.tree.new_id(), parent_id=ROOT_ID, search_parent=None, action=ACTION,
                    code=self.start.code, plan=self.start.plan, approach_key=self.start.label, job_id=JOB_ID,
                    depth=1)
        host.tree.add(node)
        host.changed(node.id)
        job = StartJob(node_id=node.id)
        self.jobs[job.id], self.node_id = job, node.id
        profile = host.contexts.on_gpu() and host.settings.profile_evals > 0
        host.ask_evaluation(job, node, profile=profile)

    @property
    def waiting(self) -> bool:
        """True while the start's verdict is out: round 1 waits for it."""
        return bool(self.jobs)

    def hear(self, job_id: str, ask: Ask, result: Result) -> None:
        job = self.jobs.pop(job_id)
        node = self.host.tree[job.node_id]
        if isinstance(result, EvalResult):
            node.eval, node.status, node.reason = result, PASSED if result.passed else FAILED, result.error
            node.bottleneck = result.bottleneck
            node.value = node_value(node, self.host.settings.objective)
            self.profiled = result.passed and isinstance(ask, EvaluationAsk) and ask.profile
        else:
            node.status, node.reason = FAILED, f"evaluation failed ({result.kind}): {result.message}"
        self.host.changed(node.id)
        if node.passed:
            self.join(node)

    def join(self, node: Node) -> None:
        """A passing start joins the search tree under the reference; the trajectory and the
        strategy learn it."""
        node.search_parent = ROOT_ID
        self._record(node)
        self.host.changed(node.id, ROOT_ID)
        self.host.adopt(node)

    def _record(self, node: Node) -> None:
        speed = node.speedup(self.host.settings.objective)
        time = node.eval.median_ms if node.eval is not None else None
        self.host.trajectory.add(TrajectoryEntry(
            candidate_id=node.id, parent_id=ROOT_ID, action=ACTION, plan=node.plan, approach_key=node.approach_key,
            outcome="pass", speedup=speed if speed and speed > 0 else None,
            time_ms=time if time and time > 0 else None))

    def amended(self, node: Node) -> bool:
        """A verdict replaced (judged again after a system error; the engine has taken the node's
        trajectory line out): True when `node` is the start, whose line is its own. A start that now
        passes joins the tree if it had not; one that now fails keeps no line."""
        if node.id != self.node_id:
            return False
        if node.passed and node.search_parent is None:
            self.join(node)
        elif node.passed:
            self._record(node)
        return True

    def snapshot(self) -> dict[str, Any] | None:
        if self.node_id is None:
            return None
        node = self.host.tree[self.node_id]
        return {"id": node.id, "status": node.status, "speedup": node.speedup(self.host.settings.objective),
                "reason": (node.reason or "").strip().split("\n")[0][:300]}
