"""Where a candidate's GPU time goes: the share of each kernel it launches per forward.

After the timing and the energy window, in the same exclusive hold of the device, the judge records
a few more forwards under torch.profiler (CUPTI) and, after the hold, sums the device time of each
kernel per call: cheap (well under a second for most candidates), and enough
for a model to see which of two kernels dominates. The candidate is already warm (compiled,
autotuned) by then. On a CPU there is no kernel timeline (Triton runs in the interpreter), so the
record says so instead of inventing numbers.

Stdlib at import; torch and kernelwright.profile.torchprof are imported when measuring.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from kernelwright.profile.torchprof import (PROFILER_WARMUP_CALLS, prepared_profiler, summarize_timeline,
                                            timeline_events, trace_forwards)

CALLS = 5  # recorded forwards after the profiler's own warm-up forward
TOP = 8  # kernels listed per verdict; the rest are summed as "other kernels"
NAME_CHARS = 120


def short_kernel_name(name: str) -> str:
    """`void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` -> `at::native::vectorized_elementwise_kernel<…>`.

    C++ kernel names carry their template arguments and signature; the function's name is what a
    reader recognises. Triton kernels keep their plain names.
    """
    text = re.sub(r"^void\s+", "", name.strip()).replace("(anonymous namespace)::", "")
    depth, out, inside = 0, [], []
    for ch in text:
        if ch == "(" and depth == 0:
            break
        if ch == "<":
            if depth == 0:
                out.append("<{}…>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
        if depth:
            inside.append(ch)
    hint = _operation("".join(inside))
    short = ("".join(out).strip() or name.strip()).replace("{}", hint + " " if hint else "", 1).replace("{}", "")
    return short if len(short) <= NAME_CHARS else short[: NAME_CHARS - 1] + "…"


def _operation(arguments: str) -> str:
    """The operation an ATen template kernel runs, from its template arguments: the `*_kernel`
    function whose lambda it instantiates, else the innermost functor (`MulFunctor`), else ''.
    `vectorized_elementwise_kernel` alone does not say whether it adds or takes a sigmoid."""
    kernel = re.search(r"(\w+_kernel\w*)\s*\(", arguments)
    if kernel:
        return kernel.group(1)
    functors = re.findall(r"(\w*Functor\w*)", arguments)
    if functors:
        return functors[-1]
    launch = re.search(r"launch_(\w+)", arguments)
    if launch:
        return launch.group(1)
    single = arguments.strip("<> ")  # one plain name: a library's kernel configuration (CUTLASS)
    return single if re.fullmatch(r"[A-Za-z_]\w*", single) else ""


def unavailable(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason}


@dataclass
class Recording:
    """The stopped profiler of `record` (its events not read yet), or why there is none."""

    profiler: Any = None
    reason: str = ""


def record(forward: Callable[[], object], device: str, calls: int = CALLS) -> Recording:
    """Profile `calls` forwards (after the profiler's warm-up forward) where the caller holds the
    device exclusively: the judge runs it in the hold of its timing, after the timing and the
    energy window, so tracing is never enabled while they measure. Reading the events (`read`)
    takes longer than recording them: do it after the hold."""
    if not str(device).startswith("cuda"):
        return Recording(reason="evaluated on the CPU: there is no GPU kernel timeline (Triton runs in the "
                                "interpreter), so no per-kernel times")
    try:
        prof = prepared_profiler(use_cuda=True)  # tracing enabled from here: after the timing and the energy window
        return Recording(profiler=trace_forwards(prof, forward, calls, use_cuda=True))
    except Exception as exc:  # noqa: BLE001 - the candidate ran fine when timed; a profiler failure is ours
        return Recording(reason=f"the kernel timeline could not be recorded: {type(exc).__name__}: {exc}")


def read(recording: Recording) -> dict[str, Any]:
    """The verdict's record of a `record`ing: per-call kernel times and shares, or why not."""
    if recording.profiler is None:
        return unavailable(recording.reason or "no kernel timeline was recorded")
    try:
        summary = summarize_timeline(timeline_events(recording.profiler), skip=PROFILER_WARMUP_CALLS, top=10_000)
    except Exception as exc:  # noqa: BLE001
        return unavailable(f"the kernel timeline could not be read: {type(exc).__name__}: {exc}")
    return from_summary(summary)


def from_summary(summary) -> dict[str, Any]:
    """The verdict record of a torchprof.TimelineSummary (per-call kernel times and shares)."""
    total = summary.kernel_us_per_call
    if not summary.calls or total <= 0:
        return unavailable("the forward launched no GPU kernel the profiler could see")
    kernels = [{"name": short_kernel_name(k["name"]), "us_per_call": round(k["total_us"], 3),
                "launches_per_call": round(k["count"], 2), "share": round(k["total_us"] / total, 4)}
               for k in summary.top_kernels]
    shown, rest = kernels[:TOP], kernels[TOP:]
    if rest:
        shown.append({"name": f"{len(rest)} other kernels", "us_per_call": round(sum(k["us_per_call"] for k in rest), 3),
                      "launches_per_call": round(sum(k["launches_per_call"] for k in rest), 2),
                      "share": round(sum(k["share"] for k in rest), 4)})
    return {"available": True, "method": f"torch.profiler, {summary.calls} forwards after the timing",
            "kernels_per_call": round(summary.kernels_per_call, 2),
            "kernel_us_per_call": round(total, 3), "busy_us_per_call": round(summary.busy_us_per_call, 3),
            "wall_us_per_call": round(summary.wall_us_per_call, 3),
            "idle_fraction": round(summary.idle_fraction, 4), "kernels": shown}
