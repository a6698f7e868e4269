"""The typed results the stages hand to each other. Each holds the one before it, so a stage cannot
be called without what its defences rely on having happened first:

    Loaded   every trial's reference output, computed (or read from the reference store) before any
             candidate code exists in the process; the device and its lock; the reference's work
    Built    the identity snapshot and precision switches taken, the build cache and the counting
             wrappers installed, *then* the candidate imported and ModelNew constructed
    Checked  every trial compared on poisoned memory, the output-cache refill, the work rules
             judged, the counting wrappers taken off; a Checked candidate is timed only when the
             verdict so far passes (`worker.run_stages`)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch-side types, for readers and checkers only
    import torch

    from ...problem import Problem
    from ..check import TrialCase
    from ..compile import BuildRecorder
    from ..gpulock import DeviceLock, NoLock
    from ..grad import GradRunner
    from ..guards import CompileTracker, IdentitySnapshot
    from ..own_code import OwnCode


@dataclass
class Loaded:
    """stages.load: the problem, and everything computed from it before any candidate code."""

    problem: Problem
    device: str
    lock: DeviceLock | NoLock | None
    cases: list[TrialCase]  # one per trial, with the reference's outputs
    refill: TrialCase  # trial 0's variant with other values: the output-cache guard
    ref_mutates: list[int]  # inputs the reference writes in place
    ref_ops: dict[str, int]  # the reference's ATen ops (its backward's too, when that is the work)
    backward: GradRunner | None = None  # the backward pass is part of the work


@dataclass
class Watch:
    """What every call of candidate code is checked against afterwards (stages.compile installs
    it before the candidate is imported; `guard.after_call` compares and restores)."""

    snapshot: IdentitySnapshot
    precision_before: dict[str, Any]
    dynamo_before: int
    compile_tracker: CompileTracker
    own: OwnCode  # the candidate's Triton launches and extension calls
    patched: set[str] = field(default_factory=set)  # guarded names already reported as replaced
    dynamo_patched: bool = False


@dataclass
class Built:
    """stages.compile: the candidate imported (its extensions built or found) and ModelNew built."""

    loaded: Loaded
    model: torch.nn.Module
    watch: Watch
    recorder: BuildRecorder | None  # the build cache's record of this process's builds


@dataclass
class Checked:
    """stages.check: every trial ran and was compared, the guards ran, the work was judged."""

    built: Built
    buckets: dict[str, dict[str, int]]  # recorded torch ops by origin (python, extension)

    @property
    def loaded(self) -> Loaded:
        return self.built.loaded
