"""Stage 4, time: a checked, passing candidate timed exactly as its baselines are (judge/timed.py:
same inputs, same call, repeats of `timing.measure` with the device held exclusively, events with
L2 flush on a GPU, labelled wall time on a CPU), then its energy and where its kernel time goes;
then the baselines (measured and cached by the supervisor, for the parameters sealed in the load
stage) and the speed-of-light floor.

The device is held exclusively once: the timing repeats, then the energy window (the energy meter
opened before the hold), then the kernel-times profile (CUPTI set up and tracing enabled only after
the timing and the energy window: enabled tracing must not run while they measure). Its events are
read after the hold. Every exclusive taking waits for all other workers' shared sections to drain,
so one taking instead of two is throughput (docs/benchmarks.md)."""
from __future__ import annotations

from ..verdict import FAIL, INFO, Flag, Verdict
from . import finish, guard
from .context import Context, describe_exception
from .records import Checked


def run(ctx: Context, checked: Checked) -> None:
    import torch

    from .. import timed

    built, loaded = checked.built, checked.loaded
    timing = ctx.modules.get("timing")
    ctx.writer.stage(ctx.verdict, "time")
    if timing is None:
        ctx.flag(Flag("timing_unavailable", INFO, "no timing: " + "; ".join(n for n in ctx.notes if "timing" in n)))
        return
    with ctx.timer("time"):
        # the inputs, the call and the repeat rule of the baselines (judge/timed.py): one method
        args = timed.timing_inputs(loaded.problem, ctx.config, loaded.device)
        try:
            with ctx.on_device(loaded.lock, "shared"), torch.no_grad():
                forward = timed.model_call(built.model, args, loaded.backward, ctx.config.seed)
            exclusive = lambda: ctx.on_device(loaded.lock, "exclusive")  # noqa: E731
            with ctx.timer("energy"):
                meter = open_energy_meter(ctx, timing, loaded.device)  # NVML set up before the hold

            from .. import kernel_times
            recorded: list = []

            def energy_then_kernels() -> None:  # in the hold of the last timing repeat
                with ctx.timer("energy"):
                    ctx.verdict.energy = measure_energy(ctx, timing, forward, loaded.device, meter)
                with ctx.timer("kernels"):
                    recorded.append(kernel_times.record(forward, loaded.device))

            result = timed.time_model(forward, ctx.config, loaded.device, timing.measure, hold=exclusive,
                                      then=energy_then_kernels)
            stats, flags = result.stats, result.flags
            with ctx.timer("kernels"):  # after the hold
                ctx.verdict.kernels = kernel_times.read(recorded[0]) if recorded else \
                    kernel_times.unavailable("the kernel timeline was not recorded")
        except BaseException as exc:  # noqa: BLE001 - candidate code runs inside measure
            ctx.stop(FAIL, describe_exception(exc, ctx.candidate_path, "ModelNew.forward (while being timed)"))
            return
        finally:
            guard.after_call(ctx, built.watch, "while being timed")
    ctx.verdict.timing = stats
    notes = [stats.note, "forward + backward" if loaded.backward is not None else "",
             f"lower of 2 agreeing repeats of {len(result.repeats)}" if result.steady else ""]
    stats.note = "; ".join(filter(None, notes))
    for flag in flags:
        ctx.flag(flag)
    baselines_and_floor(ctx, checked)


def open_energy_meter(ctx: Context, timing, device: str):
    """The energy meter with its driver handle open (`timing.open_energy_meter`), or None: opening
    NVML takes a while and needs no lock, so it is done before the device is held."""
    opener = getattr(timing, "open_energy_meter", None)
    if opener is None:
        return None
    try:
        return opener(ctx.config, device)
    except Exception as exc:  # noqa: BLE001 - the meter opens again inside the window, and says why there
        ctx.notes.append(f"energy meter not opened ahead: {type(exc).__name__}: {exc}")
        return None


def measure_energy(ctx: Context, timing, forward, device: str, meter=None) -> dict:
    """Joules per call (GPU), or why not; a failing meter never costs the verdict."""
    measure = getattr(timing, "energy_per_call", None)
    if measure is None:
        return {"available": False, "reason": "this judge's timing module has no energy_per_call"}
    try:
        return measure(forward, ctx.config, device, meter=meter) if meter is not None else \
            measure(forward, ctx.config, device)
    except Exception as exc:  # noqa: BLE001 - the meter, not the candidate (its errors surfaced in measure)
        return {"available": False, "reason": f"energy measurement failed: {type(exc).__name__}: {exc}"}


def baselines_and_floor(ctx: Context, checked: Checked) -> None:
    finish.finalize(ctx, final=False)
    ctx.writer.progress("baseline")
    ctx.writer.write(ctx.verdict, complete=False)
    baseline = ctx.modules.get("baseline")
    if baseline is not None and ctx.config.baselines:
        # not under the device lock: each baseline process takes it around its own measurement
        with ctx.timer("baselines"):
            try:
                ctx.verdict.baselines = get_baselines(ctx, checked, baseline)
                for flag in baseline.noise_flags(ctx.verdict.baselines):
                    ctx.flag(flag)
            except Exception as exc:  # noqa: BLE001 - the candidate's verdict stands without them
                ctx.flag(Flag("baseline_unavailable", INFO, f"baselines failed: {type(exc).__name__}: {exc}"))
    ctx.verdict.speedup = speedups(ctx.verdict)
    floor = ctx.modules.get("floor")
    if floor is not None:
        with ctx.timer("floor"):
            try:
                apply_floor(ctx, checked, floor)
            except Exception as exc:  # noqa: BLE001
                ctx.flag(Flag("floor_unavailable", INFO, f"speed-of-light floor failed: {type(exc).__name__}: {exc}"))


def get_baselines(ctx: Context, checked: Checked, baseline):
    """From the supervisor (it measures and caches them; this process may not write the cache),
    for the parameters sealed before the candidate was loaded; in-process where there is none."""
    from .. import service
    from ..verdict import Baselines, _build

    if service.available():
        return _build(Baselines, service.call("baselines")["baselines"])
    loaded = checked.loaded
    return baseline.get_baselines(ctx.problem_path, dict(loaded.problem.overrides), ctx.config, loaded.device)


def speedups(verdict: Verdict) -> dict[str, float]:
    if verdict.timing is None or verdict.baselines is None or verdict.timing.median_ms <= 0:
        return {}
    result = {}
    for name in ("eager", "compile_default", "compile_max_autotune"):
        stats = getattr(verdict.baselines, name, None)
        if stats is not None and stats.median_ms > 0:
            result[name] = round(stats.median_ms / verdict.timing.median_ms, 4)
    return result


def apply_floor(ctx: Context, checked: Checked, floor) -> None:
    found = floor.compute_floor(checked.loaded.problem, checked.loaded.device)
    if found is None:
        return
    applied = floor.apply(found, ctx.verdict.timing) if ctx.verdict.timing is not None else found
    flags = []
    if isinstance(applied, tuple):  # (Floor, flags) or (Floor, flag)
        applied, extra = applied
        flags = list(extra) if isinstance(extra, (list, tuple)) else [extra]
    ctx.verdict.floor = applied
    for flag in flags:
        ctx.flag(flag)
