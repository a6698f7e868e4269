"""Stage 3, check: every trial is a call of the runner (`link.RunnerLink.call`, the same call the
timing makes) on freshly generated inputs written into the shared buffers, its outputs copied out
of the runner's memory and compared here with the reference's; after trial 0 the same buffers are
refilled with other values and called again (the output-cache guard). The first and the last
trial ask the runner for its dispatcher record. Then the rule set's checks on whose code did the
work, from what the runner recorded of the trials (`observed`), and dynamo."""
from __future__ import annotations

import torch

from .... import rules
from ... import check, grad, guards, inplace, work
from ...checks import check_flag
from ...verdict import ERROR, FAIL, REJECT, CompileResult, Flag, TrialResult
from ..link import RunnerGone
from .context import Context
from .records import Built, Checked

TRIALS = "trials"


def run(ctx: Context, built: Built) -> Checked | None:
    """All trials and guards; None when a trial raised (the verdict is then decided)."""
    loaded = built.loaded
    ctx.writer.stage(ctx.verdict, "check")
    first, last = loaded.cases[0], loaded.cases[-1]
    # one shared hold for all trials: holding it per trial made the H100 batch slower (19_ReLU, 8
    # lanes: 37.7 candidates/GPU-minute against 45.3), since every hold passes the turnstile
    # behind waiting writers (docs/benchmarks.md)
    try:
        with ctx.on_device(loaded.lock, "shared"), ctx.timer("check"):
            for case in loaded.cases:
                result, raised = trial_with_room(ctx, built, case, record=case is first or case is last)
                case.pinned = []  # trial 0 ran while the reference's outputs were still held: now free them
                ctx.verdict.trials.append(result)
                ctx.writer.write(ctx.verdict, complete=False)
                if raised is None and case is first and result.ok:
                    with ctx.timer("guards"):
                        guard_output_cache(ctx, built)
                if raised is not None:
                    stop_on_exception(ctx, built, result, raised)
                    return None
            with ctx.timer("guards"):
                observed = built.link.report()
    except RunnerGone as exc:
        ctx.stop(FAIL, ctx.runner.death(str(exc)), stage="check")
        return None
    except torch.OutOfMemoryError as exc:  # the output cache guard's call
        ctx.stop(FAIL, f"the refill call: {out_of_room(built.link, exc)}", stage="check")
        return None
    buckets = {k: dict(v) for k, v in (observed.get("buckets") or {}).items()}
    ctx.verdict.ops = dict(buckets.get("python", {}))
    ctx.verdict.precision["margin"] = check.margin(ctx.verdict.trials)
    checked = Checked(built=built, buckets=buckets, observed=observed)
    with ctx.timer("guards"):
        observation_flags(ctx, observed)
        judge_work(ctx, checked)
    return checked


def trial_with_room(ctx: Context, built: Built, case, record: bool = False) -> tuple[TrialResult, str | None]:
    """`run_trial`, whose own device allocations get room from the runner's cache when they run out
    (`link.with_room`); a shortage that remains fails the trial with the out-of-memory text (the pool
    then judges it again alone, and with the references on the host, before holding it against the
    candidate)."""
    try:
        return run_trial(ctx, built, case, record)
    except torch.OutOfMemoryError as exc:
        result = TrialResult(trial=case.index, seed=case.seed, variant=case.variant, ok=False,
                             fallback_from=case.fallback_from)
        result.message = out_of_room(built.link, exc)
        return result, "OutOfMemoryError"


def out_of_room(link, exc: BaseException) -> str:
    """The trial's message when the checker's own allocation ran out (it keeps the out-of-memory text)."""
    held = getattr(link, "held", None)
    after = (f" even after the candidate's process gave its cached blocks back (it still holds "
             f"{held / (1 << 30):.2f} GiB)") if isinstance(held, int) else ""
    return f"CUDA out of memory: the judge could not allocate what it needs to check this call{after} ({exc})"[:1500]


