"""Stage 1, load: the problem, the device and its lock, and every trial's reference output (read from
the reference store or computed: `stages.reference`), before any candidate code exists in the
process (so the candidate cannot patch the reference). Ends by sealing the baseline parameters
with the supervisor, which also closes the reference store to this evaluation.
"""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

import torch

from ....problem import ProblemError, load_problem
from ....problem.ops import record_aten_ops
from ....problem.reference import TritonLaunchRecorder, describe_reference
from ... import check, gpucompare, gpulock, grad, guards, judgekernels, service
from ... import reference as refside
from ...config import JudgeConfig
from ...refcases import References
from ...request import default_cache_dir
from ...verdict import ERROR
from . import reference as refstage
from .context import Context, describe_exception, install_build_cache, read_text
from .records import Loaded


def run(ctx: Context) -> Loaded | None:
    """Load the problem and every trial's reference output; None when the verdict is decided."""
    ctx.writer.stage(ctx.verdict, "load")
    with ctx.timer("setup"):
        try:
            device = resolve_device(ctx.config)
        except RuntimeError as exc:
            ctx.stop(ERROR, str(exc))
            return None
        if device == "cpu":
            guards.enable_malloc_perturb()  # fresh CPU allocations read as poison (see guards)
        ctx.verdict.device = device
        ctx.verdict.environment = environment(ctx, device)
        lock = device_lock(ctx, device)
        guards.set_full_precision(ctx.config.allow_tf32)
        shrink = ctx.config.shrink if ctx.config.shrink is not None else not device.startswith("cuda")
        refusal = refside.cannot_run_here(read_text(ctx.problem_path), device)
        if refusal:
            ctx.stop(ERROR, f"cannot judge here: {refusal}")
            return None
        builds = install_build_cache(ctx)  # the reference's own extensions build through the cache too
        try:
            problem = load_problem(ctx.problem_path, overrides=ctx.config.overrides, shrink=shrink)
        except ProblemError as exc:
            ctx.stop(ERROR, f"cannot load the problem: {exc}{refside.build_note(builds)}")
            return None
        ctx.verdict.overrides, ctx.verdict.shrunk = dict(problem.overrides), problem.shrunk
        backward = grad.runner_for(problem, device)
        refstage.open_context(device)
    sync = lambda: guards.synchronize(device)  # noqa: E731
    with ctx.timer("reference"):
        reply, entry = refstage.lookup(ctx, problem, device)  # no device work: before the hold
    staged = None
    with ctx.on_device(lock, "shared"), ctx.timer("reference"):
        room = refstage.device_room(device, ctx.config)  # measured under the hold, beside what others hold
        refs = refstage.place(ctx, reply, entry, device, room)
        cache = refstage.hit_record(reply) if refs is not None else None
        del entry
        if refs is None:
            computing = time.perf_counter()
            refs = compute_references(ctx, problem, device, sync, backward, room)
            if refs is None:
                return None
            staged = refstage.stage(ctx, reply, refs, time.perf_counter() - computing)
        refstage.release_cached(device)
    if cache is None:
        with ctx.timer("reference_store"):
            cache = refstage.store(ctx, staged)
    if refs.inputs_on_device is not None:  # as decided when they were computed
        check.assume_inputs_on_device(problem, device, refs.inputs_on_device)
    ctx.verdict.reference = refside.record(describe_reference(problem), refs.launches, refs.ref_ops,
                                           refs.ref_mutates, refside.reference_build(builds))
    if cache is not None:
        ctx.verdict.reference["cache"] = cache
    loaded = Loaded(problem=problem, device=device, lock=lock, cases=refs.cases, refill=refs.refill,
                    ref_mutates=refs.ref_mutates, ref_ops=refs.ref_ops, backward=backward)
    record_precision(ctx, loaded)
    with ctx.timer("judge_kernels"):
        warm_judge_kernels(ctx, loaded)
    seal_baseline_parameters(ctx, loaded)
    return loaded


