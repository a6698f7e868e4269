"""profile_candidate: timeline pass, the hot kernels, one ncu collection of them, classification, findings.

Called by the judge inside its isolation. Every step runs the candidate in a subprocess under a
timeout, inside an overall budget; a step that cannot run (no GPU, no ncu, no counter permission,
a crashing candidate, a timeout) becomes a clear NOTICE finding and the steps that can still run
go on. This function never raises for a bad candidate or a missing tool.
"""
from __future__ import annotations

import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from .classify import Bottleneck, Classification, classify_timeline
from .context import ProfileConfig, ProfileRun, read_json
from .findings import KernelEvidence, kernel_findings, notice, rank_findings, timeline_findings
from .hot import select_hot
from .parse import KernelProfile
from .report import FAILED, OK, PARTIAL, ProfileReport
from .resources import binary_resources, from_triton_metadata
from .sass import disassemble
from .stages import attach_kernels, ncu_passes
from .torchprof import TimelineSummary, timeline_from_runner


@contextmanager
def _work_dir(config: ProfileConfig):
    if config.artifacts_dir:
        path = Path(config.artifacts_dir)
        path.mkdir(parents=True, exist_ok=True)
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="kw_profile_") as tmp:
            yield Path(tmp)


def profile_candidate(problem_path, candidate_path, config: ProfileConfig | None = None,
                      executor=None, kernel_shares: dict | None = None) -> ProfileReport:
    """Profile `candidate_path` (a ModelNew file) on `problem_path`; see the module docstring. `executor`
    starts the candidate's runs and ncu (`executor.LocalExecutor` by default; the judge passes one that
    asks its supervisor). `kernel_shares`: the verdict's per-kernel split (`verdict.kernels`), from which
    ncu's kernels are chosen (hot.py); without it, from this profile's own timeline."""
    config = config or ProfileConfig()
    problem, candidate = Path(problem_path).resolve(), Path(candidate_path).resolve()
    report = ProfileReport(str(problem), str(candidate))
    start = time.perf_counter()
    with _work_dir(config) as work:
        run = ProfileRun(config, work, report, problem, candidate, executor)
        try:
            _profile(run, kernel_shares)
        except Exception as exc:  # noqa: BLE001 -- a bug in profiling must not take the judge down
            report.status = FAILED
            report.findings.append(notice(f"Profiling stopped by an internal error: {type(exc).__name__}: {exc}"))
    report.findings = rank_findings(report.findings, config.max_findings)
    report.overhead_s["total"] = round(time.perf_counter() - start, 3)
    return report


def _profile(run: ProfileRun, kernel_shares: dict | None) -> None:
    report = run.report
    timeline = _timeline_pass(run)
    if timeline is None:
        report.status = FAILED
        return
    report.status = PARTIAL
    workload = classify_timeline(timeline)
    report.findings += timeline_findings(workload)
    if workload is not None:
        report.bottleneck = str(workload.bottleneck)
    if report.device == "cpu":
        report.findings.append(notice("No CUDA device: only the CPU timeline was recorded; ncu, energy and "
                                      "SASS analysis need a GPU."))
        return
    if run.config.sass:
        _binary_pass(run)
    selection = select_hot(kernel_shares, timeline, run.config.limits())
    kernels = ncu_passes(run, selection)
    if kernels is None:
        _findings_without_ncu(run)
        return
    report.selection = selection.to_dict()
    report.notes.append(selection.summary())
    attach_kernels(run, kernels, workload, selection)
    report.status = OK


def _timeline_pass(run: ProfileRun) -> TimelineSummary | None:
    """Plain time, energy and the torch-profiler timeline; None (with a notice) if the candidate fails."""
    out, limit = run.work / "timeline.json", run.timeout()
    result = run.executor.run(run.runner_cmd("timeline", out, run.config.calls), limit, run.env(), str(run.work))
    run.spend("timeline", result.seconds)
    data = read_json(out) or {}
    if result.timed_out:
        run.report.findings.append(notice(f"The candidate could not be profiled: its run did not finish within "
                                          f"{limit:.0f} s and was stopped."))
        return None
    if not data.get("ok"):
        why = data.get("error") or _tail(result.output)
        where = data.get("stage", "start")
        run.report.findings.append(notice(f"The candidate could not be profiled: it failed at {where}: {why}"))
        return None
    report = run.report
    report.device = data.get("device", "")
    report.plain_ms_per_call = data.get("plain_ms_per_call")
    report.timeline = data.get("timeline")
    report.energy = data.get("energy")
    run.triton = data.get("triton", [])
    run.binaries = data.get("binaries", [])
    return timeline_from_runner(data) or TimelineSummary()


def _tail(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " | ".join(lines[-3:])[-400:] or "no output"


def _binary_pass(run: ProfileRun) -> None:
    """Registers/spills/shared memory and SASS mix of the candidate's own kernels."""
    start = time.perf_counter()
    for entry in run.triton:
        run.resources[entry["name"]] = from_triton_metadata(entry["name"], entry.get("metadata", {}))
        if entry.get("cubin"):
            _add_sass(run, entry["cubin"])
    for binary in run.binaries:
        reports, _ = binary_resources(binary, run.timeout())
        for r in reports:
            run.resources.setdefault(r.function, r)
        _add_sass(run, binary)
    run.spend("sass", time.perf_counter() - start)


def _add_sass(run: ProfileRun, path: str) -> None:
    summaries, listing, note = disassemble(path, run.timeout())
    if note:
        run.report.notes.append(f"SASS of {Path(path).name} unavailable: {note}")
    for summary in summaries:
        run.sass.setdefault(summary.function, summary)
    if listing:
        (run.work / "sass").mkdir(exist_ok=True)
        (run.work / "sass" / (Path(path).stem + ".sass.txt")).write_text(listing)


def _findings_without_ncu(run: ProfileRun) -> None:
    """Without counters, the compiler's word still counts: spills and narrow loads of the candidate's kernels."""
    for name, resources in run.resources.items():
        profile = KernelProfile(name)
        ev = KernelEvidence(profile, Classification(Bottleneck.unknown, "not measured"), 0.0, resources,
                            run.sass.get(name))
        run.report.findings += kernel_findings(ev)
