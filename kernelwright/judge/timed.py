"""One timing protocol for a candidate and for its baselines: what is called, on which inputs, and
how often it is measured. Both `stages.time` (the candidate, in the worker) and
`baseline.time_baseline` (the reference, in its own process) go through `time_model`, so a
speedup compares one method with itself:

- the inputs: `timing_inputs` (the judge's seed, the "given" variant, made on the device);
- the call: `model_call`, a forward under `torch.no_grad()`, or one forward plus one backward
  (`grad.GradRunner.timed_call`) where the backward pass is part of the work;
- the measurement: `steady_measure`, repeats of `timing.measure` (each with the device held
  exclusively) until two are *tight* (inter-quartile range at most NOISY_IQR_SHARE of the median)
  and *agree* (medians within REPEAT_AGREEMENT); the lower of those two is the time. After
  MAX_REPEATS repeats without such a pair the fastest is kept and marked noisy.

The device is taken once for consecutive repeats and given back only for the pause before a third
or fourth repeat (other judges' work may run then; no repeat is ever timed without the lock), and
`then` (the energy window) runs in the hold of the last repeat: a steady candidate takes the lock
once, not once per repeat and once more for its energy. Each taking of the exclusive lock waits
for every shared holder (other workers' trials) to finish its section, so takings cost throughput
beyond the seconds held.

Before this module the candidate was timed by one `timing.measure` while its baselines took the
lower of two agreeing repeats, and the two calls were built by separate code (issue 14).
"""
from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

from .config import JudgeConfig
from .verdict import REJECT, Flag, TimingStats

NOISY_IQR_SHARE = 0.20
REPEAT_AGREEMENT = 0.10
MAX_REPEATS = 4
REPEAT_PAUSE_S = 0.2  # between repeats that have not agreed yet: a short disturbance can pass
RULE = (f"two repeats with IQR <= {NOISY_IQR_SHARE:.0%} of the median whose medians agree within "
        f"{REPEAT_AGREEMENT:.0%}; at most {MAX_REPEATS} repeats")


@dataclass
class Timed:
    """A steady measurement: the picked repeat, every repeat as [median, iqr, n], and flags."""

    stats: TimingStats
    repeats: list[list[float]]
    steady: bool
    flags: list[Flag] = field(default_factory=list)


def timing_inputs(problem, config: JudgeConfig, device: str) -> list:
    """The inputs a candidate and its baselines are timed on."""
    from .check import make_inputs  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

    return make_inputs(problem, config.seed, "given", device)


class TimedCall:
    """A timed call whose inputs can be written anew before each timing (`refill`): the timer
    flushes the L2 cache, then refills, then starts its clock, as the checker does for a candidate
    (it writes every call's inputs right before starting its clock), so a baseline and a candidate
    find the same things in the cache."""

    def __init__(self, call: Callable[[], object], inputs: list):
        import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

        self.call = call
        self.buffers = [x for x in inputs if isinstance(x, torch.Tensor)]
        self.pristine = [x.detach().clone() for x in self.buffers]

    def refill(self) -> None:
        import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

        with torch.no_grad():
            for buffer, value in zip(self.buffers, self.pristine, strict=True):
                buffer.copy_(value)

    def __call__(self):
        return self.call()


def model_call(model, inputs: list, runner, seed: int) -> TimedCall:
    """The timed call: forward under no_grad, or forward + backward when `runner` (a GradRunner)
    says the backward pass is part of the work. Building the backward call runs one forward."""
    if runner is not None:
        return TimedCall(runner.timed_call(model, inputs, seed), inputs)
    import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

    def call():
        with torch.no_grad():
            return model(*inputs)

    return TimedCall(call, inputs)


def time_model(call: Callable[[], object], config: JudgeConfig, device: str, measure,
               hold: Callable[[], ContextManager] | None = None, sleep=time.sleep,
               then: Callable[[], object] | None = None) -> Timed:
    """`call` timed by the repeat rule; each repeat is one `measure(call, config, device)` (the
    timing module's) inside `hold()` (the device's exclusive lock), held across consecutive repeats
    and released only for the pause before a later one; `then()` runs after the last repeat in
    the same hold."""
    found_by: list[tuple[TimingStats, list[Flag]]] = []
    held = Held(hold)

    def once() -> TimingStats:
        held.take()
        stats, found = measure(call, config, device)
        found_by.append((stats, list(found)))
        return stats

    def pause(seconds: float) -> None:
        held.release()  # no idle device held through the pause
        sleep(seconds)

    with held:
        stats, repeats, steady = steady_measure(once, sleep=pause)
        if then is not None:
            held.take()
            then()
    # the picked repeat's flags, and a rejection seen in any repeat (work escaping the timed stream)
    flags = [f for s, found in found_by for f in found if s is stats or f.severity == REJECT]
    unique = {(f.code, f.message): f for f in flags}
    return Timed(stats, repeats, steady, list(unique.values()))


class Held:
    """`hold()` (a context manager factory, e.g. the device's exclusive lock) entered on `take()`
    unless already held, left on `release()` and when this object's `with` block ends."""

    def __init__(self, hold: Callable[[], ContextManager] | None):
        self.hold = hold or contextlib.nullcontext
        self._stack: contextlib.ExitStack | None = None

    def take(self) -> None:
        if self._stack is None:
            stack = contextlib.ExitStack()
            stack.enter_context(self.hold())
            self._stack = stack

    def release(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()

    def __enter__(self) -> "Held":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _tight(stats: TimingStats) -> bool:
    return stats.median_ms > 0 and stats.iqr_ms <= NOISY_IQR_SHARE * stats.median_ms


def steady_pick(repeats: list[TimingStats]) -> TimingStats | None:
    """The lower of the two closest tight repeats when their medians agree (the rule above)."""
    tight = sorted((r for r in repeats if _tight(r)), key=lambda r: r.median_ms)
    for low, high in itertools.pairwise(tight):
        if high.median_ms - low.median_ms <= REPEAT_AGREEMENT * low.median_ms:
            return low
    return None


def steady_measure(measure_once: Callable[[], TimingStats], sleep=time.sleep
                   ) -> tuple[TimingStats, list[list[float]], bool]:
    """(time, [[median, iqr, n] per repeat], steady) by the repeat rule."""
    repeats: list[TimingStats] = []
    for index in range(MAX_REPEATS):
        if index >= 2:
            sleep(REPEAT_PAUSE_S)
        repeats.append(measure_once())
        picked = steady_pick(repeats) if len(repeats) >= 2 else None
        if picked is not None:
            return picked, _summary(repeats), True
    fastest = min(repeats, key=lambda r: r.median_ms)
    medians = ", ".join(f"{r.median_ms:.4g}" for r in repeats)
    fastest.note = (fastest.note + "; " if fastest.note else "") + f"noisy: {len(repeats)} repeats never agreed ({medians} ms)"
    return fastest, _summary(repeats), False


def _summary(repeats: list[TimingStats]) -> list[list[float]]:
    return [[r.median_ms, r.iqr_ms, r.n] for r in repeats]


def describe(timed: Timed) -> dict[str, Any]:
    """What a verdict records of a candidate's measurement (as baselines record theirs)."""
    return {"repeats": timed.repeats, "steady": timed.steady, "rule": RULE}