def run_trial(ctx: Context, built: Built, case, record: bool = False) -> tuple[TrialResult, str | None]:
    """One trial on freshly generated inputs: (result, the candidate's error or None)."""
    loaded = built.loaded
    ctx.writer.progress(f"trial {case.index} {case.variant}")
    result = TrialResult(trial=case.index, seed=case.seed, variant=case.variant, ok=False,
                         fallback_from=case.fallback_from)
    room = built.link.with_room
    pristine = room(lambda: check.make_inputs(loaded.problem, case.seed, case.variant, loaded.device))
    grad_outputs = room(lambda: grad_outputs_for(loaded, case))
    share(ctx, built, pristine, grad_outputs)
    called = built.link.call(pristine, grad_outputs, phase=TRIALS, record=record)
    if called.error is not None:
        result.message = called.error
        return result, called.error_type or "error"
    outs = called.outputs
    cmp = room(lambda: compare_outputs(ctx, called, case.ref_outputs, loaded.device))
    result.ok, result.message = cmp.ok, cmp.message
    result.shape_ok, result.dtype_ok, result.nonfinite = cmp.shape_ok, cmp.dtype_ok, cmp.nonfinite
    result.max_abs_err, result.max_rel_err, result.rel_l2_err = cmp.max_abs_err, cmp.max_rel_err, cmp.rel_l2_err
    result.atol_scale = cmp.atol_scale
    result.error_ratio, result.rel_l2_ratio = cmp.error_ratio, cmp.rel_l2_ratio
    ctx.verdict.precision.setdefault("candidate_dtypes", sorted({str(o.dtype).removeprefix("torch.") for o in outs}))
    shared = built.link.shared
    mutated = [i for i, (a, b) in enumerate(zip(shared, pristine, strict=True))
               if check.fingerprint(a) != check.fingerprint(b)]
    unexpected = inplace.unexpected_writes(mutated, loaded.ref_mutates)
    if unexpected:
        ctx.flag(guards.mutation_flag(unexpected))
    inplace.merge_into(result, inplace.compare_written(shared, case, ctx.config, loaded.device))
    if loaded.backward is not None:
        loaded.backward.last = dict(called.grads)
        grad.merge_into(result, loaded.backward.compare(case, ctx.config))
    if cmp.poisoned and not cmp.ok:
        ctx.flag(guards.uninitialized_flag(cmp.poisoned))
    if not cmp.ok and result.ok is False and not called.late:
        side_stream_check(ctx, built, case, called)
    return result, None


def share(ctx: Context, built: Built, pristine: list, grad_outputs: list) -> None:
    """The runner's shared buffers shaped for these inputs (made again only when they differ)."""
    sizes = [n for case in built.loaded.cases[:1] for n in check.tensor_bytes(case.ref_outputs)]
    built.link.share(pristine, grad_outputs, poison=sizes)


def grad_outputs_for(loaded, case) -> list:
    """The output gradients of a backward problem's call (the reference's, for this trial's seed)."""
    if loaded.backward is None:
        return []
    return list(loaded.backward.grad_outputs([o.to(loaded.device) for o in case.ref_outputs], case.seed))


def compare_outputs(ctx: Context, called, refs: list, device: str):
    """The comparison of a call's copied outputs, after the runner's own account of their types
    (a tensor subclass could have meant something else by them)."""
    plain = ("Tensor", "Parameter")
    for index, kind in enumerate(called.types):
        if kind not in plain:
            label = "output" if len(called.types) == 1 else f"output {index}"
            return check.Comparison(False, message=f"{label} is a {kind}, not a plain torch.Tensor")
    return check.compare(called.outputs, refs, ctx.config, device)


def side_stream_check(ctx: Context, built: Built, case, called) -> None:
    """A trial whose outputs, copied when the call ended, were wrong: copied again once the runner's
    device work has drained, they match the reference if the candidate's work escaped its stream
    (another stream never joined back, a thread): the verdict then says so."""
    try:
        again = built.link.recopy()
    except Exception:  # noqa: BLE001 - the first comparison stands
        return
    if again and check.compare(again, case.ref_outputs, ctx.config, built.loaded.device).ok:
        ctx.flag(check_flag("side_stream", REJECT,
                            "the outputs were still being written after forward returned: at the "
                            "end of the call they were wrong, a moment later right. Launch on the current stream, or make "
                            "it wait for your streams and threads before returning"))


