"""The numbers of a judge Verdict that prompts quote, condensed into plain JSON-safe values.

`EvalResult.from_verdict` calls `verdict_facts` for everything beyond status and speedups: timing
spread, the speed-of-light floor, the per-kernel time split, the profile's class and hot kernels,
and the correctness margin. Fields a verdict lacks (an older judge, a CPU run, a failed profile)
are simply absent; readers degrade to what is there.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

FLOOR_KEYS = ("floor_ms", "pct_of_floor", "bound", "peak_kind", "peak_source", "peak_gbps", "peak_tflops",
              "bytes", "flops")
PROFILE_KERNELS = 4
NUMBER_KEYS = ("dram_pct", "mem_pct", "sm_pct", "tensor_pct", "achieved_occupancy_pct", "waves", "registers")


def verdict_facts(verdict, profile: dict) -> dict[str, Any]:
    """Keyword arguments for EvalResult beyond the basic ones (see the module docstring)."""
    timing = verdict.timing
    floor = dataclasses.asdict(verdict.floor) if verdict.floor is not None else {}
    return {
        "iqr_ms": timing.iqr_ms if timing else None,
        "timed_calls": timing.n if timing else None,
        "timing_note": (timing.note or "") if timing else "",
        "l2_flushed": bool(timing.l2_flushed) if timing else False,
        "floor": {k: floor[k] for k in FLOOR_KEYS if floor.get(k) not in (None, "")},
        "kernels": dict(getattr(verdict, "kernels", None) or {}),
        "profile": profile_facts(profile),
        "margin": error_margin(verdict),
        "shrunk": bool(verdict.shrunk),
    }


def profile_facts(profile: dict) -> dict[str, Any]:
    """The profile's overall class, its hot kernels with their class and key counters, and its
    notices (what could not be measured); {} when the verdict has no profile."""
    if not isinstance(profile, dict) or not profile:
        return {}
    kernels = []
    for item in (profile.get("kernels") or [])[:PROFILE_KERNELS]:
        if not isinstance(item, dict) or not item.get("name"):
            continue
        numbers = item.get("numbers") or {}
        kernels.append({"name": item["name"], "share": item.get("share"), "time_us": item.get("time_us"),
                        "launches": item.get("launches"), "bottleneck": item.get("bottleneck", ""),
                        "reason": item.get("reason", ""),
                        "numbers": {k: numbers[k] for k in NUMBER_KEYS if isinstance(numbers.get(k), (int, float))}})
    notices = [f["text"] for f in profile.get("findings") or []
               if isinstance(f, dict) and f.get("kind") == "notice" and f.get("text")]
    return {"status": profile.get("status", ""), "bottleneck": profile.get("bottleneck", ""),
            "device": profile.get("device", ""), "kernels": kernels, "notices": notices}


def error_margin(verdict) -> float | None:
    """The worst measured error over the allowed one (1.0 = at the tolerance) over the trials, as
    the judge reports it (`verdict.precision["margin"]["worst"]`, judge/check.margin); None when the
    verdict has no margin (no trial compared, or a verdict from before margins existed)."""
    return _number(((verdict.precision or {}).get("margin") or {}).get("worst"))


def _number(value: Any) -> float | None:
    if isinstance(value, dict):
        for key in ("worst", "max", "value", "ratio"):
            if key in value:
                return _number(value[key])
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