def warm_judge_kernels(ctx: Context, loaded: Loaded) -> None:
    """Compile the judge's comparison kernel for these reference outputs (`gpucompare.warm`), from
    the entries other evaluations compiled (`judgekernels`), and offer what it compiled anew; before
    the seal, outside the device's hold. Without it the comparison takes the torch path."""
    dtypes = gpucompare.wanted([o for case in loaded.cases for o in case.ref_outputs], loaded.device)
    if not dtypes:
        return
    own = os.environ.get("TRITON_CACHE_DIR")
    try:
        shared = service.call("judge_kernels").get("folder") if service.available() and own else None
        before = judgekernels.seed(Path(shared), Path(own)) if shared else set()
        gpucompare.warm(dtypes, loaded.device)
        added = judgekernels.entries(Path(own)) - before if shared else set()
        if added:
            service.call("store_judge_kernels", path=own, names=sorted(added))
    except Exception as exc:  # noqa: BLE001 - the torch path compares all the same
        ctx.notes.append(f"judge kernels: {type(exc).__name__}: {exc}")


def compute_references(ctx: Context, problem, device: str, sync, backward, room):
    """Every trial's reference outputs, computed here within `room` (a `check.DeviceRoom`) as a
    `refcases.References`; None when the problem's own code failed (the verdict is then decided)."""
    try:
        reference = problem.make_model(ctx.config.seed, device)
        cases, refill, ref_mutates = check.reference_cases(
            problem, reference, ctx.config.trials, ctx.config.seed, device, sync, room=room)
        inputs = check.make_inputs(problem, ctx.config.seed, cases[0].variant, device)
        with TritonLaunchRecorder() as launches:
            ref_ops = dict(record_aten_ops(reference, *inputs))
        if backward is not None:  # the backward's ops are the reference's work too
            ref_ops.update(backward.reference(reference, cases + [refill], sync))
    except Exception as exc:  # noqa: BLE001 - the problem's own code failed
        ctx.stop(ERROR, describe_exception(exc, ctx.problem_path, "the reference Model (problem file)"))
        return None
    return References(cases=cases, refill=refill, ref_mutates=ref_mutates, ref_ops=ref_ops,
                      launches=dict(launches.counts), inputs_on_device=check.inputs_on_device(problem, device))


def device_lock(ctx: Context, device: str):
    lock = gpulock.lock_for(device, default_cache_dir(ctx.config))
    if isinstance(lock, gpulock.NoLock):
        ctx.notes.append(lock.why)
    elif service.available():  # confined: the lock files are made by the supervisor
        try:
            service.call("lock", folder=str(lock.folder), key=lock.key)
        except service.ServiceError as exc:
            ctx.notes.append(f"device lock files: {exc}")
    return lock


def seal_baseline_parameters(ctx: Context, loaded: Loaded) -> None:
    """Tell the supervisor, before any candidate code exists in this process, what its baselines
    are measured for (sizes, device, the device's name): it accepts these once, so a candidate
    cannot have baselines measured, and cached, for other parameters in its name."""
    if not service.available():
        return
    env = ctx.modules.get("env")
    try:
        name = env.device_name(loaded.device) if env is not None else ""
        service.call("seal", overrides=dict(loaded.problem.overrides), device=loaded.device, device_name=name)
    except Exception as exc:  # noqa: BLE001 - no baselines then; the candidate is still judged
        ctx.notes.append(f"baseline parameters not sealed: {exc}")


def resolve_device(config: JudgeConfig) -> str:
    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {config.device!r} was asked for but torch sees no CUDA GPU")
    return config.device


def environment(ctx: Context, device: str) -> dict[str, Any]:
    env = ctx.modules.get("env")
    if env is not None:
        try:
            return dict(env.environment(device))
        except Exception as exc:  # noqa: BLE001 - a missing field must not cost the verdict
            ctx.notes.append(f"env.environment failed: {exc}")
    return {"python": platform.python_version(), "torch": torch.__version__,
            "triton_interpret": os.environ.get("TRITON_INTERPRET", "")}


def record_precision(ctx: Context, loaded: Loaded) -> None:
    dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in loaded.cases[0].ref_outputs})
    tolerances = {d: dict(zip(("atol_rtol", "rel_l2"), ctx.config.tolerance_for(d), strict=True)) for d in dtypes}
    ctx.verdict.precision = {"reference_dtypes": dtypes, "allow_tf32": ctx.config.allow_tf32,
                             "settings": guards.precision_state(), "tolerances": tolerances,
                             "atol_rule": "|out-ref| <= atol*S + rtol*|ref|, S = max(1, RMS(ref)) per output",
                             "inputs_on_device": check.inputs_on_device(loaded.problem, loaded.device),
                             "reference_on_device_bytes": check.on_device_bytes(loaded.cases)}
