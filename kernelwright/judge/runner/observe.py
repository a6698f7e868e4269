"""What the runner records of the candidate's work, and hands to the checker as plain data.

- launches of its own code (`own_code.OwnCode`: Triton kernels, extension calls, compiled custom
  ops), counted over every call;
- on the calls the checker asks to record (the trials), every op that reaches the dispatcher on
  the calling thread, by origin (`problem.ops.OpRecorder`);
- per call, from torch.profiler over the whole process (every thread, every launch path): on a GPU
  the kernels that ran (CUPTI), sorted into the candidate's own and foreign ones with their work
  kind (`kernel_kinds`); the ATen ops run on threads other than the calling one (the dispatcher's
  record is thread-local); and the outermost ATen ops of every thread (a CPU's record of the work);
- functions of torch, time and the namespaces the candidate could patch that were replaced (and
  put back), the precision switches it changed (and undid), torch.compile / dynamo use.

Profiler phases: "trials" records CPU ops of every thread (and kernels on a GPU); "timed" records
kernels only on a GPU (cheap enough to run on every timed call; CPU ops on a CPU run). Each call's
events are those that start between its mark and the next (`time.time_ns`, the profiler's clock).
"""
from __future__ import annotations

import bisect
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from ...problem.ops import work_kind
from .. import kernel_kinds
from ..guards import (DYNAMO_PATCHES, CompileTracker, IdentitySnapshot, dynamo_frames, guarded_targets, precision_state,
                      set_full_precision)
from ..own_code import OwnCode

CALL_RANGE = "kw::call"  # the profiler range around each forward (the calling thread)
OWN_RANGE = "kw::own"  # around each launch of the candidate's own code: ops inside are not torch work
TRIALS, TIMED = "trials", "timed"
TOP_KERNELS = 12


@dataclass
class CallWork:
    """One call's work as the profiler saw it (plain counts, for the checker)."""

    kernels: Counter = field(default_factory=Counter)  # foreign compute kernels by work kind
    own_kernels: int = 0  # kernels of the candidate's own code
    thread_ops: Counter = field(default_factory=Counter)  # ATen compute ops on other threads, by kind
    top_ops: Counter = field(default_factory=Counter)  # outermost ATen compute ops of every thread, by kind
    kernel_us: dict[str, list[float]] = field(default_factory=dict)  # kernel name -> [µs, launches]

    def to_dict(self) -> dict[str, Any]:
        return {"kernels": dict(self.kernels), "own_kernels": self.own_kernels, "thread_ops": dict(self.thread_ops),
                "top_ops": dict(self.top_ops), "kernel_us": self.kernel_us}


