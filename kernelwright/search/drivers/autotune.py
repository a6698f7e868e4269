"""`kernelwright optimize` without an LLM: the template autotuner (kernelwright.tune.autopilot),
recorded in a run folder like any other run, and resumable like one.

Every judged template instance becomes a candidate `tN` (action "tune", its parameters as the
plan) with its verdict and its measurement, stored before the next instance is judged; the best
instance so far is rewritten to RUN_DIR/best_model_new.py whenever it changes. The run's own store
is the tuner's cache (`StoredMeasurements`): `--resume` replays the tuner, and every instance an
earlier session stored is answered from the store, never judged again. Ctrl-C (or SIGTERM) ends
the run as `interrupted`; after `kill -9` the run lock is free and a resume picks it up.

Batch evaluation (`--eval batch`): every instance becomes a request in the run's batch folder
(RUN_DIR/evals, or the folder a suite's runs share) instead of being judged here; the tuner
proposes a whole round at once (the run's remaining budget, per kernel group of the template), the
run pauses (exit 75), and `--resume` after `kernelwright judge --batch FOLDER` replays the tuner:
instances stored before come from the store, verdicts found in the folder are stored, and the next
round's requests are written. Requests are built at the problem's real sizes (never shrunk: they
are judged on the GPU), pruned for the `--target` device (else the H100's limits).

A verdict judged again after a system error (`kernelwright judge --batch FOLDER --retry-errors`) is
taken on `--resume`, finished run or not (search/drivers/rejudged.py, the rule of LLM runs): the
instance's stored verdict, status, speedup and measurement are replaced and an "amend" entry is
journaled, before the tuner is replayed, so its measured time and the best instance follow (and a
later round may differ, as it would have on that verdict).

Limits: `max_evals` is the number of instances in the run (default 16), stored ones included: a
resume judges only what its budget leaves, and a budget below what the run holds judges nothing
more (the stored best stands; every stored instance counts toward the best from the start, so
a resumed run never reports a worse best than it holds, whatever its tuner proposes); `max_minutes` is active time, checked
before each instance but the first, so no instance starts after the limit and a run ends at most
one instance's judging after it. Each instance records the active time at which it was stored. An instance
that fails because of the machine (Triton missing, no compiler) stops the run as `failed` with the
cause; a run in which no instance passed is `failed`, never `done`.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.preflight import environment_error
from kernelwright.judge.target import Target
from kernelwright.report.best import write_best, write_best_file
from kernelwright.store import RunStore
from kernelwright.tune.batch_eval import BatchTemplateEvaluator, VerdictsPending, request_name
from kernelwright.tune.cache import TuneCache
from kernelwright.tune.evaluate import PRUNED, JudgeEvaluator, Measurement, instance_hash, measured
from kernelwright.tune.hardware import from_target
from kernelwright.tune.template import config_key

from . import rejudged
from ..budget import Limits
from ..problem_info import describe_problem
from .autotune_seed import consider_seed, count_stored_seed
from .session import (BEST_FILE, INTERRUPTED_DETAIL, RunError, RunOptions, RunOutcome, check_problem_unchanged,
                      claim_run_dir, hold_run, mark_stale_interrupted, new_run_dir, new_run_id, resume_command)
from .targets import target_of_spec

MODE = "autotune"
DEFAULT_EVALS = 16  # instances judged when no --max-evals is given
STATUS_OF = {"pass": "pass", "fail": "fail", "error": "fail", "pruned": "skipped"}


def _index(cid: str) -> int:
    """tN's N (the order instances were stored in)."""
    return int(cid[1:]) if cid[1:].isdigit() else -1


def _speedup(verdict: dict | None) -> float | None:
    return ((verdict or {}).get("speedup") or {}).get("eager")


