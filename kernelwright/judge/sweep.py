"""A sweep: many instances of one template benchmarked inside one evaluation (issue 33).

A full evaluation of one configuration costs 10-40 s on the H100 (imports, reference, five trials
with their guards, a steady timing, energy, baselines); most of it is the same for every instance
of a template. A sweep is a judge request of its own kind: the problem once, N instances (each a
standalone candidate: the template's source with its `KW_PARAMS` set, made by the tuner), and the
judge's usual three processes. The checker computes the reference of one trial once; the runner
loads the instances one after another (in the same process), and for each the checker

1. scans its source (as the compile stage does), asks the runner to import it and build ModelNew;
2. calls it on one trial's fresh inputs and compares the outputs with the reference (the judge's
   comparison, the rule set's tolerances, the runner's record of the call judged by the rule set);
3. times a passing one with the judge's timed calls (`checker.timed_calls`: fresh inputs every
   call, a random sample of them compared, the clock on the checker's side), in ONE repeat instead
   of the steady rule's two to four (`SweepResult.timing_note` says so).

An instance that fails to build, fails its trial, breaks a rule, crashes or hangs is recorded with
its reason and the sweep goes on; a runner that dies ends the sweep (the configurations not reached
are `not_run`, and the record says why): the caller may send them again in a new sweep.

A sweep's times rank configurations; they are not verdicts. Only a fully judged instance (a
normal evaluation, from scratch) may become a tuner's best: `tune.evaluate.SweepEvaluator` judges
the winner (and the runner-up when the winner fails) that way.

Stdlib only: the records travel inside the verdict (`Verdict.sweep`) as plain data.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# a configuration's status in a sweep
OK = "ok"  # built, its trial passed, timed
BUILD_ERROR = "build_error"  # import, build of ModelNew or (Triton) compile at its first launch failed
FAILED = "failed"  # its trial was wrong or raised, or a timed call raised
REJECTED = "rejected"  # a rule of the rule set, or a timed call checked against the reference, failed
CRASHED = "crashed"  # the runner died during this configuration
TIMED_OUT = "timed_out"  # it did not answer within the sweep's time limit per call
NOT_RUN = "not_run"  # the sweep ended before it (the runner died earlier)
RUNNING = "running"  # in progress when the record was written (a killed evaluation leaves it)
STATUSES = (OK, BUILD_ERROR, FAILED, REJECTED, CRASHED, TIMED_OUT, NOT_RUN, RUNNING)

# under the evaluation's scratch folder, one file per instance: the runner reads them, and cannot
# write there (its only writable folder is its own), so no instance rewrites a later one
INSTANCE_FOLDER = "instances"
TIMING_NOTE = ("one repeat of the judge's timed calls per configuration (a full evaluation takes the lower of two "
               "agreeing repeats of up to four): sweep times rank configurations, they are not verdicts")


# errors CUDA reports after the fact, which leave the process's context unusable: a runner that
# reported one cannot judge the next instance (agents/repairer.py reads the same errors for the model)
_CONTEXT_FAULT = re.compile(
    r"an illegal memory access was encountered|misaligned address|device-side assert triggered|"
    r"unspecified launch failure|an illegal instruction was encountered|"
    r"cudaErrorIllegalAddress|cudaErrorMisalignedAddress|cudaErrorLaunchFailure|cudaErrorAssert",
    re.IGNORECASE)


def breaks_context(reason: str) -> bool:
    """Whether a configuration's failure left its CUDA context broken (the sweep cannot go on there)."""
    return bool(_CONTEXT_FAULT.search(reason or ""))


@dataclass
class SweepInstance:
    """One configuration of a sweep request: its parameters and the instance's source."""

    params: dict[str, Any]
    source: str


@dataclass
class ConfigResult:
    """What the sweep found for one configuration."""

    index: int
    params: dict[str, Any]
    status: str = NOT_RUN
    time_ms: float | None = None  # the median of its timed calls (status ok)
    iqr_ms: float | None = None
    calls: int = 0  # timed calls
    checked: int = 0  # timed calls compared with the reference
    reason: str = ""  # why it was skipped (or how it was timed)
    seconds: float = 0.0  # wall seconds this configuration took in the checker

    @property
    def ok(self) -> bool:
        return self.status == OK and self.time_ms is not None