class Observer:
    """The runner's record of one candidate (see the module docstring)."""

    def __init__(self, device: str, source: str, allow_tf32: bool):
        self.device, self.allow_tf32 = device, allow_tf32
        self.own = OwnCode()
        self.tracker = CompileTracker()
        self.snapshot: IdentitySnapshot | None = None
        self.precision_before: dict[str, Any] = {}
        self.dynamo_before = 0
        self.patched: list[dict[str, Any]] = []  # {"names": [...], "when": ...}
        self.precision_changes: list[dict[str, Any]] = []
        self.dynamo_patched = False
        self.buckets: dict[str, Counter] = {}  # the recorded calls' ops by origin (max per op over calls)
        self.extension_names = kernel_kinds.extension_kernels(source)
        self.calls: dict[int, CallWork] = {}
        self.phases: dict[int, str] = {}
        self.recorded: set[int] = set()  # calls the dispatcher recorded (the checker asked)
        self.notes: list[str] = []
        self._profiler = None
        self._phase: str | None = None
        self._marks: list[tuple[int, int]] = []  # (call, time_ns) of the open phase

    # ------------------------------------------------------------------ set-up and guards

    def install(self) -> None:
        """Before the candidate is imported: the counting wrappers, the snapshot, the switches."""
        self.own.install()
        self.own.ranges = OWN_RANGE
        self.tracker.install()
        self.snapshot = IdentitySnapshot.take(guarded_targets())
        self.precision_before = precision_state()
        self.dynamo_before = dynamo_frames()

    def restart(self, source: str) -> None:
        """Another candidate in the same process (a sweep's next instance, judge/sweep.py): what the
        last one did is forgotten; the wrappers, the identity snapshot and the switches stay, and
        whatever the last one left patched was already undone after its calls."""
        self.end()
        self.own.reset()
        self.own.libraries.clear()
        self.tracker.calls.clear()
        self.extension_names = kernel_kinds.extension_kernels(source)
        self.patched, self.precision_changes, self.dynamo_patched = [], [], False
        self.buckets, self.calls, self.phases, self.recorded, self.notes = {}, {}, {}, set(), []
        self.dynamo_before = dynamo_frames()

    def after_call(self, when: str) -> None:
        """Functions replaced and precision switches changed since the snapshot: noted and undone."""
        if self.snapshot is None:
            return
        changed = self.snapshot.changes()
        if any(name in DYNAMO_PATCHES for name in changed):
            self.dynamo_patched = True
            changed = [name for name in changed if name not in DYNAMO_PATCHES]
        known = {name for entry in self.patched for name in entry["names"]}
        new = [name for name in changed if name not in known]
        if new:
            self.patched.append({"names": new, "when": when})
        if changed:
            self.snapshot.restore(changed)
        now = precision_state()
        if now != self.precision_before:
            self.precision_changes.append({"before": _plain(self.precision_before), "after": _plain(now), "when": when})
            set_full_precision(self.allow_tf32)

    def merge(self, buckets: dict[str, Counter]) -> None:
        for bucket, counts in buckets.items():
            mine = self.buckets.setdefault(bucket, Counter())
            for name, count in counts.items():
                mine[name] = max(mine[name], count)

    # ------------------------------------------------------------------ the profiler

    def begin(self, phase: str) -> None:
        """Start recording a phase of calls (ends the one before)."""
        if phase == self._phase:
            return
        self.end()
        try:
            self._profiler = _start_profiler(self.device, cpu_ops=phase == TRIALS or not self.device.startswith("cuda"))
            self._phase = phase
        except Exception as exc:  # noqa: BLE001 - no profiler: the checker is told, counts come from the dispatcher
            self.notes.append(f"profiler not started for the {phase} calls: {type(exc).__name__}: {exc}")
            self._profiler, self._phase = None, None

    def mark(self, call: int, recorded: bool = False) -> None:
        if recorded:
            self.recorded.add(call)
        if self._profiler is not None:
            self._marks.append((call, time.time_ns()))
            self.phases[call] = self._phase or ""

    def end(self) -> None:
        """Stop the open phase and sort its events into the calls they belong to."""
        profiler, marks = self._profiler, self._marks
        self._profiler, self._phase, self._marks = None, None, []
        if profiler is None:
            return
        try:
            profiler.__exit__(None, None, None)
            events = list(profiler.profiler.kineto_results.events())
        except Exception as exc:  # noqa: BLE001 - a profiler that fails to stop loses this phase's counts only
            self.notes.append(f"profiler events lost: {type(exc).__name__}: {exc}")
            return
        for call, record in split_calls(events, marks, self.own_names()).items():
            self.calls[call] = record

    def own_names(self) -> tuple[set[str], set[str]]:
        return set(self.own.triton), set(self.extension_names)

    # ------------------------------------------------------------------ the report

    def report(self) -> dict[str, Any]:
        return {
            "launches": self.own.launches(),
            "libraries": list(self.own.libraries),
            "buckets": {k: dict(v) for k, v in self.buckets.items()},
            "calls": {str(n): r.to_dict() for n, r in self.calls.items()},
            "phases": {str(n): p for n, p in self.phases.items()},
            "recorded": sorted(self.recorded),
            "patched": self.patched,
            "precision_changes": self.precision_changes,
            "dynamo": {"frames": dynamo_frames() - self.dynamo_before, "calls": sorted(set(self.tracker.calls)),
                       "patched": self.dynamo_patched},
            "notes": self.notes,
        }


