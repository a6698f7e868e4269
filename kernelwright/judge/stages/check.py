"""Stage 3, check: every trial on freshly generated inputs in poisoned memory, compared with its
reference; the output-cache refill after trial 0; then the rule set's checks on whose code did the
work, and dynamo. The first and the last trial run under the op recorder (a CUDA graph captured in
the first call replays invisibly later); the candidate's own launches are counted over every call
of the stage, and the counting wrappers come off at the end (the timer measures without them)."""
from __future__ import annotations

import contextlib
from pathlib import Path

from ..verdict import ERROR, FAIL, REJECT, CompileResult, Flag, TrialResult
from . import guard
from .context import Context, describe_exception, is_triton_compile_error
from .records import Built, Checked


def run(ctx: Context, built: Built) -> Checked | None:
    """All trials and guards; None when a trial raised (the verdict is then decided)."""
    from ...problem.ops import OpRecorder
    from .. import check, guards

    loaded, own = built.loaded, built.watch.own
    ctx.writer.stage(ctx.verdict, "check")
    first, last = loaded.cases[0], loaded.cases[-1]
    recorders = {id(case): OpRecorder(origin=own.origin) for case in (first, last)}
    own.reset()  # launches while ModelNew was built do not count
    # one shared hold for all trials: holding it per trial (a shorter wait for a worker that times)
    # made the H100 batch slower (19_ReLU, 8 lanes: 37.7 candidates/GPU-minute against 45.3), since
    # every hold passes the turnstile behind waiting writers (docs/benchmarks.md)
    with ctx.on_device(loaded.lock, "shared"), ctx.timer("check"):
        for case in loaded.cases:
            result, args, raised = run_trial(ctx, built, case, recorders.get(id(case)))
            case.pinned = []  # trial 0 ran while the reference's outputs were still held: now free them
            ctx.verdict.trials.append(result)
            ctx.writer.write(ctx.verdict, complete=False)
            if raised is None and case is first and result.ok:
                with ctx.timer("guards"):
                    guard_output_cache(ctx, built, args)
            del args
            if raised is not None:
                stop_on_exception(ctx, built, result, raised)
                return None
    buckets = merged_buckets([r.buckets for r in recorders.values()])
    ctx.verdict.ops = dict(buckets.get("python", {}))
    ctx.verdict.precision["margin"] = check.margin(ctx.verdict.trials)
    with ctx.timer("guards"):
        judge_work(ctx, built, buckets)
        ctx.flag(guards.dynamo_flag(built.watch.dynamo_before, built.watch.compile_tracker.calls,
                                    built.watch.dynamo_patched))
    own.uninstall()  # the timer measures the candidate without the counting wrappers
    return Checked(built=built, buckets=buckets)


def call_candidate(ctx: Context, built: Built, args: list, case, when: str = "during a trial", recorder=None):
    """One forward of ModelNew on poisoned memory, device-wide synchronised; (outputs, None) or
    (None, exception). With `recorder` (an OpRecorder) the ATen ops the forward executes are counted."""
    import torch

    from .. import check, guards

    loaded = built.loaded
    # after the inputs exist: every free block the candidate may now be handed holds poison
    guards.poison_allocator(loaded.device, check.tensor_bytes(case.ref_outputs))
    torch.manual_seed(case.seed)
    try:
        forward = contextlib.nullcontext() if loaded.backward is not None else torch.no_grad()
        with recorder or contextlib.nullcontext(), forward:
            if loaded.backward is None:
                out = built.model(*args)
            else:
                out = loaded.backward.forward(built.model, args, case.seed)
        guards.synchronize(loaded.device)
        return check.flatten_outputs(out), None
    except BaseException as exc:  # noqa: BLE001 - candidate code: anything becomes a verdict
        return None, exc
    finally:
        guard.after_call(ctx, built.watch, when)


