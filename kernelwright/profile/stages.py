"""The ncu collection of a profile: one run of the candidate under ncu, over the hot kernels only.

Which kernels: `hot.KernelSelection` (the timing stage's per-kernel shares, or the profile's
timeline), by function name, with a bounded number of launches. What: the sections and counters
the findings read and the PC sampling behind the stall hot spots (`needs.collection`), in one
collection, so the program starts once under ncu. The stall hot spots of latency-bound kernels come
from the same report's source page. The kernels are then matched with the compiler's view
(resources, SASS, by symbol name) and turned into KernelReports and findings, each with its share of
the forward's GPU time from the selection. Failures become NOTICE findings, never exceptions.
(The collection keeps the name `stage1` in file names and `overhead_s`, where a second, per-class
stage used to follow.)
"""
from __future__ import annotations

from dataclasses import asdict

from . import metrics as catalog
from . import needs, querycache
from .classify import Bottleneck, Classification, classify_forward, classify_kernel
from .context import ProfileRun, read_json
from .findings import Finding, KernelEvidence, kernel_findings, notice
from .hot import NONE, KernelSelection
from .hotspots import parse_source_page
from .ncu import NcuPlan, filter_metrics, find_ncu, import_command, run_collection
from .parse import KernelProfile, NcuParseError, aggregate_by_name, function_base, parse_raw_csv
from .report import KernelReport

STAGE = "stage1"
_QUERY_CACHE = querycache.LISTED  # what ncu lists per device, in this process (tests clear it)


def first_launches(run: ProfileRun) -> KernelSelection:
    """The selection without per-kernel shares: the first `max_kernels` launches of the forward."""
    return KernelSelection(NONE, "no per-kernel shares were given", launch_count=max(1, run.config.max_kernels))


def ncu_passes(run: ProfileRun, selection: KernelSelection | None = None) -> list[KernelProfile] | None:
    """The collection; the aggregated kernel profiles (by share, hottest first), or None (with a notice)."""
    config, report = run.config, run.report
    selection = selection or first_launches(run)
    if not config.use_ncu:
        report.findings.append(notice("ncu is disabled by configuration: kernels were not classified from "
                                      "hardware counters."))
        return None
    ncu = find_ncu(config.ncu_path)
    if ncu is None:
        report.findings.append(notice("ncu (Nsight Compute) is not installed or not on PATH: kernels were not "
                                      "classified from hardware counters; install Nsight Compute or set KW_NCU."))
        return None
    wanted = needs.collection(config.source_counters)
    counters, dropped = filter_metrics(list(wanted.counters), querycache.available_metrics(run, ncu))
    report.dropped_metrics += [d for d in dropped if d not in report.dropped_metrics]
    plan = NcuPlan(list(wanted.sections), counters + list(wanted.source_metrics), selection.launch_count,
                   selection.functions)
    profiles = _collect(run, ncu, plan, STAGE)
    if profiles is None:
        return None
    kernels = aggregate_by_name(profiles)
    selection.settle([function_base(k.name) for k in kernels])
    kernels.sort(key=lambda k: -(selection_share(selection, k, kernels) or 0.0))
    _hotspots(run, ncu, kernels[: max(config.hot_kernels, 1)])
    return kernels


def selection_share(selection: KernelSelection, kernel: KernelProfile, kernels: list[KernelProfile]) -> float:
    """`kernel`'s share of the forward's GPU time: the selection's (timing stage or timeline), summed over
    the picked instances of its function; without shares, its share of the profiled launches' time."""
    if selection.source == NONE:
        return kernel.total_ns / (sum(k.total_ns for k in kernels) or 1.0)
    return sum(p.share for p in selection.picked if p.function == function_base(kernel.name))


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


def _hotspots(run: ProfileRun, ncu: str, hot: list[KernelProfile]) -> None:
    """Stall hot spots of the latency-bound hot kernels, from the source page of the collection's report."""
    latency = [k for k in hot if classify_kernel(k).bottleneck == Bottleneck.latency]
    if not latency:
        return
    report = run.reports.get(STAGE) or str(run.work / f"{STAGE}.ncu-rep")
    result = run.executor.ncu(ncu, import_command(ncu, report, "source")[1:], run.timeout())
    if not result.ok:  # an ncu without --print-source
        result = run.executor.ncu(ncu, ["--import", report, "--csv", "--page", "source"], run.timeout())
    run.spend("ncu_import", result.seconds)
    (run.work / f"{STAGE}_source.csv").write_text(result.output)
    pages = parse_source_page(result.output)
    for kernel in latency:
        spots = next((v for k, v in pages.items() if k and function_base(k) == function_base(kernel.name)), None)
        if spots is None and len(pages) == 1 and len(latency) == 1:
            spots = next(iter(pages.values()))
        if spots:
            run.hotspots[kernel.name] = spots
        else:
            run.report.notes.append(f"No stall hot spots for `{kernel.name}`: the source page had no warp-stall "
                                    f"samples for it.")


def symbol_matches(kernel: str, symbol: str) -> bool:
    """Whether compiler symbol `symbol` (mangled or not) is the function ncu calls `kernel`."""
    base = function_base(kernel)
    return bool(base) and (symbol == base or f"{len(base)}{base}" in symbol)


def _lookup(table: dict, kernel: str):
    return next((v for k, v in table.items() if symbol_matches(kernel, k)), None)


def attach_kernels(run: ProfileRun, kernels: list[KernelProfile], workload: Classification | None,
                   selection: KernelSelection | None = None) -> None:
    """Findings and a KernelReport per profiled kernel (hottest first), and the forward's class."""
    report, selection = run.report, selection or first_launches(run)
    for kernel in kernels[: max(run.config.hot_kernels, 1)]:
        share = selection_share(selection, kernel, kernels)
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
