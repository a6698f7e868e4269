"""Choose what an agent sees: the engine's side of dynamic context.

The agents fit sections under the token budget; this module decides which facts are offered:
the evaluation device (the run's target), the candidate at hand and the best one so far with
their measured evidence, the latest failure from the same place, the "already tried" digest of
the trajectory (and, for planners, what other workers are planning right now), the Analyst's
diagnosis, and the skills ranked for this expansion. Never the whole history.
"""
from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Iterable, Mapping

from kernelwright.agents.types import AgentContext, Attempt, CandidateView, VerdictView
from kernelwright.memory.ranking import PRODUCT_KINDS, SkillQuery, rank_skills
from kernelwright.memory.skills import Conditions, SkillLibrary
from kernelwright.memory.trajectory import Trajectory

from .problem_info import ProblemInfo
from .settings import Settings
from .tree import ROOT_ID, Node, Tree

#: rank(query, limit) -> skills (objects with .name/.title/.body), best first; pure, preloaded
SkillRanker = Callable[[SkillQuery, int], list]
#: skills whose content the system message already carries (the judge's rules)
SYSTEM_SKILLS = ("judge-rules",)
ERROR_LINES = 12  # a failed candidate's verdict quotes the first lines of what went wrong
_CITED = re.compile(r"\[([a-z0-9]+(?:-[a-z0-9]+)*)\]")
_TORCH_CALL = re.compile(r"\b(?:torch|F|nn)\.([A-Za-z_]\w*)")


WAVES_MANY = 4  # from this many waves of output tiles on, the last wave's idle share is small


def pattern_kinds(op_kinds: Iterable[str]) -> tuple[str, ...]:
    """The op kinds a skill query asks for: the problem's, plus the pattern they form where one
    kind names it better (matrix products around a softmax are attention, whether the reference
    calls scaled_dot_product_attention or spells it out), the pattern first."""
    kinds = list(dict.fromkeys(op_kinds))
    if {"matmul", "softmax"} <= set(kinds) and "attention" not in kinds:
        kinds.insert(0, "attention")
    return tuple(kinds)


def verdict_view(node: Node, objective: str, floor: Mapping[str, Any] | None = None) -> VerdictView | None:
    """The measured evidence of a judged node as prompts show it (None before it is judged). With
    `floor` (the one floor the prompt quotes), its percentage of the speed of light is taken against
    that floor, and a different floor the judge used for it is kept as `floor["judged_ms"]`."""
    result = node.eval
    if result is None:
        return None
    kernels = result.kernels or {}
    error = "\n".join(result.error.strip().splitlines()[:ERROR_LINES]) if not result.passed else ""
    return VerdictView(
        status=result.status, outcome=result.outcome, stage=result.stage,
        on_gpu=str(result.device).startswith("cuda"), trials_passed=result.trials_passed,
        trials_total=result.trials_total, margin=result.margin, median_ms=result.median_ms,
        iqr_ms=result.iqr_ms, timed_calls=result.timed_calls, timing_method=result.timing_method,
        timing_note=result.timing_note, l2_flushed=result.l2_flushed, baselines=dict(result.baseline_ms),
        speedups=dict(result.speedup), floor=_against(result, floor), kernels=list(kernels.get("kernels") or []),
        kernels_note=str(kernels.get("reason") or ""), profile=dict(result.profile),
        findings=list(result.findings), error=error, fault=dict(result.fault))


FLOOR_AGREES = 0.01  # floors within 1% are the same floor


