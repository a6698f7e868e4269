"""Progress of long calls: notifications while blocking work runs, strictly increasing, ending with
"done"; the work's own exception comes back unchanged; a broken client never stops the work."""
from __future__ import annotations

import threading
import time

import anyio
import pytest

from kernelwright.mcp.progress import Progress, run_blocking


class FakeContext:
    def __init__(self, fail: bool = False):
        self.three = threading.Event()
        self.sent, self.fail = [], fail

    async def report_progress(self, progress, total, message):
        if self.fail:
            raise RuntimeError("session closed")
        self.sent.append((progress, message))
        if len(self.sent) >= 3:
            self.three.set()


def test_notifications_increase_strictly_while_the_work_runs():
    ctx = FakeContext()
    steps = iter(["load", "check", "check", "time"] + ["time"] * 2000)

    def work() -> int:  # runs until three notifications went out (bounded), however slow the machine
        assert ctx.three.wait(60), "fewer than three notifications in 60 s"
        return 42

    value = anyio.run(lambda: run_blocking(ctx, work, lambda: next(steps), interval=0.05))
    assert value == 42
    values = [v for v, _ in ctx.sent]
    assert len(values) >= 4 and all(b > a for a, b in zip(values, values[1:], strict=False))
    assert ctx.sent[0][1].startswith("load") and ctx.sent[-1][1].startswith("done")


def test_reports_in_the_same_tenth_of_a_second_still_increase():
    ctx = FakeContext()

    async def twice():
        progress = Progress(ctx)
        await progress.report("a")
        await progress.report("b")

    anyio.run(twice)
    assert ctx.sent[0][0] < ctx.sent[1][0]


def test_the_works_exception_comes_back_and_a_broken_client_is_ignored():
    def broken():
        time.sleep(0.3)
        raise ValueError("judge bug")

    with pytest.raises(ValueError, match="judge bug"):
        anyio.run(lambda: run_blocking(FakeContext(), broken, lambda: "x", interval=0.1))
    assert anyio.run(lambda: run_blocking(FakeContext(fail=True), lambda: "ok", lambda: 1 / 0, interval=0.05)) == "ok"
