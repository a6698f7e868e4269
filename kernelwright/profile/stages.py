"""The ncu stages of a profile: stage 1 for every kernel, stage 2 for the hot ones, then findings.

Stage 1 classifies; the classes of the hot kernels choose the sections of stage 2, which runs only
on those kernels (`--kernel-name`), and its counters are merged into the stage-1 profiles. The
kernels are then matched with the compiler's view (resources, SASS, by symbol name) and turned
into KernelReports and findings. Failures become NOTICE findings on the report, never exceptions.
"""
from __future__ import annotations

from dataclasses import asdict

from . import metrics as catalog
from .classify import Bottleneck, Classification, classify_forward, classify_kernel
from .context import ProfileRun, read_json
from .findings import Finding, KernelEvidence, kernel_findings, notice
from .hotspots import parse_source_page
from .ncu import (NcuPlan, filter_metrics, find_ncu, import_command, parse_query_metrics, query_metrics_command,
                  run_collection)
from .parse import KernelProfile, NcuParseError, aggregate_by_name, function_base, parse_raw_csv
from .report import KernelReport

_QUERY_CACHE: dict[str, set[str]] = {}  # ncu path -> base metric names it lists
MIN_LISTED_METRICS = 100


def ncu_passes(run: ProfileRun) -> list[KernelProfile] | None:
    """Stage 1 then stage 2; the aggregated kernel profiles, or None (with a notice) without ncu data."""
    config, report = run.config, run.report
    if not config.use_ncu:
        report.findings.append(notice("ncu is disabled by configuration: kernels were not classified from "
                                      "hardware counters."))
        return None
    ncu = find_ncu(config.ncu_path)
    if ncu is None:
        report.findings.append(notice("ncu (Nsight Compute) is not installed or not on PATH: kernels were not "
                                      "classified from hardware counters; install Nsight Compute or set KW_NCU."))
        return None
    available = _available_metrics(run, ncu)
    metric_names, dropped = filter_metrics(catalog.stage1_metrics(), available)
    report.dropped_metrics += dropped
    plan = NcuPlan(list(catalog.STAGE1_SECTIONS), metric_names, config.max_kernels)
    profiles = _collect(run, ncu, plan, "stage1")
    if profiles is None:
        return None
    kernels = aggregate_by_name(profiles)
    if config.stage2 and run.remaining() > 10:
        _stage2(run, ncu, kernels, available)
    return kernels


def _available_metrics(run: ProfileRun, ncu: str) -> set[str]:
    if ncu not in _QUERY_CACHE:
        result = run.executor.ncu(ncu, query_metrics_command(ncu)[1:], min(60.0, run.timeout()))
        run.spend("ncu_query", result.seconds)
        names = parse_query_metrics(result.output) if result.ok else set()
        # a real device lists thousands; a short list means an output we misread: filter nothing
        _QUERY_CACHE[ncu] = names if len(names) >= MIN_LISTED_METRICS else set()
    return _QUERY_CACHE[ncu]


def _collect(run: ProfileRun, ncu: str, plan: NcuPlan, stage: str) -> list[KernelProfile] | None:
    """One ncu collection and its raw-page import; None with a notice when either fails."""
    base = run.work / stage
    out = run.work / f"{stage}_runner.json"
    program = run.runner_cmd("ncu", out, run.config.ncu_calls)
    result, dropped = run_collection(ncu, plan, base, program, run.timeout(), run.env(), run.executor)
    run.spend(f"ncu_{stage}", result.seconds)
    run.report.dropped_metrics += [d for d in dropped if d not in run.report.dropped_metrics]
    if not result.ok:
        data = read_json(out) or {}
        detail = f" ({data['error']})" if data.get("error") else ""
        run.report.findings.append(notice(f"ncu {stage} failed: {result.error}{detail}"))
        (run.work / f"{stage}.log").write_text(result.output)
        return None
    run.reports[stage] = result.report
    imported = run.executor.ncu(ncu, import_command(ncu, result.report, "raw")[1:], run.timeout())
    if not imported.ok:  # an ncu that lacks one of the print options: plain raw page
        imported = run.executor.ncu(ncu, ["--import", result.report, "--csv", "--page", "raw"], run.timeout())
    run.spend("ncu_import", imported.seconds)
    (run.work / f"{stage}.csv").write_text(imported.output)
    try:
        profiles = parse_raw_csv(imported.output)
    except NcuParseError as exc:
        run.report.findings.append(notice(f"ncu {stage} output could not be read: {exc}"))
        return None
    if not profiles:
        run.report.findings.append(notice(f"ncu {stage} profiled no kernel of the forward pass."))
        return None
    return profiles