def run_trial(ctx: Context, built: Built, case, recorder=None) -> tuple[TrialResult, list, BaseException | None]:
    """One trial on freshly generated inputs in poisoned memory: (result, the input buffers, what the
    candidate raised or None)."""
    from .. import check, grad, guards, inplace

    loaded = built.loaded
    ctx.writer.progress(f"trial {case.index} {case.variant}")
    result = TrialResult(trial=case.index, seed=case.seed, variant=case.variant, ok=False,
                         fallback_from=case.fallback_from)
    args = check.make_inputs(loaded.problem, case.seed, case.variant, loaded.device)
    before = [check.fingerprint(a) for a in args]
    outs, exc = call_candidate(ctx, built, args, case, recorder=recorder)
    if exc is not None:
        result.message = describe_exception(exc, ctx.candidate_path, "ModelNew.forward")
        return result, args, exc
    cmp = check.compare(outs, case.ref_outputs, ctx.config, loaded.device)
    result.ok, result.message = cmp.ok, cmp.message
    result.shape_ok, result.dtype_ok, result.nonfinite = cmp.shape_ok, cmp.dtype_ok, cmp.nonfinite
    result.max_abs_err, result.max_rel_err, result.rel_l2_err = cmp.max_abs_err, cmp.max_rel_err, cmp.rel_l2_err
    result.atol_scale = cmp.atol_scale
    result.error_ratio, result.rel_l2_ratio = cmp.error_ratio, cmp.rel_l2_ratio
    ctx.verdict.precision.setdefault("candidate_dtypes", sorted({str(o.dtype).removeprefix("torch.") for o in outs}))
    mutated = [i for i, (a, b) in enumerate(zip(args, before, strict=True)) if check.fingerprint(a) != b]
    unexpected = inplace.unexpected_writes(mutated, loaded.ref_mutates)
    if unexpected:
        ctx.flag(guards.mutation_flag(unexpected))
    inplace.merge_into(result, inplace.compare_written(args, case, ctx.config, loaded.device))
    if loaded.backward is not None:
        grad.merge_into(result, loaded.backward.compare(case, ctx.config))
    if cmp.poisoned and not cmp.ok:
        ctx.flag(guards.uninitialized_flag(cmp.poisoned))
    return result, args, None


def stop_on_exception(ctx: Context, built: Built, result: TrialResult, exc: BaseException) -> None:
    text = result.message
    if is_triton_compile_error(exc):  # Triton compiles at the first launch: report it as a build error
        ctx.verdict.compile = triton_compile_failure(ctx, built, text)
        ctx.stop(ERROR, f"the Triton kernel does not compile: {text}", stage="compile")
        return
    ctx.stop(FAIL, f"trial {result.trial} ({result.variant} inputs): {text}")


def triton_compile_failure(ctx: Context, built: Built, text: str) -> CompileResult:
    if built.recorder is not None:
        try:
            built.recorder.record_failure(text, backend="triton")
            return built.recorder.result()
        except Exception as exc:  # noqa: BLE001
            ctx.notes.append(f"build recorder failed: {exc}")
    return CompileResult(ok=False, backend="triton", log=text, errors=[text])


def guard_output_cache(ctx: Context, built: Built, args: list) -> None:
    """Refill trial 0's *same* input buffers in place with other values and call again: the output
    must follow the new values, not repeat the first call's (a cache keyed on data_ptr or shape)."""
    from .. import check, guards

    loaded = built.loaded
    first, second = loaded.cases[0], loaded.refill
    ctx.writer.progress("trial refill")
    fresh = check.make_inputs(loaded.problem, second.seed, second.variant, loaded.device)
    for buffer, values in zip(args, fresh, strict=False):
        if hasattr(buffer, "copy_"):
            buffer.copy_(values)
    del fresh
    outs, exc = call_candidate(ctx, built, args, second, "during the output-cache check")
    if exc is not None:
        ctx.flag(Flag("output_cache", REJECT, describe_exception(exc, ctx.candidate_path,
                                                                 "a second call of ModelNew.forward"),
                      check="output_refill"))
        return
    cmp = check.compare(outs, second.ref_outputs, ctx.config, loaded.device)
    if not cmp.ok:
        stale = check.compare(outs, first.ref_outputs, ctx.config, loaded.device).ok
        ctx.flag(guards.output_cache_flag("it returned the previous call's output" if stale else cmp.message))


def merged_buckets(recorded: list[dict]) -> dict:
    """Per bucket and op, the larger count of the recorded calls (each records one forward)."""
    from collections import Counter

    merged: dict = {}
    for buckets in recorded:
        for bucket, counts in buckets.items():
            mine = merged.setdefault(bucket, Counter())
            for name, count in counts.items():
                mine[name] = max(mine[name], count)
    return merged


def judge_work(ctx: Context, built: Built, buckets: dict) -> None:
    """The rule set's checks on whose code did the work (judge/work.py)."""
    from ...rules import get
    from .. import work

    record, flags = work.evaluate(get(ctx.config.rules), built.loaded.ref_ops, buckets, built.watch.own.launches(),
                                  extension_libraries(built), ctx.candidate_source)
    ctx.verdict.work = record
    for flag in flags:
        ctx.flag(flag)


def extension_libraries(built: Built) -> list[str]:
    """The shared libraries of the extensions the candidate built or loaded."""
    found = list(built.watch.own.libraries)
    for record in getattr(built.recorder, "records", []) or []:
        if record.ok and record.build_dir:
            found += [str(p) for p in sorted(Path(record.build_dir).glob("*.so")) if str(p) not in found]
    return found
