"""Verdicts, profiles and baselines as a model should read them: the decisive fields, errors
trimmed (head and tail kept), no environment dumps. Plain dicts of JSON values.

The full verdict stays available where it is stored (a run's database); a tool answer carries what
an agent needs to decide its next edit: did it pass, why not (with the candidate's line), which
guard fired, how fast against eager and torch.compile, how close to the speed-of-light floor.
"""
from __future__ import annotations

from typing import Any

ERROR_CHARS = 1500  # one error paragraph
MESSAGE_CHARS = 300  # a flag's or a trial's message
FAILED_TRIALS = 3  # failing trials shown
COMPILE_ERRORS = 5


def trim(value: str | None, limit: int) -> str | None:
    """`value` within `limit` characters: its head and (longer) tail, with what was cut said."""
    if value is None or len(value) <= limit:
        return value
    head = limit // 3
    tail = limit - head
    return f"{value[:head]} … [{len(value) - limit} characters cut] … {value[-tail:]}"


def _round(value: Any, digits: int = 4) -> Any:
    return float(f"{value:.{digits}g}") if isinstance(value, float) else value


def _timing(stats: dict | None) -> dict | None:
    if not stats:
        return None
    out = {k: _round(stats.get(k)) for k in ("median_ms", "iqr_ms", "min_ms")}
    out.update(n=stats.get("n"), method=stats.get("method"))
    if stats.get("note"):
        out["note"] = stats["note"]
    return out


def _compile(data: dict | None) -> dict | None:
    if not data:
        return None
    out = {"ok": data.get("ok"), "backend": data.get("backend"), "seconds": _round(data.get("seconds")),
           "cached": data.get("cached")}
    if not data.get("ok"):
        out["errors"] = [trim(e, ERROR_CHARS) for e in (data.get("errors") or [])[:COMPILE_ERRORS]]
        if not out["errors"]:
            out["log"] = trim(data.get("log") or "", ERROR_CHARS)
    return out


def _trials(trials: list[dict]) -> dict:
    failed = [t for t in trials if not t.get("ok")]
    shown = []
    for t in failed[:FAILED_TRIALS]:
        entry = {k: t.get(k) for k in ("trial", "variant", "shape_ok", "dtype_ok", "nonfinite")}
        entry.update(max_abs_err=_round(t.get("max_abs_err")), rel_l2_err=_round(t.get("rel_l2_err")),
                     message=trim(t.get("message") or "", MESSAGE_CHARS))
        shown.append(entry)
    worst = max((t.get("rel_l2_err") or 0.0 for t in trials), default=None)
    return {"passed": len(trials) - len(failed), "total": len(trials), "failed": shown,
            "worst_rel_l2_err": _round(worst) if trials else None}


def _floor(data: dict | None) -> dict | None:
    if not data:
        return None
    return {"floor_ms": _round(data.get("floor_ms")), "bound": data.get("bound"),
            "pct_of_floor": _round(data.get("pct_of_floor"), 3), "peak_source": data.get("peak_source")}


def _baselines(data: dict | None) -> dict | None:
    if not data:
        return None
    out = {kind: _timing(data.get(kind)) for kind in ("eager", "compile_default", "compile_max_autotune")
           if data.get(kind)}
    if data.get("errors"):
        out["errors"] = {k: trim(v, MESSAGE_CHARS) for k, v in data["errors"].items()}
    out["cached"] = data.get("cached")
    return out


def verdict_summary(verdict: dict[str, Any]) -> dict[str, Any]:
    """The model-facing summary of `Verdict.to_dict()`."""
    process = verdict.get("process") or {}
    energy = verdict.get("energy") or {}
    return {
        "status": verdict.get("status"),
        "passed": verdict.get("status") == "pass",
        "stage": verdict.get("stage"),
        "error": trim(verdict.get("error"), ERROR_CHARS),
        "compile": _compile(verdict.get("compile")),
        "trials": _trials(verdict.get("trials") or []),
        "flags": [{"code": f.get("code"), "severity": f.get("severity"),
                   "message": trim(f.get("message"), MESSAGE_CHARS)} for f in verdict.get("flags") or []],
        "timing": _timing(verdict.get("timing")),
        "baselines": _baselines(verdict.get("baselines")),
        "speedup": {k: _round(v) for k, v in (verdict.get("speedup") or {}).items()},
        "floor": _floor(verdict.get("floor")),
        "energy_j_per_call": _round(energy.get("joules_per_call")) if energy.get("available") else None,
        "device": verdict.get("device"),
        "sizes": verdict.get("overrides") or {},
        "shrunk": verdict.get("shrunk"),
        "wall_s": _round(process.get("wall_s")),
        "network_isolated": process.get("network_isolated"),
    }


def profile_summary(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """Class, findings and per-kernel shares of `ProfileReport.to_dict()`."""
    if report is None:
        return None
    kernels = [{"name": trim(k.get("name"), 200), "share": _round(k.get("share"), 3), "launches": k.get("launches"),
                "time_us": _round(k.get("time_us")), "bottleneck": k.get("bottleneck"),
                "reason": trim(k.get("reason"), MESSAGE_CHARS), "confident": k.get("confident")}
               for k in report.get("kernels") or []]
    findings = [{"text": trim(f.get("text"), 600), "tags": f.get("tags") or [], "kind": f.get("kind"),
                 "kernel": f.get("kernel") or None} for f in report.get("findings") or []]
    return {
        "status": report.get("status"),
        "device": report.get("device"),
        "bottleneck": report.get("bottleneck"),
        "kernels": kernels,
        "findings": findings,
        "plain_ms_per_call": _round(report.get("plain_ms_per_call")),
        "notes": [trim(n, MESSAGE_CHARS) for n in report.get("notes") or []][:10],
        "profile_seconds": _round((report.get("overhead_s") or {}).get("total")),
    }


def baselines_summary(data: dict[str, Any]) -> dict[str, Any]:
    """A `jobs.baseline` answer: device, sizes, one timing per baseline kind, errors."""
    out = {"device": data.get("device"), "sizes": data.get("sizes") or {}, "shrunk": data.get("shrunk")}
    out.update(_baselines(data.get("baselines")) or {})
    return out
