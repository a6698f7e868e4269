"""The tuning step inside the search: templatize a promising candidate, check that the template's
default instance reproduces it, tune its parameters, and adopt the fastest instance as a child.

Pure like the engine it belongs to: every step is an ask made through the engine's interface for
its jobs (jobs.JobHost: the Templatizer's prompt, the evaluation of one instance) and every
decision a function of what was told, so a resumed run replays it and judges nothing twice.

    candidate c3 ends its expansion among the tune_top fastest (tune_top=1: a new best)
    -> Templatizer: c3 rewritten as a KW_TUNE template                        (CompletionAsk)
    -> its default instance, judged                                           (EvaluationAsk, c4)
       it must pass and take at most tune_match x c3's time; otherwise the Templatizer is asked
       again with the judge's report (parse_retries), or the job ends
    -> the tuner's next configurations, judged                                (EvaluationAsks, c5 ...)
       tune_batch at a time, within tune_evals, the run's tune_share of max_evals, and what running
       expansions reserved
    -> the fastest instance, when faster than c3 and than the default instance, becomes c3's child
       in the search tree (action "tune"); both say "parameters tuned: ..." in later prompts

Instances hang under c3 in the code lineage (`parent_id`) but only the adopted one joins the search
tree (`search_parent`), so strategies never expand a configuration the tuner passed over. What each
job cost (evaluations, Templatizer calls, device seconds from the verdicts) is kept on c3
(`Node.tuning`) and summed in the engine's snapshot.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kernelwright.agents.types import ParseFailure
from kernelwright.llm.types import Completion, CompletionRequest, Message

from .asks import Ask, CompletionAsk, Result
from .jobs import MEASURE, TEMPLATIZE, JobHost, TuneJob
from .results import EvalResult
from .tree import FAILED, PASSED, SKIPPED, Node
from .tuning_report import conclude, params_text
from .values import node_value

if TYPE_CHECKING:  # tune/ is imported when a tuning job runs: the engine's import stays free of it
    from kernelwright.tune.evaluate import Measurement
    from kernelwright.tune.hardware import DeviceLimits

AGENT = "templatizer"


def device_limits(target: Any) -> "DeviceLimits":
    """The limits the run's target imposes on configurations; the H100 table when the target is a
    CPU or lacks facts (a plan made on a CPU prunes what the H100 would, as the autotuner does)."""
    from kernelwright.tune.hardware import H100_SXM, from_target

    if getattr(target, "kind", "") == "cuda":
        try:
            limits = from_target(target)
            if all(value is not None for value in limits.as_env().values()):
                return limits
        except (AttributeError, IndexError, TypeError, ValueError):
            pass
    return H100_SXM


def measurement(params: dict[str, Any], result: Result, limits: "DeviceLimits") -> "Measurement":
    """What the tuner learns from an instance's evaluation (resource pruning as the judge
    evaluator applies it: a kernel that spills or exceeds the device is never the best)."""
    from kernelwright.tune.evaluate import ERROR, PRUNED, Measurement
    from kernelwright.tune.prune import KernelResources, resource_violation

    if not isinstance(result, EvalResult):
        return Measurement(params, ERROR, error=f"{getattr(result, 'kind', 'error')}: {getattr(result, 'message', '')}")
    m = Measurement(params, result.status, time_ms=result.median_ms if result.passed else None,
                    method=result.timing_method, note=result.timing_note, error=result.error or None,
                    stage=result.stage, resources=list(result.resources), device_s=result.device_s,
                    judge_s=result.judge_s)
    found = [KernelResources(**{k: v for k, v in r.items() if k in KernelResources.__dataclass_fields__})
             for r in result.resources if isinstance(r, dict) and "name" in r]
    why = resource_violation(found, limits) if found else None
    if why:
        m.status, m.stage, m.error, m.time_ms = PRUNED, "compiled", why, None
    return m


class Tuning:
    """The engine's tuning jobs. They read the engine's tree, budget and trajectory and ask
    through it (`host`); `agents` is the engine's agents (the Templatizer is added when missing),
    `seed` the run's seed (each job's tuner gets seed + its number)."""

    def __init__(self, host: JobHost, agents: dict[str, Any], seed: int = 0):
        self.host = host
        self.agents = agents
        self.seed = seed
        self.jobs: dict[str, TuneJob] = {}
        self.started = 0
        self.calls = 0
        self.evals = 0  # evaluation asks made by tuning jobs, in all
        self.device_s = 0.0
        self.judge_s = 0.0
        self.on_gpu = False
        self.adopted: list[str] = []
        self.due: list[str] = []  # passing candidates noted since the last start_due

    # ---- when ---------------------------------------------------------------------------------

    def consider(self, node: Node | None) -> None:
        """Called when an expansion ends with `node`: note it; `start_due` decides once every result
        that arrived together was heard (so the best of a generation is tuned, not the first told)."""
        if node is not None and node.status == PASSED and node.action != "tune" and node.code:
            self.due.append(node.id)

    def start_due(self) -> None:
        """Start a tuning job on each noted candidate, fastest first, that ranks among the tune_top
        fastest, is not tuned yet and finds its evaluations in the budget (called before expansions
        are started, so the evaluations a job reserves are not handed to them)."""
        if not self.host.settings.tune:
            self.due = []
            return
        objective = self.host.settings.objective
        nodes = sorted((self.host.tree[i] for i in dict.fromkeys(self.due)),
                       key=lambda n: (-(n.speedup(objective) or 0.0), n.order))
        self.due = []
        for node in nodes:
            if not node.tuning and self._ranks_high(node) and self._can_start():
                self._start(node)

    def _start(self, node: Node) -> None:
        self.started += 1
        job = TuneJob(id=f"tune{self.started}", node_id=node.id, number=self.started,
                      reserve=self._reservable())
        self.jobs[job.id] = job
        node.tuning = {"job": job.id, "outcome": "templatizing"}
        self.host.changed(node.id)
        self._ask_templatizer(job)

    def _ranks_high(self, node: Node) -> bool:
        objective = self.host.settings.objective
        ranked = sorted((n for n in self.host.tree.passing() if n.search_parent is not None),
                        key=lambda n: (-(n.speedup(objective) or 0.0), n.order))
        return node in ranked[: self.host.settings.tune_top]

    def share_left(self) -> float:
        """Evaluations tuning may still make under tune_share of max_evals (no cap without one)."""
        limit = self.host.budget.limits.max_evals
        if limit is None:
            return float("inf")
        return int(self.host.settings.tune_share * limit) - self.evals

    def reserved(self, exclude: TuneJob | None = None) -> int:
        """Evaluations the running jobs (but `exclude`) still hold back: each its reserve less what it used."""
        return sum(max(0, job.reserve - job.evals) for job in self.jobs.values() if job is not exclude)

    def _reservable(self) -> int:
        """What a job starting now may reserve: tune_evals, within the share and the budget that
        running expansions and the other tuning jobs leave."""
        _, reserved = self.host.reserved()  # the running expansions' and every tuning job's
        held = self.reserved()
        free = self.host.budget.evals_left() - reserved
        return int(max(0, min(self.host.settings.tune_evals, self.share_left() - held, free)))

    def _room(self, calls: int, evals: int, job: TuneJob | None = None) -> bool:
        """Budget for `calls` and `evals` more, beside what running expansions and the other tuning
        jobs reserved (`job`'s own reserve is what it spends from)."""
        budget = self.host.budget
        reserved_calls, reserved_evals = self.host.reserved(exclude=job)
        return (budget.soft_reason() is None and budget.calls_left() >= calls + reserved_calls
                and budget.evals_left() >= evals + reserved_evals and self.share_left() >= evals)

    def _why_no_room(self) -> str:
        budget = self.host.budget
        if budget.soft_reason():
            return f"stopped early: {budget.soft_reason()}"
        if self.share_left() < 1:
            return "stopped early: the tuning share of the evaluation budget (tune_share) is spent"
        return "stopped early: no evaluation left beside what running expansions and other tuning jobs reserved"

    def _can_start(self) -> bool:
        return self._room(1, 2) and self._reservable() >= 2  # the Templatizer, the default instance and one more

    def _job_budget(self, job: TuneJob) -> int:
        return int(max(0, min(job.reserve - job.evals, self.host.budget.evals_left())))

    # ---- asks ---------------------------------------------------------------------------------

    def _ask_templatizer(self, job: TuneJob) -> None:
        job.stage, job.calls, self.calls = TEMPLATIZE, job.calls + 1, self.calls + 1
        self.host.ask_completion(job, AGENT)

    def request(self, job: TuneJob, agent: str = AGENT) -> CompletionRequest:
        """The Templatizer's prompt for `job` (`agent` is always the Templatizer)."""
        host = self.host
        node = host.tree[job.node_id]
        ctx = host.contexts.build(AGENT, host.tree, host.trajectory, parent=node, failure=job.failure)
        ctx.extra["tune_budget"] = self._job_budget(job)
        ctx.extra["tune_match"] = host.settings.tune_match
        request = self._agent().request(ctx)
        if job.feedback:
            request = replace(request, messages=[*request.messages, *job.feedback])
        if host.settings.temperature is not None:
            request = replace(request, temperature=host.settings.temperature)
        return request

    def _agent(self):
        agent = self.agents.get(AGENT)
        if agent is None:
            from kernelwright.agents.templatizer import Templatizer

            agent = self.agents[AGENT] = Templatizer()
        return agent

    def _ask_instance(self, job: TuneJob, params: dict[str, Any], default: bool = False) -> None:
        host, parent = self.host, self.host.tree[job.node_id]
        node = Node(id=host.tree.new_id(), parent_id=parent.id, search_parent=None, action="tune",
                    code=job.template.instantiate(params), plan=f"tuning of {parent.id}: {params_text(params)}",
                    approach_key=f"parameter tuning of {parent.id}", job_id=job.id, depth=parent.depth + 1,
                    tuning={"job": job.id, "of": parent.id, "template": job.template.hash, "params": dict(params),
                            "default": default})
        host.tree.add(node)
        host.changed(node.id)
        job.instances.append(node.id)
        if default:
            job.default_id = node.id
        job.stage, job.evals, self.evals = MEASURE, job.evals + 1, self.evals + 1
        ask = host.ask_evaluation(job, node)
        job.asked[ask.id] = (dict(params), node.id)

    # ---- results ------------------------------------------------------------------------------

    def hear(self, job_id: str, ask: Ask, result: Result) -> None:
        job = self.jobs[job_id]
        job.ask_id = None
        if isinstance(ask, CompletionAsk):
            return self._on_template(job, result)
        return self._on_instance(job, ask, result)

    def _on_template(self, job: TuneJob, result: Result) -> None:
        from kernelwright.tune.state import TunerState
        from kernelwright.tune.template import TemplateError

        if not isinstance(result, Completion):
            return self._end(job, f"the Templatizer could not be asked ({result.kind}: {result.message})", "crash")
        parsed = self._agent().parse(result.text)
        if isinstance(parsed, ParseFailure):
            return self._refuse(job, f"the Templatizer's answer was unusable: {parsed.reason}", "rejected",
                                feedback=[Message("assistant", result.text or "(empty answer)"),
                                          Message("user", parsed.feedback)])
        budget = self._job_budget(job)
        try:
            state = TunerState(parsed, limits=device_limits(self.host.contexts.target),
                               strategy=self.host.settings.tune_strategy, budget=budget,
                               seed=self.seed + job.number, first=[parsed.defaults])
        except TemplateError as exc:
            return self._refuse(job, f"the template cannot be searched: {exc}", "rejected",
                                feedback=[Message("assistant", result.text), Message("user", parsed_feedback(str(exc)))])
        pruned = state.pruned_reason(parsed.defaults)
        if pruned:
            why = f"the template's constraints exclude its own defaults ({pruned})"
            return self._refuse(job, why, "rejected", feedback=[Message("assistant", result.text),
                                                                Message("user", parsed_feedback(why))])
        if state.budget < 2:
            return self._end(job, "no evaluation was left for tuning when the template arrived", "rejected")
        job.template, job.state, job.failure, job.feedback = parsed, state, None, []
        self._next(job)

    def _on_instance(self, job: TuneJob, ask: Ask, result: Result) -> None:
        params, node_id = job.asked.pop(ask.id)
        node = self.host.tree[node_id]
        self._judged(node, result)
        measured = measurement(params, result, job.state.prune.limits or device_limits(None))
        if measured.status == "pruned":
            node.status, node.reason = SKIPPED, f"pruned after compiling: {measured.error}"
        if node_id == job.default_id:
            why = self._mismatch(self.host.tree[job.node_id], node)
            if why:
                job.state = None  # the template is refused; a re-asked one starts a new tuner
                return self._refuse(job, why, "wrong", failure=why)
        job.state.tell(params, measured)
        self._next(job)

    def _judged(self, node: Node, result: Result) -> None:
        if isinstance(result, EvalResult):
            node.eval, node.status, node.reason = result, (PASSED if result.passed else FAILED), result.error
            node.bottleneck = result.bottleneck
            node.value = node_value(node, self.host.settings.objective)
            self.device_s += result.device_s
            self.judge_s += result.judge_s
            self.on_gpu = self.on_gpu or str(result.device).startswith("cuda")
        else:
            node.status, node.reason = FAILED, f"evaluation failed ({result.kind}): {result.message}"
        self.host.changed(node.id)

    def _mismatch(self, original: Node, default: Node) -> str | None:
        """Why the default instance does not reproduce the candidate (None when it does): it must
        pass, and take at most tune_match times the candidate's time."""
        if default.status != PASSED:
            first = (default.reason or "").strip().splitlines()
            return (f"the template's default instance {default.id} does not reproduce {original.id}: it "
                    f"{default.eval.outcome if default.eval else 'failed'}"
                    + (f" ({first[0][:300]})" if first else ""))
        ratio = self.host.settings.tune_match
        before, now = original.eval.median_ms if original.eval else None, default.eval.median_ms
        if before and now and now > before * ratio:
            return (f"the template's default instance {default.id} passes but takes {now:.3g} ms against "
                    f"{before:.3g} ms for {original.id} (more than {ratio:g}x): the template changed the kernel")
        return None

    def _next(self, job: TuneJob) -> None:
        """Keep up to tune_batch instances in flight (the default instance alone, until it is known
        to reproduce the candidate) while the tuner proposes and the budget lasts; the job ends when
        nothing is in flight and nothing more can be asked."""
        width = self.host.settings.tune_batch if job.state.trials else 1
        while len(job.asked) < width and self._job_budget(job) >= 1 and self._room(0, 1, job):
            proposed = job.state.ask(1)
            if not proposed:
                break
            self._ask_instance(job, proposed[0], default=not job.state.trials and not job.asked)
        if not job.asked:
            self._end(job, "" if job.state.done else self._why_no_room())

    def _refuse(self, job: TuneJob, why: str, outcome: str, feedback: list[Message] | None = None,
                failure: str | None = None) -> None:
        """A template that cannot be used: ask the Templatizer again when allowed, else end."""
        job.notes.append(why)
        if job.retries < self.host.settings.parse_retries and self._room(1, 2, job):
            job.retries += 1
            job.feedback, job.failure = list(feedback or []), failure
            return self._ask_templatizer(job)
        self._end(job, why, outcome)

    # ---- the end ------------------------------------------------------------------------------

    def _end(self, job: TuneJob, why: str = "", outcome: str | None = None) -> None:
        del self.jobs[job.id]
        if why and why not in job.notes:
            job.notes.append(why)
        adopted = conclude(self.host, job, outcome)
        if adopted is not None:
            self.adopted.append(adopted.id)
            self.host.adopt(adopted)

    def in_progress(self) -> list[tuple[str, str]]:
        """(label, first step) of each running tuning job, for the planners' "In progress" list."""
        lines = []
        for job in self.jobs.values():
            what = (f"the tuner is searching {', '.join(job.template.params)} of {job.node_id} with the judge"
                    if job.template is not None and job.state is not None
                    else f"{job.node_id} is being made a template whose parameters the tuner will search")
            lines.append((f"parameter tuning of {job.node_id}", f"{what}: do not plan to retune them by hand"))
        return lines

    def snapshot(self) -> dict[str, Any]:
        return {"jobs": self.started, "active": len(self.jobs), "calls": self.calls, "evals": self.evals,
                "device_s": round(self.device_s, 3), "judge_s": round(self.judge_s, 3),
                "device_label": "GPU-seconds" if self.on_gpu else "CPU-seconds", "adopted": list(self.adopted)}


def parsed_feedback(reason: str) -> str:
    return (f"Your template could not be used: {reason}. Answer again with the complete template module, "
            "in the same format, its defaults being the kernel's current values.")