class StoredMeasurements:
    """The tuner's cache interface (`get`/`put`, as `tune.cache.TuneCache`) over this run's store.

    An instance stored by an earlier session of the run is answered from the store (with its
    verdict); `put` stores nothing itself (the driver stores each instance as a candidate right
    after), it remembers the key so the candidate can carry it.
    """

    def __init__(self, store, run_id: str):
        self.by_key: dict[str, tuple[str, dict[str, Any]]] = {}  # cache key -> (candidate id, record)
        self.last_key: dict[str, str] = {}  # config_key(params) -> cache key of its last get/put
        for row in store.candidates(run_id):
            node = row.get("node") or {}
            if row["action"] != "tune" or "measurement" not in node or "cache_key" not in node:
                continue
            record = dict(node["measurement"])
            verdict = store.verdict(run_id, row["id"])
            if verdict is not None:
                record["verdict"] = verdict
            self.by_key[node["cache_key"]] = (row["id"], record)

    def _key(self, template_hash: str, params: dict, device: str, sizes: Any, context: str) -> str:
        key = TuneCache.key(template_hash, params, device, sizes, context)
        self.last_key[config_key(params)] = key
        return key

    def get(self, template_hash: str, params: dict, device: str, sizes: Any, context: str = "") -> dict | None:
        hit = self.by_key.get(self._key(template_hash, params, device, sizes, context))
        return dict(hit[1]) if hit else None

    def put(self, template_hash: str, params: dict, device: str, sizes: Any, record: dict,
            context: str = "") -> None:
        self._key(template_hash, params, device, sizes, context)

    def key_of(self, params: dict) -> str:
        return self.last_key[config_key(params)]


@dataclasses.dataclass
class _Plan:
    """What one session of an autotune run works with (new or resumed)."""

    run_id: str
    run_dir: Path
    problem_path: str
    judge: JudgeConfig
    limits: Limits
    budget: int
    seed: int
    workers: int
    elapsed_before: float = 0.0
    eval_mode: str = "local"  # "local" or "batch"
    batch_dir: Path | None = None  # batch: the folder requests go to
    prefix: str = ""  # batch: starts every request's name (a suite's shared folder)
    problem_source: str = ""
    problem_name: str = ""
    target: dict | None = None  # batch: the judging device (judge.target.Target as a dict), for pruning
    shared: Any = None  # session.Shared: a suite's judge pool, Ctrl-C and compute gate
    asked_evals: int | None = None  # resume: the --max-evals given, when below what the run holds