def reference_timing(tree: Tree | None, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The reference's measured times on the target: what the run was given before any candidate
    (`extra["reference_timing"]`: eager_ms, compile_ms, kernels, measured by the batch runner's first
    contact: judge/scheduling/reference_timing.py), else the baselines of the latest GPU verdict
    (eager and torch.compile, and the reference's kernels where its eager baseline recorded them)."""
    if given:
        return dict(given)
    judged = [n.eval for n in (tree or []) if n.eval is not None and str(n.eval.device).startswith("cuda")
              and n.eval.baseline_ms.get("eager")]
    if not judged:
        return {}
    latest = judged[-1]
    timing = {"eager_ms": latest.baseline_ms.get("eager"), "compile_ms": latest.baseline_ms.get("compile_default"),
              "source": "verdicts"}
    if latest.reference_kernels:
        timing["kernels"] = list(latest.reference_kernels)
    return timing


def _against(result, floor: Mapping[str, Any] | None) -> dict[str, Any]:
    """A verdict's floor fields restated against the prompt's one floor."""
    own = dict(result.floor)
    if not floor or not floor.get("floor_ms") or not own.get("floor_ms") or not result.median_ms:
        return own
    restated = {**own, "floor_ms": floor["floor_ms"], "pct_of_floor": floor["floor_ms"] / result.median_ms * 100}
    if abs(own["floor_ms"] - floor["floor_ms"]) > FLOOR_AGREES * floor["floor_ms"]:
        restated["judged_ms"] = own["floor_ms"]
    return restated


def candidate_view(node: Node, objective: str, trajectory: Trajectory | None = None,
                   floor: Mapping[str, Any] | None = None) -> CandidateView:
    findings = list(node.eval.findings) if node.eval else []
    made_from = node.search_parent if node.search_parent and node.search_parent != ROOT_ID else ""
    dead = trajectory.why_dead(node.approach_key) if trajectory is not None and node.approach_key else ""
    return CandidateView(id=node.id, code=node.code or "", status=node.status,
                         speedup=node.speedup(objective), summary=node.summary(objective),
                         findings=findings, verdict=verdict_view(node, objective, floor), tuned=node.tuned,
                         approach=node.approach_key if node.action != "tune" else "", made_from=made_from,
                         dead_end=dead)


_STEP_REGION = re.compile(r"^In `([^`]+)`")


def in_progress_lines(plans: Iterable[tuple[str, str]]) -> list[str]:
    """What other workers are planning right now: each approach's label whole and the code regions
    its steps change (a step not anchored to a region, like the tuner's note, is quoted)."""
    lines = []
    for label, text in plans:
        steps = [re.sub(r"^\d+[.)]\s+", "", line.strip()) for line in (text or "").splitlines()
                 if line.strip() and not line.startswith("Why:")]
        regions = list(dict.fromkeys(m.group(1) for m in map(_STEP_REGION.match, steps) if m))
        notes = [step for step in steps if not _STEP_REGION.match(step)]
        parts = ([f"changes {', '.join(f'`{r}`' for r in regions)}"] if regions else []) + notes
        if label or parts:
            lines.append(f"`{label}`" + (f": {'; '.join(parts)}" if parts else ""))
    return lines


def as_ranker(skills: Any) -> SkillRanker | None:
    """A SkillRanker from what the engine was given: a ranker, a SkillLibrary, or an older
    `retrieve(query_text, conditions, k)` callable (word-overlap order, kept for callers of it)."""
    if skills is None or isinstance(skills, SkillLibrary):
        return None if skills is None else (lambda query, limit: rank_skills(skills, query, limit))
    try:
        positional = [p for p in inspect.signature(skills).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return skills
    if len(positional) != 3:
        return skills

    def legacy(query: SkillQuery, limit: int) -> list:
        conditions = Conditions(op_kinds=list(query.op_kinds) or None, bottleneck=query.bottleneck,
                                backend=query.backend, gpu=query.gpu)
        return list(skills(query.text, conditions, limit))
    return legacy


class ContextBuilder:
    def __init__(self, problem: ProblemInfo, settings: Settings, skills: SkillRanker | None = None, *,
                 target: Any = None, extra: Mapping[str, Any] | None = None,
                 skill_names: Iterable[str] | None = None):
        """`skill_names`: the library's names, so a prompt can tell a citation of a skill it does not
        show from other bracketed words (agents/citations.py)."""
        self.problem = problem
        self.settings = settings
        self.skills = as_ranker(skills)
        self.target = target
        self.extra = dict(extra or {})
        if skill_names is not None:
            self.extra["skill_names"] = sorted(skill_names)

    def on_gpu(self) -> bool:
        return getattr(self.target, "kind", "") == "cuda"

    def build(self, agent: str, tree: Tree, trajectory: Trajectory, *, parent: Node | None,
              failure: str | None = None, plan: Any = None, in_progress: Iterable[tuple[str, str]] = (),
              skills: list | None = None, attempt: Attempt | None = None) -> AgentContext:
        """The context for `agent` working from `parent` (None or the root for a draft)."""
        objective = self.settings.objective
        extra = self._extra(tree)
        floor = extra.get("floor")
        parent_view = None if parent is None or parent.id == ROOT_ID else candidate_view(parent, objective, trajectory,
                                                                                        floor)
        best = tree.best(objective)
        best_view = None
        if best is not None and (parent is None or best.id != parent.id):
            best_view = candidate_view(best, objective, trajectory, floor)
        digest = trajectory.digest(self.settings.digest_items, self.settings.digest_chars)
        return AgentContext(
            problem_name=self.problem.name, problem_source=self.problem.source,
            backend=self.problem.backend, device=self.problem.device, rules=self.problem.rules,
            op_kinds=list(self.problem.op_kinds), bottleneck=self._bottleneck(parent),
            best=best_view, parent=parent_view, failure=failure, tried_digest=digest.rstrip(),
            skills=list(skills or []), plan=plan, analysis=parent.diagnosis if parent is not None else None,
            token_budget=self.settings.context_tokens, extra=extra, target=self.target,
            in_progress=in_progress_lines(in_progress), attempt=attempt,
        )

    def _extra(self, tree: Tree | None = None) -> dict[str, Any]:
        extra = dict(self.extra)
        if self.problem.reference:
            extra["reference"] = dict(self.problem.reference)
        if self.problem.work:
            extra["reference_work"] = dict(self.problem.work)
        if self.problem.mode_layers:
            extra["mode_layers"] = list(self.problem.mode_layers)
        if (self.problem.dtypes or ["float32"])[0] == "float32" and PRODUCT_KINDS & set(self.problem.op_kinds):
            extra["float32_products"] = True  # the prompt carries the precision facts of float32 products
        floor = self.run_floor(tree)
        if floor is not None:
            extra["floor"] = floor
        timing = reference_timing(tree, extra.get("reference_timing"))
        if timing:
            extra["reference_timing"] = timing
        return extra

    @staticmethod
    def _bottleneck(parent: Node | None) -> str | None:
        if parent is None:
            return None
        return parent.bottleneck or (parent.eval.bottleneck if parent.eval else None)

    def rank_skills(self, parent: Node | None, cited: Iterable[str] = ()) -> list:
        """The skills of one expansion, best first: cited by the parent's evidence, then by the op
        kinds, the measured (or expected) bottleneck, the backend and GPU, and the evidence's words."""
        if self.skills is None or self.settings.skills_k == 0:
            return []
        evidence = []
        if parent is not None and parent.id != ROOT_ID:
            evidence += list(parent.eval.findings) if parent.eval else []
            evidence.append(parent.diagnosis or "")
        text = " ".join([self.problem.name.replace("_", " "), " ".join(self.problem.op_kinds),
                         " ".join(_TORCH_CALL.findall(self.problem.source)), *evidence])
        query = SkillQuery(op_kinds=pattern_kinds(self.problem.op_kinds), bottleneck=self._bottleneck(parent),
                           expected_bottleneck=self.expected_bound(), backend=self.problem.backend,
                           gpu=getattr(self.target, "arch", None) or self.problem.gpu,
                           dtypes=tuple(self.problem.dtypes), tiles=self.tiles(), text=text,
                           cited=(*cited, *_CITED.findall(" ".join(evidence))), exclude=SYSTEM_SKILLS)
        return list(self.skills(query, self.settings.skills_k))

    def tiles(self) -> str | None:
        """"few", "waves" or "many": the main product's 128 x 128 output tiles against the target's
        SMs (under one wave, up to four, more); None without a product or a GPU target."""
        tiles, sms = self.problem.product_tiles, getattr(self.target, "sm_count", None) if self.on_gpu() else None
        if not tiles or not sms:
            return None
        return "few" if tiles < sms else "waves" if tiles < WAVES_MANY * sms else "many"

    def run_floor(self, tree: Tree | None) -> dict[str, Any] | None:
        """The one floor a prompt quotes: the judge's, once a verdict carries one (from measured
        peaks where any verdict's are, the lowest of those: peaks measured while the GPU was shared
        come out low and their floors high), else the floor expected from the target's ceilings."""
        judged = [n.eval.floor for n in (tree or []) if n.eval is not None
                  and all((n.eval.floor or {}).get(k) for k in ("floor_ms", "bytes", "peak_gbps"))]
        measured = [f for f in judged if f.get("peak_source") == "measured"] or judged
        if not measured:
            return self.expected_floor()
        chosen = min(measured, key=lambda f: f["floor_ms"])
        keys = ("floor_ms", "bound", "bytes", "flops", "peak_kind", "peak_tflops", "peak_gbps", "peak_source")
        return {**{k: chosen.get(k) for k in keys}, "judged": True,
                "backward": bool((self.problem.reference or {}).get("backward"))}

    def expected_bound(self) -> str | None:
        """"memory" or "compute": the side of the speed-of-light floor the problem's bytes and FLOPs
        put it on for the target's ceilings (None without a GPU target or a footprint)."""
        return (self.expected_floor() or {}).get("bound")

    def expected_floor(self) -> dict[str, Any] | None:
        """The problem's speed-of-light floor on the target before any candidate is judged:
        floor_ms, bound, bytes, flops, peak_kind, peak_source (None when unknown). The same
        arithmetic as the judge's floor (judge/floor.py: a float32 problem counts 3xTF32 on the
        tensor cores where that beats the fp32 peak), so the prompt and the verdicts agree."""
        from kernelwright.judge.floor import floor_from  # noqa: PLC0415 -- the engine's process loads no judge code (tests/search/test_engine.py): loaded where the search meets the judge's results
        from kernelwright.judge.peaks import Peaks  # noqa: PLC0415 -- the engine's process loads no judge code (tests/search/test_engine.py): loaded where the search meets the judge's results

        peaks = getattr(self.target, "peaks", None) if self.on_gpu() else None
        if not peaks or not self.problem.bytes:
            return None
        kind = {"bfloat16": "bf16", "float16": "fp16", "float64": "fp64"}.get(
            (self.problem.dtypes or ["float32"])[0], "fp32")
        table = Peaks(device_name="", driver="", copy_gbps=float(peaks.get("copy_gbps") or 0.0),
                      tflops=dict(peaks.get("tflops") or {}), source=str(peaks.get("source", "")))
        floor = floor_from(self.problem.flops or 0.0, self.problem.bytes, table, kind)
        if floor is None:
            return None
        return {"floor_ms": floor.floor_ms, "bound": floor.bound, "bytes": floor.bytes, "flops": floor.flops,
                "peak_kind": floor.peak_kind, "peak_tflops": floor.peak_tflops, "peak_gbps": floor.peak_gbps,
                "peak_source": floor.peak_source, "backward": bool((self.problem.reference or {}).get("backward"))}
