"""The stages of a sweep request (judge/sweep.py): after the load stage (one trial's reference),
each instance in turn is scanned here, loaded and built by the runner, called on the trial's fresh
inputs and compared (`check.run_trial`, the same call and comparison as a normal evaluation's),
judged by the rule set on the runner's record of that call, and, when it passed, timed by one
repeat of the judge's timed calls (`timed_calls.TimedCalls`: fresh inputs every call, a random
sample compared, the runner cannot tell a checked call from an unchecked one) with the device held
exclusively. Each instance is judged into a verdict of its own (a copy of the context), so one
instance's flags never reach another's; the evaluation's verdict carries the sweep's record
(`Verdict.sweep`), written after every configuration (a killed evaluation keeps what it found)."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from ... import candidate_kinds, sweep
from ...verdict import FAIL, PASS, REJECT, Verdict
from ..link import RunnerGone
from ..timed_calls import TimedCallFailed, TimedCalls, TooSlowToTime
from . import check as check_stage
from . import compile as compile_stage
from .context import Context
from .records import Built, Checked, Loaded

_perf_counter = time.perf_counter  # captured before candidate code can replace it
CALL_TIMEOUT_SHARE = 0.5  # of timeout_s: one call's limit in a sweep
TIME_BUDGET_SHARE = 0.5  # of timeout_s: a configuration's timed calls, judged from the first (the stage clock's is timeout_s)


class Skip(Exception):
    """This configuration ends here: `status` and `reason` say why."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def run(ctx: Context, loaded: Loaded) -> None:
    """Every instance of the request, in order; the verdict passes when one was timed."""
    instances = sweep.parse_instances(ctx.request.sweep)
    folder = ctx.runner.instances  # written by the supervisor where the runner may read but not write
    if folder is None:  # a runner this process started (no supervisor): the instances are ours to write
        folder = Path(ctx.runner.candidate_path).parent
        sweep.write_instances(folder, ctx.request.sweep)
    record = sweep.SweepResult(configs=[sweep.ConfigResult(i, item.params) for i, item in enumerate(instances)],
                               device=str(loaded.device))
    ctx.runner.frozen_between_holds = True  # it runs only inside this stage's holds, as after a load
    ctx.runner.freeze()
    # a hung call is noticed here before the supervisor's stage clock (timeout_s) ends the evaluation
    ctx.link.timeout_s = CALL_TIMEOUT_SHARE * ctx.config.timeout_s
    shared: dict = {}  # the reference model the timed calls compare with, built once for all instances
    for config, instance in zip(record.configs, instances, strict=True):
        one(ctx, loaded, record, config, instance.source, sweep.instance_path(folder, config.index), shared)
        if ctx.runner.finished:  # it died, or hung and was killed: the next instance has no process
            record.ended_early = (f"the runner died or was ended at configuration {config.index} ({config.status}"
                                  f"{': its CUDA context was broken' if sweep.breaks_context(config.reason) else ''}"
                                  "): the configurations after it were not run; send them again in a new sweep")
            break
    for config in record.configs:
        if config.status == sweep.NOT_RUN and not config.reason:
            config.reason = record.ended_early or "not reached"
    publish(ctx, record)
    ranked = record.ranked
    ctx.stopped = True  # the verdict is the sweep's, not a candidate's
    ctx.verdict.status = PASS if ranked else FAIL
    ctx.verdict.error = None if ranked else "no configuration of the sweep passed its trial: " + record.summary()
    ctx.verdict.stage = "done"


def publish(ctx: Context, record) -> None:
    ctx.verdict.sweep = record.to_dict()
    ctx.writer.write(ctx.verdict, complete=False)


def one(ctx: Context, loaded: Loaded, record, config, source: str, path: Path, shared: dict) -> None:
    """One configuration, start to end; whatever stops it becomes its status and reason."""
    started = _perf_counter()
    config.status = sweep.RUNNING
    publish(ctx, record)
    ctx.writer.progress(f"stage compile #{config.index}")  # each configuration gets the stage clock anew
    mine = replace(ctx, verdict=Verdict(problem=ctx.verdict.problem, candidate=str(path), config=ctx.verdict.config,
                                        rules=ctx.verdict.rules), notes=[], stopped=False,
                   candidate_path=path, candidate_source=source)
    try:
        built = build(ctx, mine, loaded, source, path)
        checked = trial(ctx, mine, built)
        stats, calls = timed(ctx, mine, checked, shared)
        config.status, config.time_ms, config.iqr_ms = sweep.OK, stats.median_ms, stats.iqr_ms
        config.calls, config.checked, record.method = stats.n, calls.checked, stats.method
        config.reason = stats.note
    except Skip as skip:
        config.status, config.reason = skip.status, skip.reason
        if str(loaded.device).startswith("cuda") and sweep.breaks_context(skip.reason):
            ctx.runner.kill()  # its CUDA context is unusable: the next instance gets a fresh process
            ctx.runner.finished = True
    except RunnerGone as exc:
        if "no answer within" in str(exc):  # hung: killed now, not left holding the device
            ctx.runner.kill()
            config.status = sweep.TIMED_OUT
            config.reason = f"{exc}: the instance hangs or is far too slow; its process was killed"
        else:
            config.status, config.reason = sweep.CRASHED, ctx.runner.death(str(exc))
            ctx.runner.kill()
        ctx.runner.finished = True
    config.seconds = round(_perf_counter() - started, 3)


