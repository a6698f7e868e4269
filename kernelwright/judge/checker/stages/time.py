"""Stage 4, time: a checked, passing candidate timed by this process (`checker.timed_calls`: every
call on fresh inputs, a random sample of them checked, the clock on the checker's own stream;
repeats by the rule of judge/timed.py with the device held exclusively), then its energy (the
runner repeats forward for the window while this process reads the power meter) and where its
kernel time goes (the runner's profiler over the timed calls); then the runner is told to finish,
and only with no candidate process left are the baselines measured (by the supervisor, for the
parameters sealed in the load stage) and the speed-of-light floor applied.

The device is held exclusively once: the timing repeats, then the energy window. Every
exclusive taking waits for all other workers' shared sections to drain, so one taking instead of
two is throughput (docs/benchmarks.md)."""
from __future__ import annotations

from ... import kernel_times, service, timed, work
from ...verdict import FAIL, INFO, WARN, Baselines, Flag, Verdict, dataclass_from
from ..link import RunnerGone
from ..timed_calls import TimedCallFailed, TimedCalls
from . import check as check_stage
from . import finish
from .context import Context
from .records import Checked


def run(ctx: Context, checked: Checked) -> None:
    loaded, link = checked.loaded, checked.built.link
    timing = ctx.modules.get("timing")
    ctx.writer.stage(ctx.verdict, "time")
    if timing is None:
        ctx.flag(Flag("timing_unavailable", INFO, "no timing: " + "; ".join(n for n in ctx.notes if "timing" in n)))
        return
    calls = TimedCalls(link, loaded, ctx.config,
                       share=lambda inputs, grads: check_stage.share(ctx, checked.built, inputs, grads))
    with ctx.timer("time"):
        exclusive = lambda: ctx.on_device(loaded.lock, "exclusive")  # noqa: E731
        with ctx.timer("energy"):
            meter = open_energy_meter(ctx, timing, loaded.device)  # NVML set up before the hold

        def energy() -> None:  # in the hold of the last timing repeat
            with ctx.timer("energy"):
                ctx.verdict.energy = measure_energy(ctx, link, loaded.device, meter)

        try:
            result = timed.time_model(None, ctx.config, loaded.device, calls.measure, hold=exclusive, then=energy)
            with ctx.timer("kernels"), ctx.runner_awake():
                observed = link.report()
        except TimedCallFailed as exc:
            ctx.stop(FAIL, f"ModelNew.forward (while being timed): {exc}")
            return
        except RunnerGone as exc:
            ctx.stop(FAIL, f"while being timed: {ctx.runner.death(str(exc))}")
            return
    stats, flags = result.stats, result.flags
    ctx.verdict.timing = stats
    notes = [stats.note, "forward + backward" if loaded.backward is not None else "",
             f"lower of 2 agreeing repeats of {len(result.repeats)}" if result.steady else "",
             f"{calls.checked} timed calls checked"]
    stats.note = "; ".join(filter(None, notes))
    ctx.verdict.kernels = kernel_shares(observed, loaded.device)
    seen = any(f.code == "observed_work" for f in ctx.verdict.flags)  # already by the trials alone
    more = check_stage.observed_work(ctx, checked, observed)
    for flag in flags + ([] if seen else more):
        ctx.flag(flag)
    timer_note(ctx, link)
    end_runner(ctx)
    baselines_and_floor(ctx, checked)


def timer_note(ctx: Context, link) -> None:
    """Where the clock was: the checker's stream (MPS), the runner's (no MPS: a warning), the wall."""
    if link.clock == "runner_events":
        why = ctx.runner.mps_note or "no MPS server"
        ctx.flag(Flag("timer_in_candidate", WARN, f"timed by CUDA events in the candidate's own process ({why}): the "
                      "checker could not time another process's GPU work without a context switch per call"))
    ctx.verdict.environment["timer"] = {"clock": link.clock, "mps": ctx.runner.mps_note or "active"
                                        if link.clock == "checker_events" else ctx.runner.mps_note}