class AutotuneSession:
    """One process's work on an autotune run: tune, store each instance, write the best so far."""

    def __init__(self, store, plan: _Plan, on_progress: Callable[[dict], None] | None = None):
        self.store, self.plan, self.on_progress = store, plan, on_progress
        self.cache = StoredMeasurements(store, plan.run_id)
        stored = [cid for cid, _ in self.cache.by_key.values()]
        self.next_index = 1 + max((int(c[1:]) for c in stored if c[1:].isdigit()), default=-1)
        self.judged_before = len(stored)
        self.judged_now = 0
        self.seen: set[str] = set()
        self.passing: set[str] = set()
        self.best: tuple[float, str] | None = None  # (time_ms, candidate id)
        self.fatal: str | None = None
        self.stop_reason: str | None = None
        self.started = time.monotonic()
        self.activity = "matching the problem to the template library"  # what the session does now
        self.done = False
        self._count_stored()
        count_stored_seed(self)  # the seed judged when the run was made (autotune_seed.py)

    def _count_stored(self) -> None:
        """Every instance an earlier session stored counts from the start, and the best of them is
        the best so far: a resumed run never reports (or writes) a worse best than it holds, whatever
        the tuner's replay proposes again (a smaller --max-evals changes its choices)."""
        for cid, record in sorted(self.cache.by_key.values(), key=lambda item: _index(item[0])):
            measurement = Measurement.from_dict(record)
            self.seen.add(cid)
            if measurement.ok:
                self.passing.add(cid)
                if self.best is None or measurement.time_ms < self.best[0]:
                    self.best = (measurement.time_ms, cid)

    def budget_spent(self) -> bool:
        """The run holds as many instances as its budget: nothing more is judged."""
        return len(self.cache.by_key) >= self.plan.budget

    def elapsed(self) -> float:
        return self.plan.elapsed_before + time.monotonic() - self.started

    def spend(self) -> dict[str, Any]:
        return {"calls": 0, "tokens": 0, "usd": 0.0, "evals": self.judged_before + self.judged_now,
                "elapsed_s": round(self.elapsed(), 3)}

    def should_stop(self) -> bool:
        """Asked before each instance: a machine error stops at once; the time limit once the run
        has at least one instance (a run that judged nothing would be of no use)."""
        if self.fatal:
            return True
        if self.plan.shared is not None and self.plan.shared.stop.is_set():
            self.stop_reason = "interrupted"
            return True
        if self.budget_spent():  # counted over the run (a resumed tuner may propose what was never stored)
            return True
        minutes = self.plan.limits.max_minutes
        if minutes is not None and self.cache.by_key and self.elapsed() >= minutes * 60:
            self.stop_reason = f"time budget reached ({self.elapsed() / 60:.2f} of {minutes:g} minutes)"
            return True
        self._next_activity()
        return False

    def _next_activity(self) -> None:
        """Asked before each batch of instances: say which the tuner judges next (stored ones are
        answered from the store at once)."""
        first = len(self.cache.by_key) + 1
        last = min(first + max(1, self.plan.workers) - 1, self.plan.budget)
        what = f"instance {first}" if last <= first else f"instances {first}-{last}"
        if self.plan.eval_mode == "batch":
            self.activity = f"writing evaluation requests from {what} of {self.plan.budget} on"
        else:
            baseline = " (the first also measures the baselines)" if not self.cache.by_key else ""
            self.activity = f"judging {what} of {self.plan.budget}{baseline}"
        self.progress()

    def on_result(self, step) -> None:
        self.record(step.params, step.source, step.measurement, step.template_name)

    def on_found(self, template, params: dict, source: str, measurement) -> None:
        """An instance of a partly judged batch round (a verdict found now, or one the store
        answered): stored now when new, and counted for the best, before the run pauses."""
        self.record(params, source, measurement, template.name)

    def record(self, params: dict, source: str, measurement_obj, template_name: str) -> None:
        """Store one judged instance as candidate tN (once), and follow the best."""
        key = self.cache.key_of(params)
        known = self.cache.by_key.get(key)
        cid = known[0] if known else f"t{self.next_index}"
        measurement = measurement_obj.to_dict()
        verdict = measurement.pop("verdict", None)
        new_best = measurement_obj.ok and (self.best is None or measurement_obj.time_ms < self.best[0])
        if known is None:
            self.next_index += 1
            self.judged_now += 1
            if verdict:  # the verdict first: a stored candidate always has its verdict
                self.store.save_verdict(self.plan.run_id, cid, verdict)
            if new_best:  # on disk before its row: a kill in between never leaves a stored best without its file
                self._write_best({"id": cid, "code": source,
                                  "node": {"action": "tune", "parent_id": "c0", "approach_key": template_name}},
                                 verdict)
            self.store.upsert_candidates(self.plan.run_id, [{
                "id": cid, "parent_id": "c0", "search_parent": "c0", "action": "tune",
                "status": STATUS_OF.get(measurement_obj.status, "fail"), "code": source,
                "plan": json.dumps(params, sort_keys=True), "approach_key": template_name,
                "speedup": _speedup(verdict), "reason": measurement_obj.error or "",
                "measurement": measurement, "cache_key": key, "elapsed_s": round(self.elapsed(), 3)}])
            self.cache.by_key[key] = (cid, {**measurement, "verdict": verdict})
        self.seen.add(cid)
        if measurement_obj.ok:
            self.passing.add(cid)
            if new_best:
                self.best = (measurement_obj.time_ms, cid)
                self._record_best()
        elif self.fatal is None:
            self.fatal = environment_error(verdict)
        self.store.update_run(self.plan.run_id, spend=self.spend())
        self.progress()

    def _write_best(self, candidate: dict[str, Any], verdict: dict[str, Any] | None) -> None:
        write_best_file(self.plan.run_dir / BEST_FILE, self.store.run(self.plan.run_id), candidate, verdict)

    def _record_best(self) -> None:
        cid = self.best[1]
        self.store.update_run(self.plan.run_id, best_candidate=cid,
                              best_speedup=_speedup(self.store.verdict(self.plan.run_id, cid)))
        write_best(self.store, self.plan.run_id, self.plan.run_dir / BEST_FILE, cid)

    def snapshot(self) -> dict[str, Any]:
        best_id = self.best[1] if self.best else None
        run = self.store.run(self.plan.run_id)
        return {"best_id": best_id, "best_speedup": run.get("best_speedup") if best_id else None,
                "candidates": len(self.seen), "passing": len(self.passing), "spend": self.spend(),
                "limits": {**self.plan.limits.to_dict(), "max_evals": self.plan.budget},
                "stored_before": self.judged_before, "mode": MODE, "activity": self.activity, "done": self.done}

    def progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.snapshot())

    def _evaluator_options(self) -> dict[str, Any]:
        """How instances are judged: here (optionally through a suite's shared pool) or as requests
        in a batch folder, proposed a whole round at a time and pruned for the target's limits."""
        plan = self.plan
        if plan.eval_mode != "batch":
            if plan.shared is None or plan.shared.pool is None:
                return {}
            return {"make_evaluator": functools.partial(JudgeEvaluator, pool=plan.shared.pool,
                                                        waiting=plan.shared.waiting)}
        options: dict[str, Any] = {
            "make_evaluator": functools.partial(BatchTemplateEvaluator, folder=plan.batch_dir, prefix=plan.prefix,
                                                problem_source=plan.problem_source,
                                                problem_name=plan.problem_name, on_found=self.on_found),
            "batch": plan.budget}
        if plan.target:
            options["limits"] = from_target(Target.from_dict(plan.target))
        return options

    def tune(self) -> RunOutcome:
        from kernelwright.tune.autopilot import optimize_without_llm  # noqa: PLC0415 -- tune/autopilot.py loads tune/library/, which imports torch at its top (1-2 s): loaded when a run without an LLM starts

        plan = self.plan
        self.store.update_run(plan.run_id, status="running", detail=None)
        if self.best is not None:  # the stored best and its speedup, as the stored verdicts now read (a
            self._record_best()  # rejudged verdict's amendment; a run a lower --max-evals made worse is mended)
        self.progress()
        if self.judged_before and self.budget_spent():
            return self.already_spent()
        try:
            result = optimize_without_llm(plan.problem_path, budget_evals=plan.budget, judge_config=plan.judge,
                                          on_result=self.on_result, workers=plan.workers, seed=plan.seed,
                                          workdir=plan.run_dir / "autotune", cache=self.cache, stop=self.should_stop,
                                          **self._evaluator_options())
        except KeyboardInterrupt:
            return self.finish("interrupted", f"{INTERRUPTED_DETAIL}; continue with: {resume_command(plan.run_dir)}")
        except VerdictsPending as pending:
            return self.paused(pending)
        if self.stop_reason == "interrupted":
            return self.finish("interrupted", f"{INTERRUPTED_DETAIL}; continue with: {resume_command(plan.run_dir)}")
        if not result.matched:  # the seed may still be the run's best
            return self.finish("failed" if self.best is None else "done", result.message)
        if self.fatal:
            return self.finish("failed", f"environment error (not the kernel's fault): {self.fatal}. "
                                         f"After fixing it: {resume_command(plan.run_dir)}")
        if self.best is None:
            why = self.stop_reason or result.message
            return self.finish("failed", f"no instance passed the judge: {why}")
        detail = result.message + (f"; stopped: {self.stop_reason}" if self.stop_reason else "")
        return self.finish("done", detail)

    def already_spent(self) -> RunOutcome:
        """A resume whose budget the stored instances already fill: nothing is judged, the stored
        best stands."""
        asked = self.plan.asked_evals if self.plan.asked_evals is not None else self.plan.budget
        held = (f"the run already holds {self.judged_before} judged instance(s) (--max-evals {asked}): "
                "nothing more to judge")
        if self.best is None:
            return self.finish("failed", f"no instance passed the judge ({held}); give a larger --max-evals to "
                                         "judge more")
        return self.finish("done", f"{held} (a larger --max-evals judges more); best {self.best[1]} at "
                                   f"{self.best[0]:.4g} ms")

    def paused(self, pending) -> RunOutcome:
        folder = pending.folder
        detail = (f"{len(pending.requests)} evaluation(s) pending in {folder}: run `kernelwright judge --batch "
                  f"{folder}` (or `python -m kernelwright.judge.scheduling.batch {folder}`) where the GPU is. Then: "
                  f"{resume_command(self.plan.run_dir)}")
        outcome = self.finish("paused", detail)
        outcome.pending_evals = list(pending.requests)
        return outcome

    def finish(self, status: str, detail: str) -> RunOutcome:
        plan = self.plan
        best_id = self.best[1] if self.best else None
        self.activity, self.done = f"finished ({status})", True
        self.progress()
        self.store.update_run(plan.run_id, status=status, detail=detail, spend=self.spend())
        best_path = write_best(self.store, plan.run_id, plan.run_dir / BEST_FILE, best_id) if best_id else None
        snapshot = self.snapshot()
        return RunOutcome(plan.run_id, plan.run_dir, status, detail, best_id, snapshot["best_speedup"], best_path,
                          snapshot=snapshot)


