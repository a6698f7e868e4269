"""A line on stderr when long work has printed nothing for a while: what it is doing, for how long.

Judging one instance under the Triton interpreter on a busy CPU, measuring baselines or waiting
for an LLM can take minutes without a progress line; a person (or a log) must still see that the
command is alive. `Heartbeat` runs a daemon thread that waits on an event (never a sleep loop)
and, when nothing was printed for `every` seconds ($KW_HEARTBEAT_S, default 30), prints

    [3:12] still judging instance 4 of 6: 1:05 so far

built from what the command says it is doing (`doing(text)`; the clock of that activity starts
when its text changes) and the command's own clock (the time since it started, or a run's active
time as its last snapshot said, `seen(elapsed_s)`, running on from there). Every progress line
printed through `printed()` resets the wait, so a command that reports often never hears the
heartbeat.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from kernelwright import envvars

DEFAULT_EVERY_S = 30.0


def interval() -> float:
    """Seconds of silence before a heartbeat line: $KW_HEARTBEAT_S, else 30 (a bad value: 30)."""
    try:
        value = float(envvars.get("KW_HEARTBEAT_S") or DEFAULT_EVERY_S)
    except ValueError:
        return DEFAULT_EVERY_S
    return value if value > 0 else DEFAULT_EVERY_S


def clock_text(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class Heartbeat:
    """`with Heartbeat(say) as beat:` ... `beat.doing("judging t3")` ... `beat.printed()`."""

    def __init__(self, say: Callable[[str], None], every: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.say, self.every, self.clock = say, every or interval(), clock
        self.started = clock()
        self.base, self.base_at = 0.0, self.started  # the command's clock: `base` seconds at `base_at`
        self.activity, self.since = "working", self.started
        self.last = self.started  # when the command last printed anything
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        self.beats = 0

    def doing(self, text: str) -> None:
        """What the command does now; its clock restarts when the text changes."""
        with self.lock:
            if text != self.activity:
                self.activity, self.since = text, self.clock()

    def seen(self, elapsed_s: float) -> None:
        """The command's own clock read `elapsed_s` now (a run's active time, resumed runs included)."""
        with self.lock:
            self.base, self.base_at = elapsed_s, self.clock()

    def elapsed(self) -> float:
        return self.base + self.clock() - self.base_at

    def printed(self) -> None:
        """The command printed a line of its own: the silence starts again."""
        with self.lock:
            self.last = self.clock()

    def line(self) -> str:
        with self.lock:
            now = self.clock()
            return (f"[{clock_text(self.base + now - self.base_at)}] still {self.activity}: "
                    f"{clock_text(now - self.since)} so far")

    def due(self) -> float:
        """Seconds until the next heartbeat line is due (0 or less: now)."""
        with self.lock:
            return self.last + self.every - self.clock()

    def beat(self) -> None:
        """Say the heartbeat line now."""
        self.say(self.line())
        self.beats += 1
        self.printed()

    def _run(self) -> None:
        while not self.stopped.is_set():
            wait = self.due()
            if wait > 0:
                self.stopped.wait(wait)
            else:
                self.beat()

    def __enter__(self) -> "Heartbeat":
        self.thread = threading.Thread(target=self._run, name="kw-heartbeat", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout=5)


def run_activity(snapshot: dict) -> str:
    """What a run is doing, from its progress snapshot: the autotune driver says it (`activity`);
    an agents' run says what it waits for (`waiting_on`: LLM answers, evaluations)."""
    if snapshot.get("activity"):
        return str(snapshot["activity"])
    waiting = snapshot.get("waiting_on") or {}
    parts = []
    if waiting.get("llm"):
        parts.append(f"{waiting['llm']} LLM answer(s)")
    if waiting.get("judge"):
        parts.append(f"{waiting['judge']} evaluation(s) by the judge")
    return "waiting for " + " and ".join(parts) if parts else "working"
