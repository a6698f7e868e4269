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
       with tune_sweep > 1 (issue 33): up to tune_sweep configurations benchmarked in ONE evaluation
       (SweepAsk: each built, checked on one trial, timed; one that fails is skipped), then its
       fastest judged in full from scratch (EvaluationAsk, c5; the runner-up when it fails): two
       evaluations buy a sweep's configurations; one sweep in flight at a time, beside the
       previous winner's judgement
    -> the fastest instance, when faster than c3 and than the default instance, becomes c3's child
       in the search tree (action "tune"); both say "parameters tuned: ..." in later prompts

With tune_seeds the job first asks the driver for the configurations measured fastest earlier for
this template family, device and shape (SeedsAsk, tune.seeds.SeedCache, read and written by the
drivers): they are measured right after the defaults. Their answer is in the replay log, so a
resumed run asks the same configurations. Each instance's evaluation ask and each sweep name the
template (EvaluationAsk.seed, SweepAsk.template), so the driver records what was measured.

Instances hang under c3 in the code lineage (`parent_id`) but only the adopted one joins the search
tree (`search_parent`), so strategies never expand a configuration the tuner passed over. What each
job cost (evaluations, Templatizer calls, device seconds from the verdicts) is kept on c3
(`Node.tuning`) and summed in the engine's snapshot.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kernelwright.agents.templatizer import Templatizer
from kernelwright.agents.types import ParseFailure
from kernelwright.llm.types import Completion, CompletionRequest, Message
from kernelwright.tune.budget import TuneBudget
from kernelwright.tune.prune import KernelResources, resource_violation
from kernelwright.tune.template import TemplateError, config_key

from .asks import Ask, CompletionAsk, Result, SeedRecord, SeedsAsk, SweepAsk, SweepItem
from .jobs import MEASURE, TEMPLATIZE, JobHost, TuneJob
from .results import EvalResult, SeedsResult, SweepOutcome
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
    from kernelwright.tune.hardware import H100_SXM, from_target  # noqa: PLC0415 -- tune/hardware.py reads the known cards' limits from judge.target on first use (PEP 562), and the engine's process loads no judge code

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
    from kernelwright.tune.evaluate import ERROR, PRUNED, Measurement  # noqa: PLC0415 -- it loads judge code and sqlite3 (the tuning cache), which the engine's process does not (tests/search/test_engine.py)

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


