"""Stage 5, profile (when `config.profile`): kernelwright.profile's report of a passing candidate,
with the device held exclusively."""
from __future__ import annotations

from .context import Context
from .records import Checked


def run(ctx: Context, checked: Checked) -> None:
    from ...profiling import profile_report  # noqa: PLC0415 -- judge.profiling imports baseline, compile and env, optional to the checker (main.optional_module): loaded only when a profile is asked for

    loaded = checked.loaded
    ctx.writer.stage(ctx.verdict, "profile")
    with ctx.timer("profile"), ctx.on_device(loaded.lock, "exclusive"):
        ctx.verdict.profile = profile_report(ctx.problem_path, ctx.candidate_path, ctx.verdict, ctx.config,
                                             loaded.device)
