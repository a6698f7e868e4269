"""Where a judgement's time goes: wall seconds per stage, for `Verdict.stage_seconds`.

A candidate judged in 41 s tells nothing; "imports 4 s, reference 12 s, check 20 s" says what to
make faster. Stages nest (a guard inside a trial, a lock wait inside timing); each second is
counted once, in the innermost stage running at the time.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

_perf_counter = time.perf_counter  # captured before candidate code can replace it


class StageTimer:
    """Wall seconds per stage, each second counted once: time spent in a nested stage (a guard
    inside a trial, a lock wait inside timing) is the nested stage's, not its parent's."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._stack: list[list] = []  # [stage, started]

    @contextlib.contextmanager
    def __call__(self, stage: str):
        now = _perf_counter()
        if self._stack:
            self._add(self._stack[-1][0], now - self._stack[-1][1])
        self._stack.append([stage, now])
        try:
            yield
        finally:
            now = _perf_counter()
            name, started = self._stack.pop()
            self._add(name, now - started)
            if self._stack:
                self._stack[-1][1] = now

    def _add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.seconds.items()}


@dataclass
class LockUse:
    """How often, and how long, this process held the device lock, per kind ("shared": correctness
    work, "exclusive": timing, energy, kernel times, profile); the waits are stage "wait_gpu".
    The exclusive seconds are the device time no other judge could use: summed over a batch, they
    bound its throughput (`Verdict.device_lock`)."""

    holds: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    let_go: dict[str, int] = field(default_factory=dict)  # times a hold was given up for a while (jitpause)
    let_go_s: dict[str, float] = field(default_factory=dict)  # seconds of those, not in `seconds`

    @contextlib.contextmanager
    def held(self, kind: str):
        started = _perf_counter()
        try:
            yield
        finally:
            self.holds[kind] = self.holds.get(kind, 0) + 1
            self.seconds[kind] = self.seconds.get(kind, 0.0) + _perf_counter() - started

    def gave_up(self, kind: str, seconds: float) -> None:
        """A hold of `kind` was given up for `seconds` (and taken again) inside one `held`."""
        self.let_go[kind] = self.let_go.get(kind, 0) + 1
        self.let_go_s[kind] = self.let_go_s.get(kind, 0.0) + seconds
        self.seconds[kind] = self.seconds.get(kind, 0.0) - seconds

    def to_dict(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for kind in sorted(self.holds):
            out[kind] = {"holds": self.holds[kind], "held_s": round(self.seconds[kind], 3)}
            if self.let_go.get(kind):
                out[kind].update(let_go=self.let_go[kind], let_go_s=round(self.let_go_s[kind], 3))
        return out


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc), i.e. interpreter start-up before main()."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22 of stat: starttime, in clock ticks since boot
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None