def end_runner(ctx: Context) -> None:
    """Tell the runner to finish (its report is final) before anything is measured without it."""
    if ctx.runner.finished:
        return
    ctx.runner.ended()
    try:
        ctx.runner.last_report = ctx.link.finish()
    except RunnerGone:
        pass


def kernel_shares(observed: dict, device: str) -> dict:
    """Where the timed calls' kernel time went: per kernel its µs and launches per call and share."""
    if not str(device).startswith("cuda"):
        return kernel_times.unavailable("evaluated on the CPU: there is no GPU kernel timeline (Triton runs in the "
                                        "interpreter), so no per-kernel times")
    records = work.phase_calls(observed, "timed")
    totals: dict[str, list[float]] = {}
    for record in records:
        for name, (us, launches) in (record.get("kernel_us") or {}).items():
            entry = totals.setdefault(kernel_times.short_kernel_name(name), [0.0, 0.0])
            entry[0] += float(us)
            entry[1] += float(launches)
    calls = len(records)
    total = sum(us for us, _ in totals.values()) / calls if calls else 0.0
    if not calls or total <= 0:
        return kernel_times.unavailable("the timed calls launched no GPU kernel the profiler could see")
    kernels = sorted(({"name": name, "us_per_call": round(us / calls, 3), "launches_per_call": round(n / calls, 2),
                       "share": round(us / calls / total, 4)} for name, (us, n) in totals.items()),
                     key=lambda k: -k["us_per_call"])
    shown, rest = kernels[:kernel_times.TOP], kernels[kernel_times.TOP:]
    if rest:
        shown.append({"name": f"{len(rest)} other kernels", "us_per_call": round(sum(k["us_per_call"] for k in rest), 3),
                      "launches_per_call": round(sum(k["launches_per_call"] for k in rest), 2),
                      "share": round(sum(k["share"] for k in rest), 4)})
    return {"available": True, "method": f"the runner's profiler over {calls} timed calls (CUPTI, every thread)",
            "kernels_per_call": round(sum(k["launches_per_call"] for k in kernels), 2),
            "kernel_us_per_call": round(total, 3), "kernels": shown}


def open_energy_meter(ctx: Context, timing, device: str):
    """The energy meter with its driver handle open (`timing.open_energy_meter`), or None: opening
    NVML takes a while and needs no lock, so it is done before the device is held."""
    opener = getattr(timing, "open_energy_meter", None)
    if opener is None:
        return None
    try:
        return opener(ctx.config, device)
    except Exception as exc:  # noqa: BLE001 - the window says why it has no reading
        ctx.notes.append(f"energy meter not opened ahead: {type(exc).__name__}: {exc}")
        return None


def measure_energy(ctx: Context, link, device: str, meter) -> dict:
    """Joules per call over the energy window (GPU), or why not; a failing meter never costs the
    verdict. The runner repeats forward for the window; the calls it made are its own count."""
    if not str(device).startswith("cuda"):
        return {"available": False, "reason": "CPU run: GPU energy is not measured"}
    if ctx.config.energy_ms <= 0:
        return {"available": False, "reason": "switched off (energy_ms = 0)"}
    if meter is None:
        return {"available": False, "reason": "no energy meter (NVML) could be opened"}
    try:
        with meter:
            reply = link.burst(ctx.config.energy_ms)
        reading = meter.reading(int(reply.get("calls") or 0)).to_dict()
    except Exception as exc:  # noqa: BLE001 - the meter or the burst: the verdict stands without energy
        return {"available": False, "reason": f"energy measurement failed: {type(exc).__name__}: {exc}"}
    reading["available"] = reading.get("joules") is not None
    reading["calls_counted_by"] = "the candidate's process"
    if not reading["available"]:
        reading["reason"] = reading.get("note") or "no energy counter or power readings"
    return reading


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
    """From the supervisor (it measures and caches them once the runner is gone; this process may
    not write the cache), for the parameters sealed before the candidate was loaded; in-process
    where there is none."""
    if service.available():
        return dataclass_from(Baselines, service.call("baselines")["baselines"])
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
