"""What a tuning step cost: evaluations, and the seconds they took on the device and in the judge.

Every measurement carries its own cost (`Measurement.device_s`, `judge_s`), so a cached record
says what it saved. A step's cost sums the measurements it made fresh; cache hits count as
evaluations (the budget unit) but cost nothing.

- device seconds: the judge's wall seconds in the stages that run the kernels (reference, check,
  guards, time, energy, profile, baselines); on a machine without a GPU they ran on the CPU, and
  the label says "CPU-seconds";
- judge seconds: wall seconds of the judging processes (imports and compilation included);
- wall seconds: the whole step, start to end, as the caller waited for it;
- judge evaluations (`judge_runs`): judge processes run. Without sweeps one per configuration
  measured; with a sweep (tune/sweep_eval.py) one for the sweep of many configurations and one per
  full judgement of its winner, which is what `tune(max_runs=...)` spends.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

DEVICE_STAGES = ("reference", "check", "guards", "time", "energy", "profile", "baselines")


@dataclass
class TuneCost:
    evaluations: int = 0  # configurations evaluated (the budget unit): measured + cached
    measured: int = 0  # judged (or timed) now
    judge_runs: int = 0  # judge evaluations run for them (a sweep of many configurations counts one)
    cached: int = 0  # answered by the tuning cache, nothing run
    pruned_before: int = 0  # configurations the constraints removed: never compiled
    pruned_after: int = 0  # compiled, then pruned on the compiler's report (spills, shared memory)
    device: str = ""  # the device the instances ran on ("cpu" without a GPU)
    device_s: float = 0.0
    judge_s: float = 0.0
    wall_s: float = 0.0
    saved_s: float = 0.0  # judge seconds the cache hits cost when they were measured

    @property
    def on_gpu(self) -> bool:
        return bool(self.device) and self.device not in ("cpu", "table")

    @property
    def device_label(self) -> str:
        return "GPU-seconds" if self.on_gpu else "CPU-seconds"

    def summary(self) -> str:
        """One line, e.g. '12 evaluations (9 measured, 3 cached), 4.1 GPU-seconds on H100, judge 96 s, wall 61 s'."""
        where = f" on {self.device}" if self.device else ""
        runs = f", {self.judge_runs} judge evaluation(s)" if self.judge_runs != self.measured else ""
        text = (f"{self.evaluations} evaluation(s) ({self.measured} measured, {self.cached} cached{runs}), "
                f"{self.device_s:.1f} {self.device_label}{where}, judge {self.judge_s:.0f} s, wall {self.wall_s:.0f} s")
        if self.cached:
            text += f"; the cache saved {self.saved_s:.0f} judge s"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "device_label": self.device_label}

    def add(self, other: "TuneCost") -> "TuneCost":
        """The cost of two steps one after the other."""
        return TuneCost(
            evaluations=self.evaluations + other.evaluations, measured=self.measured + other.measured,
            judge_runs=self.judge_runs + other.judge_runs,
            cached=self.cached + other.cached, pruned_before=self.pruned_before + other.pruned_before,
            pruned_after=self.pruned_after + other.pruned_after, device=self.device or other.device,
            device_s=self.device_s + other.device_s, judge_s=self.judge_s + other.judge_s,
            wall_s=self.wall_s + other.wall_s, saved_s=self.saved_s + other.saved_s,
        )


def verdict_seconds(verdict) -> tuple[float, float]:
    """(device seconds, judge seconds) of one judge verdict."""
    stages = getattr(verdict, "stage_seconds", None) or {}
    device = sum(float(v) for k, v in stages.items() if k in DEVICE_STAGES)
    process = getattr(verdict, "process", None)
    judge = float(process.wall_s) if process is not None and process.wall_s else sum(float(v) for v in stages.values())
    return device, judge


def step_cost(measurements: list, *, device: str, wall_s: float, pruned_before: int = 0) -> TuneCost:
    """The cost of the measurements of one step (fresh ones cost their seconds, cached ones none)."""
    cost = TuneCost(device=device, wall_s=wall_s, pruned_before=pruned_before)
    for m in measurements:
        cost.evaluations += 1
        if m.status == "pruned":
            cost.pruned_after += 1
        if m.cached:
            cost.cached += 1
            cost.saved_s += m.judge_s
        else:
            cost.measured += 1
            cost.judge_runs += int(getattr(m, "runs", 1))
            cost.device_s += m.device_s
            cost.judge_s += m.judge_s
    return cost