def run_autotune(options: RunOptions, on_progress: Callable[[dict], None] | None = None) -> RunOutcome:
    """Start (or, with `options.resume`, continue) a run of the template autotuner."""
    if options.resume:
        return _resume(options, on_progress)
    info = describe_problem(options.problem, options.backend, options.overrides, options.judge.device)
    run_id = new_run_id(info.name)
    run_dir = new_run_dir(options, run_id)
    judge = dataclasses.replace(options.judge, overrides={**options.judge.overrides, **options.overrides})
    budget = DEFAULT_EVALS if options.limits.max_evals is None else options.limits.max_evals
    eval_mode = options.eval_mode or "local"
    if eval_mode not in ("local", "batch"):
        raise RunError(f"--eval {eval_mode}: without an LLM the template tuner judges here (local) or through a "
                       "batch folder (batch)")
    settings = {"mode": MODE, "problem": info.to_dict(), "judge": judge.to_dict(),
                "limits": options.limits.to_dict(), "search": {"strategy": MODE}, "budget_evals": budget,
                "seed": options.seed, "eval_workers": options.eval_workers, "eval": eval_mode}
    if eval_mode == "batch":
        if judge.shrink is None:  # judged on the GPU at the problem's real sizes; the template is built for them
            judge = dataclasses.replace(judge, shrink=False)
        target = _batch_target(options.target)
        settings.update(judge=judge.to_dict(), batch_dir=options.batch_dir or "evals",
                        request_prefix=options.request_prefix, target=target)
    lock = claim_run_dir(options, run_dir)
    try:
        with RunStore.in_dir(run_dir) as store:
            store.create_run(run_id, problem_path=info.path, problem_name=info.name, problem_hash=info.source_hash,
                             problem_source=info.source, settings=settings, status="running")
            store.upsert_candidates(run_id, [{"id": "c0", "action": "reference", "status": "reference",
                                              "code": info.source, "speedup": 1.0}])
            plan = _Plan(run_id, run_dir, info.path, judge, options.limits, budget, options.seed,
                         options.eval_workers)
            _evaluation(plan, settings, store.run(run_id), options)
            session = AutotuneSession(store, plan, on_progress)
            consider_seed(session, info.path, eval_mode)  # torch.compile's kernels, judged before the templates
            return session.tune()
    finally:
        lock.release()