def build(ctx: Context, mine: Context, loaded: Loaded, source: str, path: Path) -> Built:
    """The instance's source scanned, then imported and ModelNew built in the runner."""
    findings = candidate_kinds.scan(source)
    if findings:
        raise Skip(sweep.REJECTED, "; ".join(f"line {f.line}: uses {f.what}: {f.why}" for f in findings))
    link = ctx.link
    with ctx.on_device(loaded.lock, "shared"), ctx.timer("compile"):
        # an extension may build here: half of the compile stage's clock, not of a call's
        reply = link.load(timeout=CALL_TIMEOUT_SHARE * ctx.config.compile_timeout_s,
                          **compile_stage.load_fields(ctx, loaded, path))
        if not reply.get("ok"):
            result = compile_stage.compile_result(mine, reply.get("compile"))
            message = str(reply.get("error") or "the instance did not load")
            raise Skip(sweep.BUILD_ERROR, message + compile_stage.compile_errors(result, message))
        reply = link.build()
        if not reply.get("ok"):
            raise Skip(sweep.BUILD_ERROR, str(reply.get("error")))
    return Built(loaded=loaded, link=link)


def trial(ctx: Context, mine: Context, built: Built) -> Checked:
    """One trial on fresh inputs, compared with its reference; then the rule set's checks on the
    runner's record of it (the output-cache guard and the other trials are the full evaluation's)."""
    loaded = built.loaded
    ctx.writer.stage(ctx.verdict, "check")
    with ctx.on_device(loaded.lock, "shared"), ctx.timer("check"):
        result, raised = check_stage.run_trial(mine, built, loaded.cases[0], record=True)
        if raised is not None:
            compile_error = raised.startswith("triton") and "Compil" in raised
            raise Skip(sweep.BUILD_ERROR if compile_error else sweep.FAILED,
                       ("the Triton kernel does not compile: " if compile_error else "") + result.message)
        if not result.ok:
            raise Skip(sweep.FAILED, f"trial {result.trial} ({result.variant} inputs): {result.message}")
        with ctx.timer("guards"):
            observed = built.link.report()
    buckets = {k: dict(v) for k, v in (observed.get("buckets") or {}).items()}
    checked = Checked(built=built, buckets=buckets, observed=observed)
    with ctx.timer("guards"):
        check_stage.observation_flags(mine, observed)
        check_stage.judge_work(mine, checked)
    rejected(mine)
    return checked


def timed(ctx: Context, mine: Context, checked: Checked, shared: dict):
    """One repeat of the judge's timed calls, the device held exclusively; then the timed calls'
    work against the recorded trial's (`observed_work`)."""
    loaded, built = checked.loaded, checked.built
    if ctx.modules.get("timing") is None:
        raise Skip(sweep.FAILED, "the judge's timing module is not available: nothing was timed")
    ctx.writer.stage(ctx.verdict, "time")
    calls = TimedCalls(built.link, loaded, ctx.config,
                       share=lambda inputs, grads: check_stage.share(mine, built, inputs, grads),
                       reference=shared.get("reference"), budget_ms=TIME_BUDGET_SHARE * ctx.config.timeout_s * 1e3)
    try:
        with ctx.on_device(loaded.lock, "exclusive"), ctx.timer("time"):
            stats, flags = calls.measure()
            observed = built.link.report()
    except TimedCallFailed as exc:
        raise Skip(sweep.FAILED, f"ModelNew.forward (while being timed): {exc}") from exc
    except TooSlowToTime as exc:
        raise Skip(sweep.TIMED_OUT, str(exc)) from exc
    finally:
        shared["reference"] = calls.reference
    for flag in flags + check_stage.observed_work(mine, checked, observed):
        mine.flag(flag)
    rejected(mine)
    return stats, calls


def rejected(mine: Context) -> None:
    flags = [f for f in mine.verdict.flags if f.severity == REJECT]
    if flags:
        raise Skip(sweep.REJECTED, "; ".join(f"[{f.code}] {f.message}" for f in flags))
