"""The verdict's status from what the stages found: every trial passed and no reject flag, else
fail with a one-paragraph summary; judge notes become info flags at the end."""
from __future__ import annotations

import sys

from ...verdict import FAIL, INFO, PASS, PEAK_KEY, Flag, Verdict
from .context import Context


def finalize(ctx: Context, final: bool = True) -> None:
    verdict = ctx.verdict
    verdict.stage_seconds.update(ctx.timer.rounded())
    verdict.device_lock = ctx.lock_use.to_dict() or None
    record_gpu_peak(verdict, getattr(ctx.runner, "last_report", None) or {})
    if not ctx.stopped:
        trials_ok = len(verdict.trials) >= ctx.config.trials and all(t.ok for t in verdict.trials)
        verdict.status = PASS if trials_ok and not verdict.reject_flags() else FAIL
        verdict.error = None if verdict.status == PASS else summarize_failure(verdict)
        if final:
            verdict.stage = "done"
    for note in ctx.notes if final else []:
        ctx.flag(Flag("judge_note", INFO, note))


def record_gpu_peak(verdict: Verdict, runner_report: dict) -> None:
    """The most GPU memory the caching allocators of this process and of the runner held (the
    pool's admission estimate; the runner's as it reported it at its end)."""
    torch = sys.modules.get("torch")
    mine = 0
    if torch is not None and torch.cuda.is_initialized():
        try:
            mine = int(torch.cuda.max_memory_reserved())
        except Exception:  # noqa: BLE001 - a broken CUDA context: no measurement, nothing else lost
            mine = 0
    theirs = int(runner_report.get("gpu_peak_bytes") or 0)
    if mine or theirs:
        verdict.environment[PEAK_KEY] = mine + theirs


def summarize_failure(verdict: Verdict) -> str:
    parts = []
    failed = [t for t in verdict.trials if not t.ok]
    if failed:
        t = failed[0]
        parts.append(f"{len(failed)} of {len(verdict.trials)} trials failed; trial {t.trial} "
                     f"(seed {t.seed}, {t.variant} inputs): {t.message}")
    parts += [f"[{f.code}] {f.message}" for f in verdict.reject_flags()]
    return "; ".join(parts) or "the candidate did not pass"