def stop_on_exception(ctx: Context, built: Built, result: TrialResult, error_type: str) -> None:
    text = result.message
    if error_type.startswith("triton") and "Compil" in error_type:  # Triton compiles at its first launch
        ctx.verdict.compile = CompileResult(ok=False, backend="triton", log=text, errors=[text])
        ctx.stop(ERROR, f"the Triton kernel does not compile: {text}", stage="compile")
        return
    ctx.stop(FAIL, f"trial {result.trial} ({result.variant} inputs): {text}")


def guard_output_cache(ctx: Context, built: Built) -> None:
    """Call again on trial 0's variant with other values in the *same* buffers: the output must
    follow the new values, not repeat the first call's (a cache keyed on data_ptr or shape)."""
    loaded = built.loaded
    first, second = loaded.cases[0], loaded.refill
    ctx.writer.progress("trial refill")
    pristine = check.make_inputs(loaded.problem, second.seed, second.variant, loaded.device)
    grad_outputs = grad_outputs_for(loaded, second)
    share(ctx, built, pristine, grad_outputs)
    called = built.link.call(pristine, grad_outputs, phase=TRIALS)
    if called.error is not None:
        ctx.flag(check_flag("output_refill", REJECT, f"a second call of ModelNew.forward: {called.error}"))
        return
    cmp = compare_outputs(ctx, called, second.ref_outputs, loaded.device)
    if not cmp.ok:
        stale = check.compare(called.outputs, first.ref_outputs, ctx.config, loaded.device).ok
        ctx.flag(guards.output_cache_flag("it returned the previous call's output" if stale else cmp.message))


def observation_flags(ctx: Context, observed: dict) -> None:
    """What the runner saw the candidate do to its own process: functions replaced, precision
    switches changed, torch.compile used."""
    for entry in observed.get("patched") or []:
        ctx.flag(guards.monkeypatch_flag(list(entry.get("names") or []), str(entry.get("when") or "")))
    for change in observed.get("precision_changes") or []:
        ctx.flag(guards.precision_flag(dict(change.get("before") or {}), dict(change.get("after") or {}),
                                       ctx.config.allow_tf32))
    dynamo = observed.get("dynamo") or {}
    ctx.flag(guards.dynamo_flag(0, list(dynamo.get("calls") or []), bool(dynamo.get("patched")),
                                frames=int(dynamo.get("frames") or 0)))
    for note in observed.get("notes") or []:
        ctx.notes.append(f"runner: {note}")


def judge_work(ctx: Context, checked: Checked) -> None:
    """The rule set's checks on whose code did the work (judge/work.py), with the torch ops the
    profiler saw on other threads during the trials counted as forward's own."""
    observed = checked.observed
    threads = work.thread_ops(observed, TRIALS) if checked.loaded.backward is None else {}
    record, flags = work.evaluate(rules.get(ctx.config.rules), checked.loaded.ref_ops, checked.buckets,
                                  dict(observed.get("launches") or {}), list(observed.get("libraries") or []),
                                  ctx.candidate_source, thread_ops=threads,
                                  own_kernels=work.own_kernels_seen(observed, TRIALS))
    ctx.verdict.work = record
    for flag in flags:
        ctx.flag(flag)

    for flag in observed_work(ctx, checked, observed):
        ctx.flag(flag)


def observed_work(ctx: Context, checked: Checked, observed: dict) -> list[Flag]:
    """The timed calls ran no more torch work than the recorded trials (`work.observed_work_flag`)."""
    key = "kernels" if str(checked.loaded.device).startswith("cuda") else "top_ops"
    watched, unwatched = work.split_recorded(observed)
    if ctx.verdict.work is not None:
        ctx.verdict.work.kernels = {"recorded": dict(work.per_call_max(watched, key)),
                                    "unrecorded": dict(work.per_call_max(unwatched, key)), "counted": key}
    flag = work.observed_work_flag(watched, unwatched, key)
    return [flag] if flag is not None else []
