"""Choose what an agent sees: the engine's side of dynamic context.

The agents fit sections under the token budget; this module decides which facts are offered:
the candidate at hand, the best one so far, the latest failure from the same place, the
"already tried" digest of the trajectory (plus what other workers are trying right now), the
Analyst's diagnosis, and a few retrieved skills. Never the whole history.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from kernelwright.agents.types import AgentContext, CandidateView
from kernelwright.memory.skills import Conditions
from kernelwright.memory.trajectory import Trajectory

from .problem_info import ProblemInfo
from .settings import Settings
from .tree import ROOT_ID, Node, Tree

#: retrieve(query, conditions, k) -> skills (objects with .name/.title/.body); pure, preloaded
SkillRetriever = Callable[[str, Conditions, int], list]


def candidate_view(node: Node, objective: str) -> CandidateView:
    findings = list(node.eval.findings) if node.eval else []
    return CandidateView(id=node.id, code=node.code or "", status=node.status,
                         speedup=node.speedup(objective), summary=node.summary(objective),
                         findings=findings)


def in_progress_lines(plans: Iterable[tuple[str, str]]) -> str:
    """Approaches other workers are on right now, so a parallel planner picks something else."""
    lines = [f"- `{key}`: {text.strip().splitlines()[0][:160]}" for key, text in plans if text.strip()]
    if not lines:
        return ""
    return "## In progress (other workers are trying these now; choose a different approach)\n" + \
        "\n".join(lines) + "\n"


class ContextBuilder:
    def __init__(self, problem: ProblemInfo, settings: Settings, skills: SkillRetriever | None = None):
        self.problem = problem
        self.settings = settings
        self.skills = skills

    def build(self, agent: str, tree: Tree, trajectory: Trajectory, *, parent: Node | None,
              failure: str | None = None, plan: Any = None, plan_text: str = "",
              in_progress: Iterable[tuple[str, str]] = ()) -> AgentContext:
        """The context for `agent` working from `parent` (None or the root for a draft)."""
        objective = self.settings.objective
        parent_view = None if parent is None or parent.id == ROOT_ID else candidate_view(parent, objective)
        best = tree.best(objective)
        best_view = None
        if best is not None and (parent is None or best.id != parent.id):
            best_view = candidate_view(best, objective)
        bottleneck = None
        if parent is not None:
            bottleneck = parent.bottleneck or (parent.eval.bottleneck if parent.eval else None)
        digest = trajectory.digest(self.settings.digest_items, self.settings.digest_chars)
        extra_lines = in_progress_lines(in_progress)
        tried = "\n".join(x for x in (digest.rstrip(), extra_lines.rstrip()) if x)
        return AgentContext(
            problem_name=self.problem.name, problem_source=self.problem.source,
            backend=self.problem.backend, device=self.problem.device, rules=self.problem.rules,
            op_kinds=list(self.problem.op_kinds), bottleneck=bottleneck,
            best=best_view, parent=parent_view, failure=failure, tried_digest=tried,
            skills=self._skills(agent, bottleneck, plan_text, parent),
            plan=plan, analysis=parent.diagnosis if parent is not None else None,
            token_budget=self.settings.context_tokens,
            extra={"reference": dict(self.problem.reference)} if self.problem.reference else {},
        )

    def _skills(self, agent: str, bottleneck: str | None, plan_text: str, parent: Node | None) -> list:
        if self.skills is None or self.settings.skills_k == 0 or agent == "analyst":
            return []
        words = [self.problem.name.replace("_", " "), " ".join(self.problem.op_kinds),
                 bottleneck or "", plan_text]
        if parent is not None and parent.diagnosis:
            words.append(parent.diagnosis)
        conditions = Conditions(op_kinds=self.problem.op_kinds or None, bottleneck=bottleneck,
                                backend=self.problem.backend, gpu=self.problem.gpu)
        return list(self.skills(" ".join(w for w in words if w), conditions, self.settings.skills_k))