def _batch_target(spec: str | None) -> dict | None:
    """--target for a batch run (its limits prune the configurations); None: the H100's limits."""
    if not spec:
        return None
    return target_of_spec(spec).to_dict()


def _evaluation(plan: _Plan, settings: dict[str, Any], run: dict[str, Any], options: RunOptions) -> None:
    """How the plan's instances are judged: the stored evaluation mode and batch folder, and what a
    suite shares this session (a judge pool, a stop signal)."""
    plan.eval_mode = settings.get("eval", "local")
    if options.eval_mode and options.eval_mode != plan.eval_mode:
        raise RunError(f"{plan.run_dir} was made with --eval {plan.eval_mode} and resumes with it (its stored "
                       f"instances were judged that way); start a new run for --eval {options.eval_mode}")
    plan.batch_dir = Path(os.path.normpath(plan.run_dir / settings.get("batch_dir", "evals")))
    plan.prefix = settings.get("request_prefix") or ""
    plan.target = settings.get("target")
    plan.problem_source, plan.problem_name = run["problem_source"], run["problem_name"]
    plan.shared = options.shared


def _resume(options: RunOptions, on_progress: Callable[[dict], None] | None) -> RunOutcome:
    run_dir = Path(options.resume)
    lock = hold_run(run_dir)
    try:
        with RunStore.in_dir(run_dir, create=False) as store:
            run = store.run()
            check_problem_unchanged(run)
            mark_stale_interrupted(store, run["id"], run)
            settings = dict(run["settings"])
            limits = Limits.from_dict(settings.get("limits")).merged(options.limits)
            budget = (int(settings.get("budget_evals") or DEFAULT_EVALS) if options.limits.max_evals is None
                      else options.limits.max_evals)
            held, asked = _stored_instances(store, run["id"]), None
            if budget < held:  # a budget below what the run holds judges nothing more; it never drops the best
                budget, asked = held, budget
                limits = dataclasses.replace(limits, max_evals=held)
            if limits.to_dict() != settings.get("limits") or budget != settings.get("budget_evals"):
                settings.update(limits=limits.to_dict(), budget_evals=budget)
                store.update_run(run["id"], settings=settings)
                store.add_event(run["id"], "limits", {"limits": limits.to_dict(), "budget_evals": budget})
            workers = options.eval_workers if options.eval_workers > 1 else int(settings.get("eval_workers") or 1)
            plan = _Plan(run["id"], run_dir, run["problem_path"], JudgeConfig.from_dict(settings["judge"]), limits,
                         budget, int(settings.get("seed") or 0), workers,
                         elapsed_before=float((run.get("spend") or {}).get("elapsed_s") or 0.0), asked_evals=asked)
            _evaluation(plan, settings, run, options)
            take_rejudged(store, plan)
            return AutotuneSession(store, plan, on_progress).tune()
    finally:
        lock.release()