@dataclass
class SweepResult:
    """The typed record of one sweep: per configuration its params, status, time and reason."""

    configs: list[ConfigResult] = field(default_factory=list)
    method: str = ""  # the clock: cuda_events, wall_cpu, ...
    timing_note: str = TIMING_NOTE
    ended_early: str = ""  # why the sweep stopped before its last configuration ("" when it did not)
    device: str = ""
    seconds: float = 0.0  # the evaluation's wall seconds (set by the caller's side)

    @property
    def ranked(self) -> list[ConfigResult]:
        """The configurations that passed and were timed, fastest first."""
        return sorted((c for c in self.configs if c.ok), key=lambda c: (c.time_ms, c.index))

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for config in self.configs:
            found[config.status] = found.get(config.status, 0) + 1
        return found

    def summary(self) -> str:
        counts = ", ".join(f"{n} {status}" for status, n in sorted(self.counts().items()))
        best = self.ranked[0] if self.ranked else None
        text = f"{len(self.configs)} configurations in one evaluation ({counts})"
        if best is not None:
            text += f"; fastest #{best.index} {best.time_ms:.4g} ms"
        return text + (f"; ended early: {self.ended_early}" if self.ended_early else "")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepResult":
        known = {f.name for f in dataclasses.fields(cls)}
        result = cls(**{k: v for k, v in data.items() if k in known and k != "configs"})
        fields = {f.name for f in dataclasses.fields(ConfigResult)}
        result.configs = [ConfigResult(**{k: v for k, v in c.items() if k in fields}) for c in data.get("configs") or []]
        return result


def instance_path(folder: str | Path, index: int) -> Path:
    """Where instance `index` lies in a folder (the runner's copy, or the checker's own)."""
    return Path(folder) / INSTANCE_FOLDER / f"instance_{index:04d}.py"


def write_instances(folder: str | Path, instances: list[dict[str, Any]]) -> list[Path]:
    """Each instance's source as its own file under `folder` (the supervisor, for the runner)."""
    paths = []
    for index, item in enumerate(instances):
        path = instance_path(folder, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(item.get("source") or ""))
        paths.append(path)
    return paths


def parse_instances(raw: Any) -> list[SweepInstance]:
    """A request's `sweep` list, checked: a clear error for anything else."""
    if not isinstance(raw, list) or not raw:
        raise ValueError("a sweep request carries a non-empty list of instances")
    found = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("source"), str) \
                or not isinstance(item.get("params", {}), dict):
            raise ValueError(f"sweep instance {index} must be {{'params': dict, 'source': str}}")
        found.append(SweepInstance(dict(item.get("params") or {}), item["source"]))
    return found


def sweep_config(config):
    """The judge settings of a sweep: the caller's, with one trial, no baselines, no energy window,
    no profile (they are the full evaluation's, made for the winner)."""
    return dataclasses.replace(config, trials=1, baselines=(), energy_ms=0.0, profile=False, time=True)


def settle(instances: list[SweepInstance], verdict) -> SweepResult:
    """The sweep's record as the evaluation left it, its unfinished configurations named."""
    if verdict.sweep:
        result = SweepResult.from_dict(verdict.sweep)
    else:  # the evaluation never reached the sweep (the problem failed to load, a judge error)
        result = SweepResult(configs=[ConfigResult(i, item.params) for i, item in enumerate(instances)])
        result.ended_early = f"the sweep did not start: {verdict.error or verdict.status}"
    process = verdict.process
    for config in result.configs:
        if config.status == RUNNING:
            timed_out = process is not None and process.timed_out
            config.status = TIMED_OUT if timed_out else CRASHED
            config.reason = verdict.error or "the evaluation ended during this configuration"
            result.ended_early = result.ended_early or (f"the evaluation ended at configuration {config.index}: "
                                                        "the configurations after it were not run")
        elif config.status == NOT_RUN and not config.reason:
            config.reason = result.ended_early or "not reached"
    result.seconds = float(process.wall_s) if process is not None and process.wall_s else 0.0
    return result