def _plain(state: dict[str, Any]) -> dict[str, Any]:
    return {k: (v if isinstance(v, (bool, int, float, str)) or v is None else str(v)) for k, v in state.items()}


def _start_profiler(device: str, cpu_ops: bool):
    activities = [ProfilerActivity.CPU] if cpu_ops else []
    if device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    config = None
    if cpu_ops:
        try:
            config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
        except TypeError:  # a torch without it records the calling thread only
            config = None
    profiler = profile(activities=activities, experimental_config=config) if config is not None else \
        profile(activities=activities)
    profiler.__enter__()
    return profiler


# ------------------------------------------------------------------ sorting events into calls


@dataclass
class _Span:
    name: str
    start: int
    end: int
    thread: int


def split_calls(events, marks: list[tuple[int, int]], own: tuple[set[str], set[str]]) -> dict[int, CallWork]:
    """Per call (its events start between its mark and the next), what ran: see `CallWork`."""
    if not marks:
        return {}
    starts = [t for _, t in marks]
    records = {call: CallWork() for call, _ in marks}
    cpu: dict[int, list[_Span]] = {}
    for event in events:
        name, start = event.name(), int(event.start_ns())
        index = _call_index(starts, start)
        if index is None:
            continue
        record = records[marks[index][0]]
        if _on_device(event):
            _count_kernel(record, name, event, own)
        else:
            cpu.setdefault(int(event.start_thread_id()), []).append(
                _Span(name, start, start + int(event.duration_ns()), int(event.start_thread_id())))
    main = _calling_thread(cpu)
    for thread, spans in cpu.items():
        for span in _outermost_ops(spans):
            kind = work_kind(span.name.removeprefix("aten::"))
            index = _call_index(starts, span.start)
            if kind is None or index is None:
                continue
            record = records[marks[index][0]]
            record.top_ops[kind] += 1
            if thread != main:
                record.thread_ops[kind] += 1
    return records


def _call_index(starts: list[int], start: int) -> int | None:
    index = bisect.bisect_right(starts, start) - 1
    return index if index >= 0 else None


def _on_device(event) -> bool:
    try:
        return "CUDA" in str(event.device_type())
    except Exception:  # noqa: BLE001
        return False


def _count_kernel(record: CallWork, name: str, event, own: tuple[set[str], set[str]]) -> None:
    triton, extension = own
    duration_us = int(event.duration_ns()) / 1e3
    entry = record.kernel_us.setdefault(name, [0.0, 0])
    entry[0] += duration_us
    entry[1] += 1
    if kernel_kinds.is_own(name, triton, extension):
        record.own_kernels += 1
        return
    kind = kernel_kinds.kernel_kind(name)
    if kind is not None:
        record.kernels[kind] += 1


def _calling_thread(cpu: dict[int, list[_Span]]) -> int | None:
    """The thread whose events hold the call ranges (the runner's main thread)."""
    for thread, spans in cpu.items():
        if any(span.name == CALL_RANGE for span in spans):
            return thread
    return None


def _outermost_ops(spans: list[_Span]) -> list[_Span]:
    """ATen ops of one thread not nested in another ATen op or in a launch of the candidate's own
    code (those are the launch's: the Triton interpreter's bookkeeping, an extension's calls)."""
    found, stack = [], []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        while stack and stack[-1].end <= span.start:
            stack.pop()
        covered = any(s.name.startswith("aten::") or s.name == OWN_RANGE for s in stack)
        if span.name.startswith("aten::") and not covered:
            found.append(span)
        stack.append(span)
    return found