def _stored_instances(store, run_id: str) -> int:
    """Judged template instances the run holds (what StoredMeasurements answers from)."""
    return len(StoredMeasurements(store, run_id).by_key)


def take_rejudged(store, plan: _Plan) -> list:
    """The run's instances whose stored verdict is a system error and whose batch verdict file was
    judged again since (rejudged.find): each one's verdict, row and measurement amended and journaled
    in one transaction. Returns the amendments (none outside batch runs)."""
    if plan.eval_mode != "batch":
        return []
    rows = {row["id"]: row for row in store.candidates(plan.run_id)
            if row["action"] == "tune" and "measurement" in (row.get("node") or {})}
    requested = [rejudged.Requested(None, cid, request_name(plan.prefix, row["approach_key"] or "",
                                                            row["node"]["measurement"].get("instance_hash")
                                                            or instance_hash(row["code"] or "")))
                 for cid, row in rows.items()]
    found = rejudged.find(store, plan.run_id, plan.batch_dir, requested)
    for amendment in found:
        store.amend_verdict(plan.run_id, amendment.candidate_id, amendment.verdict, amendment.payload(),
                            plan.elapsed_before, node=_amended_row(rows[amendment.candidate_id]["node"], amendment))
    return found


def _amended_row(node: dict[str, Any], amendment) -> dict[str, Any]:
    """An instance's stored row as its verdict judged again says (a pruned instance stays pruned:
    the same code breaks the device's limits whatever its timing)."""
    before = Measurement.from_dict(node["measurement"])
    after = measured(before.params, amendment.judged, before.instance_hash)
    if before.status == PRUNED:
        after.status, after.stage, after.error, after.time_ms = PRUNED, before.stage, before.error, None
    measurement = after.to_dict()
    measurement.pop("verdict", None)
    return {**node, "status": STATUS_OF.get(after.status, "fail"), "speedup": _speedup(amendment.verdict),
            "reason": after.error or "", "measurement": measurement}
