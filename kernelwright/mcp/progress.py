"""Long calls report progress: blocking work runs in a worker thread while the event loop sends a
progress notification every `interval` seconds (elapsed seconds as the progress value, which only
grows, and a message saying what the work is doing now).

The server stays responsive meanwhile (other requests, e.g. `optimize_status`, are answered), and
a client that did not ask for progress gets no notifications (the SDK drops them). For the judge,
the message is the stage its sandboxed worker reports in its progress file, read with the judge's
own reader (`judge.api.StageClock`).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable

import anyio
import anyio.to_thread

from kernelwright.judge.api import StageClock

log = logging.getLogger(__name__)
INTERVAL_S = 1.0


async def run_blocking(ctx: Any, work: Callable[[], Any], describe: Callable[[], str], *,
                       limiter: anyio.CapacityLimiter | None = None, interval: float = INTERVAL_S) -> Any:
    """`work()` in a thread; progress notifications through `ctx` (an MCP Context, or None)."""
    progress = Progress(ctx)
    result: dict[str, Any] = {}

    async def beat() -> None:
        while True:
            await anyio.sleep(interval)
            try:
                message = describe()
            except Exception:  # noqa: BLE001 - a status line must never stop the work
                message = "working"
            await progress.report(message)

    async with anyio.create_task_group() as group:
        group.start_soon(beat)
        try:
            result["value"] = await anyio.to_thread.run_sync(work, limiter=limiter)
        except Exception as exc:  # noqa: BLE001 - raised again below, outside the task group
            result["error"] = exc
        finally:
            group.cancel_scope.cancel()
    if "error" in result:
        raise result["error"]
    await progress.report("done")
    return result["value"]


class Progress:
    """Progress notifications of one request: elapsed seconds, strictly increasing as the protocol
    asks, with a message; a closed or progress-less session is not an error."""

    def __init__(self, ctx: Any):
        self.ctx, self.start, self.last = ctx, time.monotonic(), 0.0

    async def report(self, message: str) -> None:
        if self.ctx is None:
            return
        elapsed = time.monotonic() - self.start
        value = max(round(elapsed, 1), round(self.last + 0.1, 1))
        self.last = value
        try:
            await self.ctx.report_progress(value, None, f"{message} ({elapsed:.0f} s)")
        except Exception as exc:  # noqa: BLE001 - progress is best effort; the work goes on
            log.debug("progress notification not sent: %s", exc)


class JudgeStages:
    """What a judge worker under `scratch_root` is doing, from its progress file."""

    def __init__(self, scratch_root: Path, config):
        self.root, self.config = scratch_root, config
        self.clock = None

    def __call__(self) -> str:
        if self.clock is None:
            found = sorted(self.root.glob("kw-judge-*/progress"))
            if not found:
                return "judge: starting the sandboxed worker"

            self.clock = StageClock(found[0], self.config)
        self.clock.refresh()
        if self.clock.waiting:
            return f"judge: waiting for the device ({self.clock.stage} stage)"
        trial = f", trial {self.clock.trial}" if self.clock.trial else ""
        return f"judge: {self.clock.stage} stage{trial}"