def seed_device(target: Any) -> str:
    """The seed cache's device key for the run's target: the GPU's name (as the autopilot's
    `judge_device` names it), "cpu" for anything else."""
    return str(target.name) if getattr(target, "kind", "") == "cuda" and getattr(target, "name", "") else "cpu"


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
        ctx.extra["tune_sweep"] = self._sweep_width()
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
            agent = self.agents[AGENT] = Templatizer()
        return agent

    def _ask_instance(self, job: TuneJob, params: dict[str, Any], default: bool = False,
                      swept: tuple[str, float] | None = None) -> None:
        """One instance judged in full; `swept`: (sweep ask id, its sweep time) of a sweep's finalist."""
        host, parent = self.host, self.host.tree[job.node_id]
        record = {"job": job.id, "of": parent.id, "template": job.template.hash, "params": dict(params),
                  "default": default}
        if swept is not None:
            record["sweep"] = {"ask": swept[0], "time_ms": swept[1]}
        node = Node(id=host.tree.new_id(), parent_id=parent.id, search_parent=None, action="tune",
                    code=job.template.instantiate(params), plan=f"tuning of {parent.id}: {params_text(params)}",
                    approach_key=f"parameter tuning of {parent.id}", job_id=job.id, depth=parent.depth + 1,
                    tuning=record)
        host.tree.add(node)
        host.changed(node.id)
        job.instances.append(node.id)
        if default:
            job.default_id = node.id
        job.stage, job.evals, self.evals = MEASURE, job.evals + 1, self.evals + 1
        seed = (SeedRecord(job.template.source, seed_device(host.contexts.target), dict(params))
                if host.settings.tune_seeds else None)
        ask = host.ask_evaluation(job, node, seed=seed)
        job.asked[ask.id] = (dict(params), node.id)
        if swept is not None:
            job.winners[ask.id] = swept[0]

    def _ask_sweep(self, job: TuneJob, configs: list[dict[str, Any]]) -> None:
        """`configs` benchmarked in one evaluation (one evaluation spent); their instances made here."""
        seeds = self.host.settings.tune_seeds
        instances = [SweepItem(dict(p), job.template.instantiate(p)) for p in configs]
        ask = self.host.ask_sweep(job, self.host.tree[job.node_id], instances,
                                  template=job.template.source if seeds else "",
                                  device=seed_device(self.host.contexts.target) if seeds else "")
        job.sweeps[ask.id] = [dict(p) for p in configs]
        job.stage, job.evals, self.evals = MEASURE, job.evals + 1, self.evals + 1

    # ---- results ------------------------------------------------------------------------------

    def hear(self, job_id: str, ask: Ask, result: Result) -> None:
        job = self.jobs[job_id]
        job.ask_id = None
        if isinstance(ask, CompletionAsk):
            return self._on_template(job, result)
        if isinstance(ask, SeedsAsk):
            return self._on_seeds(job, result)
        if isinstance(ask, SweepAsk):
            return self._on_sweep(job, ask, result)
        return self._on_instance(job, ask, result)

    def _on_template(self, job: TuneJob, result: Result) -> None:
        if not isinstance(result, Completion):
            return self._end(job, f"the Templatizer could not be asked ({result.kind}: {result.message})", "crash")
        parsed = self._agent().parse(result.text)
        if isinstance(parsed, ParseFailure):
            return self._refuse(job, f"the Templatizer's answer was unusable: {parsed.reason}", "rejected",
                                feedback=[Message("assistant", result.text or "(empty answer)"),
                                          Message("user", parsed.feedback)])
        try:
            state = self._tuner(job, parsed, [])
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
        if self.host.settings.tune_seeds:  # where to start: the driver reads the seed cache
            from kernelwright.tune.tuner import seed_limit  # noqa: PLC0415 -- it loads judge code and sqlite3 (the tuning cache), which the engine's process does not (tests/search/test_engine.py)

            job.state = None
            self.host.ask_seeds(job, parsed.source, seed_device(self.host.contexts.target),
                                seed_limit(state.budget))
            return
        self._next(job)

    def _tuner(self, job: TuneJob, template: Any, seeds: list[dict[str, Any]]):
        """The job's TunerState: its configurations budgeted from its evaluations (tune.budget:
        a sweep and its winner's judgement buy tune_sweep of them), the defaults first, then the seeds."""
        from kernelwright.tune.state import TunerState  # noqa: PLC0415 -- it loads judge code and sqlite3 (the tuning cache), which the engine's process does not (tests/search/test_engine.py)

        budget = TuneBudget(self._job_budget(job), self._sweep_width()).configurations
        return TunerState(template, limits=device_limits(self.host.contexts.target),
                          strategy=self.host.settings.tune_strategy, budget=budget,
                          seed=self.seed + job.number, first=[template.defaults, *seeds])

    def _sweep_width(self) -> int:
        """Configurations per sweep (0: one per evaluation)."""
        width = self.host.settings.tune_sweep
        return width if width > 1 else 0

    def _on_seeds(self, job: TuneJob, result: Result) -> None:
        from kernelwright.tune.tuner import fit_seeds  # noqa: PLC0415 -- it loads judge code and sqlite3 (the tuning cache), which the engine's process does not (tests/search/test_engine.py)

        found = fit_seeds(job.template, result.configs) if isinstance(result, SeedsResult) else []
        if not isinstance(result, SeedsResult):
            job.notes.append(f"no seeds ({result.kind}: {result.message})")
        job.seeds = found
        try:
            job.state = self._tuner(job, job.template, found)
        except TemplateError as exc:  # it passed with no seeds: not expected
            return self._end(job, f"the template cannot be searched: {exc}", "rejected")
        if job.state.budget < 2:
            return self._end(job, "no evaluation was left for tuning when the seeds arrived", "rejected")
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
        if ask.id in job.winners:
            self._settle_finalists(job, job.winners.pop(ask.id), won=measured.ok)
        self._next(job)

    # ---- sweeps -------------------------------------------------------------------------------

    def _on_sweep(self, job: TuneJob, ask: SweepAsk, result: Result) -> None:
        """A sweep's record: the configurations that failed are told (skipped, with the sweep's
        reason), those the sweep never reached go into the next sweep once, the two fastest wait
        for the winner's full judgement, the other timed ones are told their sweep time."""
        from kernelwright.judge.sweep import NOT_RUN  # noqa: PLC0415 -- the engine's process loads no judge code (tests/search/test_engine.py): loaded where the search meets the judge's results
        from kernelwright.tune.evaluate import ERROR, Measurement  # noqa: PLC0415 -- it loads judge code and sqlite3 (the tuning cache), which the engine's process does not (tests/search/test_engine.py)
        from kernelwright.tune.sweep_eval import sweep_measurement  # noqa: PLC0415 -- it loads judge code and sqlite3 (the tuning cache), which the engine's process does not (tests/search/test_engine.py)

        configs = job.sweeps.pop(ask.id)
        if not isinstance(result, SweepOutcome):
            why = f"{result.kind}: {result.message}"
            job.notes.append(f"sweep {ask.id} failed ({why})")
            for params in configs:
                job.state.tell(params, Measurement(params, ERROR, stage="sweep", error=why))
            return self._next(job)
        self.device_s, self.judge_s = self.device_s + result.device_s, self.judge_s + result.judge_s
        job.sweep_cost = [job.sweep_cost[0] + result.device_s, job.sweep_cost[1] + result.judge_s]
        self.on_gpu = self.on_gpu or str(result.device).startswith("cuda")
        found = {c.index: c for c in result.record.configs}
        timed = []
        for index, params in enumerate(configs):
            config = found.get(index)
            if config is not None and config.status == NOT_RUN and config_key(params) not in job.resent:
                job.resent.add(config_key(params))
                job.unrun.append(params)  # a runner died before it: sent again in the next sweep, once
                continue
            measured = (sweep_measurement(config, result.record) if config is not None else
                        Measurement(params, ERROR, stage="sweep", error="missing from the sweep's record"))
            measured.params = dict(params)
            if measured.value is not None:
                timed.append((measured.time_ms, index, measured))
            else:
                job.state.tell(params, measured)
        timed.sort(key=lambda t: (t[0], t[1]))
        for _, _, measured in timed[2:]:
            job.state.tell(measured.params, measured)
        job.sweep_log.append({"ask": ask.id, "configs": len(configs), "timed": len(timed),
                              "skipped": len(configs) - len(timed), "ended_early": result.record.ended_early})
        finalists = [m for _, _, m in timed[:2]]
        if finalists and self._job_budget(job) < 1:  # the budget ended meanwhile (a time limit)
            for measured in finalists:
                job.state.tell(measured.params, measured)
        elif finalists:
            job.finalists[ask.id] = finalists[1:]
            self._ask_instance(job, finalists[0].params, swept=(ask.id, finalists[0].time_ms))
        self._next(job)

    def _settle_finalists(self, job: TuneJob, sweep_id: str, won: bool) -> None:
        """After a sweep winner's full judgement: when it failed, judge the runner-up in full
        (budget permitting); the finalists left are told their sweep times."""
        left = job.finalists.pop(sweep_id, [])
        if left and not won and self._job_budget(job) >= 1 and self._room(0, 1, job):
            runner_up = left.pop(0)
            job.finalists[sweep_id] = left
            self._ask_instance(job, runner_up.params, swept=(sweep_id, runner_up.time_ms))
            return
        for measured in left:
            job.state.tell(measured.params, measured)

    def _next_sweep(self, job: TuneJob) -> None:
        """One sweep in flight at a time (two evaluations left: the sweep and its winner's
        judgement); one evaluation left, or one configuration, is judged alone."""
        width = self._sweep_width()
        while not job.sweeps and self._job_budget(job) >= 1 and self._room(0, 1, job):
            pair = self._job_budget(job) >= 2 and self._room(0, 2, job)
            resend = job.unrun[:width] if pair else []
            job.unrun = job.unrun[len(resend):]
            configs = resend + job.state.ask(width - len(resend) if pair else 1)
            if not configs:
                break
            if len(configs) == 1:
                self._ask_instance(job, configs[0])
            else:
                self._ask_sweep(job, configs)
        if not job.asked and not job.sweeps:
            from kernelwright.tune.evaluate import ERROR, Measurement  # noqa: PLC0415 -- it loads judge code and sqlite3 (the tuning cache), which the engine's process does not (tests/search/test_engine.py)

            for params in job.unrun:  # never reached, and no evaluation left to send them again
                job.state.tell(params, Measurement(params, ERROR, stage="sweep", error="not reached by its sweep"))
            job.unrun = []
            self._end(job, "" if job.state.done else self._why_no_room())

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
        if self._sweep_width() and job.state.trials:  # the default instance reproduced the candidate
            return self._next_sweep(job)
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
