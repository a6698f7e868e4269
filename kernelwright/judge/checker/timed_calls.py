"""The timed calls: each one on inputs nobody has seen before, some of them checked.

Every timed call is a `RunnerLink.call` like a trial's (the runner cannot tell them apart by how
they are made), on inputs drawn from `get_inputs()` under a seed the checker draws from the
operating system's random source for that call alone (never a trial's, never repeated), in the
"given" variant. A random sample of each repeat's calls (`SAMPLE_SHARE`, at least `SAMPLE_MIN`,
chosen before the repeat starts) is compared with the reference run here on the same inputs: a
candidate that computes correctly only when it expects to be checked, or returns what it computed
before, fails (`timed_outputs`).

`measure()` has the signature of `timing.measure` for `timed.time_model`: repeats, the repeat
rule, the exclusive hold and the pause between repeats are the timer's, as for the baselines.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

import torch

from ..check import compare, flatten_outputs, make_inputs
from ..checks import check_flag
from ..verdict import REJECT, Flag, TimingStats

SAMPLE_SHARE = 0.1
# at least this many checked a repeat: the time is a median, so a candidate must be fast (and wrong)
# on half its timed calls to move it, and 5 random checks then catch it with 97% a repeat (99.9%
# over the two a steady timing takes), however few calls `timed_wall_ms` leaves a short kernel
SAMPLE_MIN = 5
TIMED = "timed"


def call_counts(estimate_ms: float, wall_ms: float, config) -> tuple[int, int]:
    """(warm-up calls, timed calls) of one repeat: the timer's counts for a call of `estimate_ms`
    (`warmup_ms`, `rep_ms`, within [`min_reps`, `max_reps`]), bounded by wall time as well: a timed
    call here costs `wall_ms` (fresh inputs, the round trip to the runner, a check now and then),
    often far more than its kernels for a short one, so the calls of a repeat fit
    `config.timed_wall_ms` (the warm-up calls a tenth of it), never fewer than `min_reps`."""
    from .. import timing  # noqa: PLC0415 -- timing is optional to the checker (main.optional_module): a broken one costs the timing, not the verdict

    per_call = max(wall_ms, estimate_ms, 1e-6)
    bound = getattr(config, "timed_wall_ms", 0.0) or 0.0
    warmups, reps = timing.warmup_count(estimate_ms, config), timing.rep_count(estimate_ms, config)
    if bound > 0:
        warmups = min(warmups, max(1, math.ceil(0.1 * bound / per_call)))
        reps = min(reps, max(config.min_reps, math.ceil(bound / per_call)))
    return warmups, reps


class TimedCallFailed(Exception):
    """The candidate raised, or its process died, during a timed call (the message says which)."""


class TooSlowToTime(Exception):
    """The first call says the repeat would take longer than `TimedCalls.budget_ms` (a sweep's limit)."""


@dataclass
class TimedCalls:
    """The timed calls of one candidate (see the module docstring)."""

    link: object  # checker.link.RunnerLink
    loaded: object  # stages.records.Loaded
    config: object  # JudgeConfig
    share: object  # callable(pristine, grad_outputs): the shared buffers shaped for these inputs
    rng: random.Random = field(default_factory=random.SystemRandom)
    reference: object = None
    numbers: list[int] = field(default_factory=list)  # the runner's call numbers that were timed
    checked: int = 0
    mismatches: list[str] = field(default_factory=list)
    budget_ms: float | None = None  # a repeat longer than this is not started (a sweep: judge/sweep.py)

    # ------------------------------------------------------------------ one call

    def one(self, check: bool) -> float:
        """One timed call on fresh inputs (compared with the reference when `check`); its time in ms."""
        loaded = self.loaded
        seed = self.rng.randrange(1 << 20, 1 << 31)
        pristine = make_inputs(loaded.problem, seed, "given", loaded.device)
        grad_outputs = self._grad_outputs(seed)
        self.share(pristine, grad_outputs)
        result = self.link.call(pristine, grad_outputs, phase=TIMED)
        if result.error is not None:
            raise TimedCallFailed(result.error)
        self.numbers.append(result.n)
        if check:
            self._compare(pristine, grad_outputs, result, seed)
        return float(result.ms or 0.0)

    def _grad_outputs(self, seed: int) -> list:
        backward = self.loaded.backward
        if backward is None:
            return []
        template = [o.to(self.loaded.device) for o in self.loaded.cases[0].ref_outputs]
        return list(backward.grad_outputs(template, seed))

    def _compare(self, pristine: list, grad_outputs: list, result, seed: int) -> None:
        self.checked += 1
        loaded = self.loaded
        if self.reference is None:
            self.reference = loaded.problem.make_model(self.config.seed, loaded.device)
        inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in pristine]
        torch.manual_seed(seed)
        if loaded.backward is None:
            with torch.no_grad():
                expected = flatten_outputs(self.reference(*inputs))
            found = compare(result.outputs, [e.detach() for e in expected], self.config, loaded.device)
        else:
            expected_out, grads = loaded.backward.run(self.reference, inputs, seed)
            found = compare(result.outputs, [e.detach() for e in flatten_outputs(expected_out)], self.config,
                            loaded.device)
            for name, grad in grads.items():
                if found.ok and name in result.grads:
                    found = compare([result.grads[name]], [grad.detach()], self.config, loaded.device)
        if not found.ok:
            self.mismatches.append(f"timed call {len(self.numbers)}: {found.message}")

    # ------------------------------------------------------------------ one repeat

    def measure(self, _call=None, config=None, device=None) -> tuple[TimingStats, list[Flag]]:
        """One repeat: an estimate, warm-up calls, then the timed calls with a random sample checked."""
        from .. import timing  # noqa: PLC0415 -- timing is optional to the checker (main.optional_module): a broken one costs the timing, not the verdict

        config = config or self.config
        started = time.perf_counter()
        estimate = self.one(check=False)
        warmups, reps = call_counts(estimate, (time.perf_counter() - started) * 1e3, config)
        if self.budget_ms is not None and estimate * (warmups + reps) > self.budget_ms:
            raise TooSlowToTime(f"one call takes {estimate:.4g} ms: its {warmups + reps} timed calls would take "
                                f"longer than the {self.budget_ms / 1e3:g} s allowed")
        started = time.perf_counter()
        for _ in range(warmups):
            self.one(check=False)
        _, reps = call_counts(estimate, (time.perf_counter() - started) * 1e3 / warmups, config)  # warm calls' wall
        sample = set(self.rng.sample(range(reps), min(reps, max(SAMPLE_MIN, math.ceil(SAMPLE_SHARE * reps)))))
        first = len(self.numbers)
        times = [self.one(check=index in sample) for index in range(reps)]
        if getattr(self.link, "self_time", False):  # no MPS: the runner's own events are the clock
            mine = self.link.runner_times(self.link.report())
            times = [mine.get(n, t) for n, t in zip(self.numbers[first:], times, strict=True)]
        gpu = str(self.loaded.device).startswith("cuda")
        note = "" if gpu else "CPU wall time: not GPU performance"
        stats = timing.summarize(times, self.link.clock, l2_flushed=gpu, note=note)
        return stats, self.flags() + timing.noise_flags(stats)

    def flags(self) -> list[Flag]:
        if not self.mismatches:
            return []
        shown = "; ".join(self.mismatches[:3]) + (f"; and {len(self.mismatches) - 3} more" if len(self.mismatches) > 3
                                                  else "")
        return [check_flag("timed_outputs", REJECT,
                           f"{len(self.mismatches)} of the {self.checked} timed calls checked "
                           f"returned wrong outputs for their inputs ({shown}): every call must compute its own inputs' "
                           "result, whether or not it is checked")]