def _stage2(run: ProfileRun, ncu: str, kernels: list[KernelProfile], available: set[str]) -> None:
    """Deeper sections for the hot kernels only, chosen by their stage-1 class; merged into `kernels`."""
    total = sum(k.total_ns for k in kernels) or 1.0
    hot = [k for k in kernels[: run.config.hot_kernels] if k.total_ns / total >= run.config.min_share]
    classes = {str(classify_kernel(k).bottleneck) for k in hot}
    sections, names = catalog.stage2_plan(sorted(classes))
    if not hot or not (sections or names):
        return
    names, dropped = filter_metrics(names, available)
    run.report.dropped_metrics += [d for d in dropped if d not in run.report.dropped_metrics]
    launches = min(run.config.max_kernels, sum(k.launches for k in hot))
    plan = NcuPlan(sections, names, launches, list(dict.fromkeys(function_base(k.name) for k in hot)))
    deeper = _collect(run, ncu, plan, "stage2")
    if deeper is None:
        return
    by_name = {function_base(k.name): k for k in aggregate_by_name(deeper)}
    for kernel in hot:
        if (match := by_name.get(function_base(kernel.name))) is not None:
            kernel.metrics = {**match.metrics, **kernel.metrics}
    if "SourceCounters" in sections:
        _hotspots(run, ncu, hot)


def _hotspots(run: ProfileRun, ncu: str, hot: list[KernelProfile]) -> None:
    """Stall hot spots of the latency-bound hot kernels, from the source page of the stage-2 report."""
    latency = [k for k in hot if classify_kernel(k).bottleneck == Bottleneck.latency]
    if not latency:
        return
    report = run.reports.get("stage2") or str(run.work / "stage2.ncu-rep")
    result = run.executor.ncu(ncu, import_command(ncu, report, "source")[1:], run.timeout())
    if not result.ok:  # an ncu without --print-source
        result = run.executor.ncu(ncu, ["--import", report, "--csv", "--page", "source"], run.timeout())
    run.spend("ncu_import", result.seconds)
    (run.work / "stage2_source.csv").write_text(result.output)
    pages = parse_source_page(result.output)
    for kernel in latency:
        spots = next((v for k, v in pages.items() if k and function_base(k) == function_base(kernel.name)), None)
        if spots is None and len(pages) == 1 and len(latency) == 1:
            spots = next(iter(pages.values()))
        if spots:
            run.hotspots[kernel.name] = spots


def symbol_matches(kernel: str, symbol: str) -> bool:
    """Whether compiler symbol `symbol` (mangled or not) is the function ncu calls `kernel`."""
    base = function_base(kernel)
    return bool(base) and (symbol == base or f"{len(base)}{base}" in symbol)


def _lookup(table: dict, kernel: str):
    return next((v for k, v in table.items() if symbol_matches(kernel, k)), None)


def attach_kernels(run: ProfileRun, kernels: list[KernelProfile], workload: Classification | None) -> None:
    report = run.report
    total = sum(k.total_ns for k in kernels) or 1.0
    for kernel in kernels[: max(run.config.hot_kernels, 1)]:
        share = kernel.total_ns / total
        cls = classify_kernel(kernel)
        ev = KernelEvidence(kernel, cls, share, _lookup(run.resources, kernel.name), _lookup(run.sass, kernel.name),
                            run.hotspots.get(kernel.name, []))
        found = kernel_findings(ev)
        if not found and share >= 0.1:
            found = [Finding(f"`{kernel.name}` ({share:.0%} of GPU time): {cls.reason}.", [], cls.numbers,
                             share * 0.1, kernel.name)]
        report.findings += found
        report.kernels.append(_kernel_report(ev))
    if kernels:
        report.bottleneck = str(classify_forward(workload, kernels).bottleneck)


def _kernel_report(ev: KernelEvidence) -> KernelReport:
    keys = [k for k in catalog.ALIASES if ev.profile.get(k) is not None]
    numbers = {k: round(float(ev.profile.get(k)), 4) for k in keys}
    return KernelReport(
        name=ev.profile.name,
        launches=ev.profile.launches,
        time_us=round((ev.profile.duration_ns or 0.0) / 1e3, 3),
        share=round(ev.share, 4),
        bottleneck=str(ev.classification.bottleneck),
        reason=ev.classification.reason,
        confident=ev.classification.confident,
        numbers=numbers,
        resources=ev.resources.to_dict() if ev.resources else None,
        sass=ev.sass.to_dict() if ev.sass else None,
        hotspots=[asdict(h) for h in ev.hotspots],
    )
