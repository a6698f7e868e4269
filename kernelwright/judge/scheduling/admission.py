"""GPU memory admission for the judge pool: evaluations start on a GPU only while their peak GPU
memory fits in its free memory with headroom, and an out-of-memory error that sharing the GPU
may have caused is judged again with the GPU to itself before it becomes a verdict.

- The estimate of a job is the peak the worker measured (`verdict.environment["gpu_peak_bytes"]`,
  torch's max_memory_reserved: inputs, outputs, parameters, the reference's and the candidate's
  work) for an earlier candidate of the same problem key (problem source, overrides, device),
  times `margin`. A problem not measured yet has no estimate: its first job (one at a time per
  problem; the problem's other jobs wait for its measurement) reserves `unknown_share` of the
  free memory, so the first jobs of different problems can share the GPU (a suite of a hundred
  problems is not judged one problem at a time). Under-estimates are covered by the OOM retry.
  A batch runner records the peaks its folders' verdicts already measured before it starts
  (batch.measured_peaks). The pool waits here without holding a lane (pool._on_lane).
- A job is admitted on a GPU when no job of any judge runs there, or when no exclusive job (an OOM
  retry) runs or waits there and `estimate + headroom <= free - reserved`, where `free` is what the free-memory
  source says now (other processes included) and `reserved` what the running jobs there were
  admitted with, this pool's and every other judge process's (counted in full: the part already
  allocated is in `free` too, so the rule errs on the safe side).
- Other judge processes are known through the GPU's admission ledger (ledger.py, `ledgers`): one
  file per GPU, under an flock, listing every admitted job of every judge process on the machine.
  "Check that it fits, then write the entry" is one step under that lock; a wait for another
  process's job polls the ledger (`poll_s`), a wait for this pool's own jobs wakes at once.
- A job that ran while another one (of this pool or, through the ledger, of another judge) ran on the
  same GPU, or whose GPU other processes held memory on when its OOM verdict came back, shared the
  GPU: its OOM is judged again once with no other job of any judge on the GPU (`OOM_RETRIED`: its
  ledger entry, exclusive, keeps new jobs of every judge out while it waits and runs); an OOM with
  the GPU to itself is the candidate's own (`OOM_ALONE`) once the judge's own memory is ruled out
  too: an OOM while the worker kept reference outputs on the GPU (`JudgeConfig.reference_device_share`)
  is judged again, alone, with them all in host memory (`OOM_REFERENCE_ON_HOST`).

No torch here: the pool is a trusted process that never imports it.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..verdict import INFO, PEAK_KEY, Flag
from .ledger import GpuLedger, LedgerEntry, new_entry

GIB = 1 << 30
# torch's allocator ("CUDA out of memory", OutOfMemoryError), the CUDA runtime's own error string
# ("CUDA error: out of memory": cuRAND, cuBLAS set-up, an extension's cudaMalloc) and the libraries'
OOM_MARKERS = ("CUDA out of memory", "OutOfMemoryError", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED",
               "cudaErrorMemoryAllocation")
OOM_RETRIED = "oom_retried_alone"
OOM_ALONE = "oom_alone"
OOM_REFERENCE_ON_HOST = "oom_retried_reference_on_host"
TIMING_RETRIED = "timing_retried_alone"
# rejections that another process's work on the GPU could cause: judged again alone before they stand
TIMING_REJECTIONS = frozenset({"faster_than_floor", "side_stream"})


@dataclass(eq=False)  # removed from the running list by identity
class GpuReservation:
    """One admitted job on one GPU."""

    gpu: str
    need: int  # bytes reserved (0: unknown, the job runs alone)
    exclusive: bool
    shared_with: int = 0  # how many other jobs of the pool ran on this GPU while it ran (at most)
    waited_s: float = 0.0
    other_judges: int = 0  # jobs of other judge processes listed on this GPU when it started or ended (at most)
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    asked: float = field(default_factory=time.time)  # when it asked for its place (exclusive jobs queue by it)


@dataclass
class MemoryAdmission:
    free_bytes: Callable[[str], int | None]  # free memory of a GPU now; None: unknown (admit by count only)
    # processes holding memory on a GPU now (this pool's workers that still run included); None: unknown
    gpu_processes: Callable[[str], int | None] = lambda gpu: None
    headroom_bytes: int = 2 * GIB
    margin: float = 1.25
    # what a job of a problem not measured yet reserves: this share of the GPU's free memory (the
    # worker may keep reference outputs within JudgeConfig.reference_device_share of it, 0.5 by
    # default, judge/checker/stages/reference.py: an OOM beside them is judged again with them on the host)
    unknown_share: float = 0.3
    measured: dict[str, int] = field(default_factory=dict)  # problem key -> the largest measured peak
    _probing: set[str] = field(default_factory=set)  # problems whose first job runs and measures them
    _running: dict[str, list[GpuReservation]] = field(default_factory=dict)
    _exclusive_waiting: dict[str, int] = field(default_factory=dict)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    # the GPU's ledger of every judge process's jobs (ledger.machine_ledger); None: this pool's jobs only
    ledgers: Callable[[str], GpuLedger | None] | None = None
    poll_s: float = 0.25  # how often a job waiting for other processes looks at the ledger again
    recheck_s: float = 2.0  # ... and asks for free memory again when the ledger did not change
    owner: str = field(default_factory=lambda: f"{os.getpid()}-{secrets.token_hex(4)}")

    def estimate(self, key: str) -> int | None:
        """Bytes to reserve for a job of problem `key`; None before any of its jobs was measured."""
        peak = self.measured.get(key)
        return None if peak is None else int(peak * self.margin)

    def record(self, key: str, peak_bytes) -> None:
        if isinstance(peak_bytes, int) and peak_bytes > 0:
            with self._cond:
                self.measured[key] = max(peak_bytes, self.measured.get(key, 0))
                self._cond.notify_all()

    @contextmanager
    def admitted(self, gpu: str, key: str, exclusive: bool = False, timeout_s: float = 3600.0) -> Iterator[GpuReservation]:
        """Hold a place on `gpu` for one job of problem `key` (blocks until it fits). A job whose
        problem has no measured peak yet reserves `unknown_share` of the free memory and measures it
        (one such probe per problem at a time: the problem's other jobs wait for its measurement)."""
        reservation = GpuReservation(gpu=gpu, need=0, exclusive=exclusive)
        ledger = self.ledgers(gpu) if self.ledgers else None
        with self._cond:
            if exclusive:
                self._exclusive_waiting[gpu] = self._exclusive_waiting.get(gpu, 0) + 1
                if ledger is not None:  # keeps other judges' new jobs out while it waits
                    ledger.put(self._entry(reservation, waiting=True))

            def ready() -> bool:
                if not exclusive:
                    need = self.estimate(key)
                    if need is None and key in self._probing:
                        return False  # another job of this problem is measuring it
                    reservation.need = need if need is not None else self._unknown_need(gpu)
                if ledger is None:
                    return self._fits(reservation)
                others = ledger.admit_if(self._entry(reservation), lambda others: self._fits(reservation, others))
                if others is not None:
                    reservation.other_judges = _running_count(others)
                return others is not None

            started = time.monotonic()
            try:
                waited = self._wait(ready, timeout_s, ledger)
            except BaseException:
                if ledger is not None:
                    ledger.remove(reservation.token)
                raise
            finally:
                if exclusive:
                    self._exclusive_waiting[gpu] -= 1
            reservation.waited_s = time.monotonic() - started
            probe = not exclusive and self.estimate(key) is None and key not in self._probing
            if probe:
                self._probing.add(key)
            if not waited:  # never stall for good: run it anyway, the OOM retry still covers it
                reservation.shared_with = len(self._running.get(gpu, []))
                if ledger is not None:
                    others = ledger.admit_if(self._entry(reservation), lambda others: True) or []
                    reservation.other_judges = _running_count(others)
            running = self._running.setdefault(gpu, [])
            running.append(reservation)
            for job in running:
                job.shared_with = max(job.shared_with, len(running) - 1)
        try:
            yield reservation
        finally:
            if ledger is not None:
                left = ledger.remove(reservation.token)
                reservation.other_judges = max(reservation.other_judges, len(left))
            with self._cond:
                self._running[gpu].remove(reservation)
                if probe:
                    self._probing.discard(key)
                self._cond.notify_all()

    def _wait(self, ready: Callable[[], bool], timeout_s: float, ledger: GpuLedger | None) -> bool:
        """Wait (holding `_cond`) until `ready()`: this pool's changes wake it at once; other
        processes' are seen by polling the ledger, and free memory is asked again at least every
        `recheck_s` while the ledger stays as it was."""
        if ledger is None:
            return self._cond.wait_for(ready, timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        quiet = False
        stamp, checked = None, 0.0
        while True:
            if not quiet:
                if ready():
                    return True
                stamp, checked = ledger.stamp(), time.monotonic()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            notified = self._cond.wait(min(self.poll_s, left))
            quiet = not notified and ledger.stamp() == stamp and time.monotonic() - checked < self.recheck_s

    def _entry(self, job: GpuReservation, waiting: bool = False) -> LedgerEntry:
        return new_entry(self.owner, job.token, job.need, job.exclusive, waiting=waiting,
                         since=job.asked if job.exclusive else None)

    def _unknown_need(self, gpu: str) -> int:
        free = self.free_bytes(gpu)
        return int(self.unknown_share * free) if free else 0

    def _fits(self, job: GpuReservation, others: list[LedgerEntry] = ()) -> bool:
        """Whether `job` may start beside this pool's running jobs and `others`, the jobs other
        judge processes listed on the GPU's ledger (running, or exclusive and waiting)."""
        running = self._running.get(job.gpu, [])
        if job.exclusive:  # an earlier exclusive job of another judge goes first
            blocking = [e for e in others if not (e.waiting and e.exclusive and not e.goes_before(self._entry(job)))]
            return not running and not blocking
        if not running and not others:
            return True
        if any(r.exclusive for r in running) or any(e.exclusive for e in others):
            return False
        if self._exclusive_waiting.get(job.gpu, 0):
            return False  # an exclusive job waits: let the GPU drain for it
        free = self.free_bytes(job.gpu)
        if free is None:
            return True
        reserved = sum(r.need for r in running) + sum(e.need for e in others)
        return job.need + self.headroom_bytes <= free - reserved


def _running_count(entries: list[LedgerEntry]) -> int:
    return len([e for e in entries if not e.waiting])


def memory_key(problem_source: str, overrides: dict, device: str) -> str:
    """The jobs whose peaks stand for each other: one problem at one size on one device (the rule
    set changes what is allowed and how closely outputs must agree, not what is allocated)."""
    text = json.dumps([problem_source, overrides, device], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def is_oom(verdict) -> bool:
    """Whether the verdict ended in a GPU out-of-memory error (its message, the worker's stderr or
    a trial's message)."""
    return not verdict.passed and bool(oom_line(verdict))


def oom_line(verdict) -> str:
    """The first line of the verdict's error, the worker's stderr or a trial's message that names a
    GPU out-of-memory error (at most 300 characters); "" when none does."""
    texts = [verdict.error or "", verdict.process.stderr_tail if verdict.process else ""]
    texts += [t.message or "" for t in verdict.trials]
    for line in "\n".join(texts).splitlines():
        if names_oom(line):
            return line.strip()[:300]
    return ""


def names_oom(text: str) -> bool:
    """Whether `text` names a GPU out-of-memory error."""
    return any(marker in text for marker in OOM_MARKERS)


def peak_of(verdict) -> int | None:
    value = (verdict.environment or {}).get(PEAK_KEY)
    return value if isinstance(value, int) else None


def run_admitted(admission: MemoryAdmission, gpu: str, key: str, run: Callable[[], object],
                 on_host: Callable[[], object] | None = None):
    """Run one evaluation (`run()` -> Verdict, or None when it was cancelled) on `gpu` once admitted;
    record its measured peak. An OOM is the candidate's own only once neither sharing the GPU nor
    the judge's own memory can have caused it: an OOM while sharing the GPU is judged again alone
    once; an OOM beside reference outputs the judge kept on the GPU is judged again, alone, with
    them in host memory (`on_host()`: the same evaluation with reference_device_share 0). The
    verdict says which it was."""
    with admission.admitted(gpu, key) as seat:
        verdict = run()
        if verdict is None:  # cancelled while it waited: nothing ran
            return None
        admission.record(key, peak_of(verdict))  # before the seat is given up: the problem's waiting jobs need it
    _note_wait(verdict, seat.waited_s)
    waited = seat.waited_s
    others = seat.shared_with + seat.other_judges or admission.gpu_processes(gpu) or 0
    if timing_rejected(verdict) and others:
        verdict, waited = _again_alone(admission, gpu, key, run, verdict, waited, TIMING_RETRIED, (
            f"rejected for its timing ({', '.join(sorted(timing_rejected(verdict)))}) while {_sharing(seat, others)} "
            f"shared the GPU (a co-scheduling effect is not held against the candidate); judged again with no other "
            f"evaluation {_scope(admission)} on the GPU, this is that verdict"))
    if not is_oom(verdict):
        return verdict
    if others:
        verdict, waited = _again_alone(admission, gpu, key, run, verdict, waited, OOM_RETRIED, (
            f"ran out of GPU memory while {_sharing(seat, others)} shared the GPU (a co-scheduling failure, "
            f"not held against the candidate); judged again with no other evaluation {_scope(admission)} on "
            f"the GPU, this is that verdict"))
    kept = reference_on_device(verdict)
    if is_oom(verdict) and kept != 0 and on_host is not None:
        held = "reference outputs" if kept is None else f"{kept / GIB:.2f} GiB of reference outputs"
        verdict, waited = _again_alone(admission, gpu, key, on_host, verdict, waited, OOM_REFERENCE_ON_HOST, (
            f"ran out of GPU memory while the judge may keep {held} on the GPU (reference_device_share: the "
            f"judge's memory, not held against the candidate); judged again alone with every reference output "
            f"in host memory, this is that verdict"))
    if is_oom(verdict):
        verdict.flags.append(_flag(OOM_ALONE, _alone(admission)))
    return verdict


def timing_rejected(verdict) -> set[str]:
    """The codes of the verdict's rejections that sharing the GPU could have caused."""
    return {f.code for f in getattr(verdict, "flags", []) if f.severity == "reject" and f.code in TIMING_REJECTIONS}


def _again_alone(admission: MemoryAdmission, gpu: str, key: str, run: Callable[[], object], first,
                 waited: float, code: str, why: str):
    """(the verdict of `run()`, judged again with no other evaluation on the GPU and flagged `code`
    with `why` and the first run's error; the seconds waited for room in all)."""
    said = (first.error or "").strip()[:300]
    with admission.admitted(gpu, key, exclusive=True) as alone:
        verdict = run()
    admission.record(key, peak_of(verdict))
    waited += alone.waited_s
    _note_wait(verdict, waited)
    verdict.flags.extend(f for f in first.flags if f.code in (OOM_RETRIED, OOM_REFERENCE_ON_HOST, TIMING_RETRIED))
    verdict.flags.append(_flag(code, f"{why}. The first run said: {said}"))
    return verdict, waited


def _flag(code: str, message: str):
    return Flag(code, INFO, message)


def reference_on_device(verdict) -> int | None:
    """Bytes of reference outputs the judge kept on the GPU in this evaluation; None where the
    evaluation stopped before it recorded them (an OOM while computing them, say)."""
    value = (getattr(verdict, "precision", None) or {}).get("reference_on_device_bytes")
    return value if isinstance(value, int) else None


def _note_wait(verdict, seconds: float) -> None:
    """stage_seconds["admission_wait"]: the time the evaluation waited for room on the GPU."""
    if seconds >= 0.001 and isinstance(getattr(verdict, "stage_seconds", None), dict):
        verdict.stage_seconds["admission_wait"] = round(seconds, 3)


def _sharing(seat: GpuReservation, others: int) -> str:
    parts = [f"up to {seat.shared_with} other evaluation(s) of this judge"] if seat.shared_with else []
    parts += [f"{seat.other_judges} evaluation(s) of other judge processes"] if seat.other_judges else []
    return " and ".join(parts) or f"{others} other process(es)"


def _scope(admission: MemoryAdmission) -> str:
    return "of any judge process (the GPU's admission ledger)" if admission.ledgers else "of this judge"


def _alone(admission: MemoryAdmission) -> str:
    return (f"out of GPU memory with no other evaluation {_scope(admission)} on the GPU: the candidate's own "
            "(processes outside the judge may still have held memory: see the device's free memory)")
