"""The typed results the stages hand to each other. Each holds the one before it, so a stage cannot
be called without what its defences rely on having happened first:

    Loaded   every trial's reference output, computed (or read from the reference store) in the
             checker before the runner is asked to load anything; the device and its lock; the
             reference's work
    Built    the runner has imported the candidate (its extensions built or found) and built
             ModelNew; the link to it
    Checked  every trial called and compared, the runner's record of the trials taken, the work
             rules judged; a Checked candidate is timed only when the verdict so far passes
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch-side types, for readers and checkers only
    from ....problem import Problem
    from ...check import TrialCase
    from ...gpulock import DeviceLock, NoLock
    from ...grad import GradRunner
    from ..link import RunnerLink


@dataclass
class Loaded:
    """stages.load: the problem, and everything computed from it in the checker."""

    problem: Problem
    device: str
    lock: DeviceLock | NoLock | None
    cases: list[TrialCase]  # one per trial, with the reference's outputs
    refill: TrialCase  # trial 0's variant with other values: the output-cache guard
    ref_mutates: list[int]  # inputs the reference writes in place
    ref_ops: dict[str, int]  # the reference's ATen ops (its backward's too, when that is the work)
    backward: GradRunner | None = None  # the backward pass is part of the work


@dataclass
class Built:
    """stages.compile: the candidate imported in the runner and ModelNew built there."""

    loaded: Loaded
    link: RunnerLink
    libraries: list[str] = field(default_factory=list)  # the extension libraries the runner built or loaded


@dataclass
class Checked:
    """stages.check: every trial ran and was compared, the work was judged."""

    built: Built
    buckets: dict[str, dict[str, int]]  # recorded torch ops by origin (python, extension)
    observed: dict[str, Any] = field(default_factory=dict)  # the runner's record of the trials

    @property
    def loaded(self) -> Loaded:
        return self.built.loaded
