"""Nsight Compute on the command line: build the commands, run them with limits, explain failures.

Collection always exports a report file (`--export`) and a second, cheap `ncu --import` turns it
into CSV: program output can then never mix with the table, and the same report yields the raw
page (metrics) and the source page (hot spots). Bounds: `--launch-count` caps the kernels
profiled, `--profile-from-start off` skips warm-up (the runner calls cudaProfilerStart after it),
and every subprocess runs in its own session under a timeout that kills the whole group.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.procs import kill_group

_UNKNOWN_METRIC = (
    re.compile(r"[Ff]ailed to find metric\s+'?\"?(?:regex:)?([\w.]+)"),
    re.compile(r"[Mm]etric\s+'?\"?([\w.]+)'?\"?\s+(?:not found|does not exist|is not (?:supported|available|valid))"),
    re.compile(r"[Uu]nknown metric\s*:?\s*'?\"?([\w.]+)"),
    re.compile(r"[Ii]nvalid metric (?:name\s*)?:?\s*'?\"?([\w.]+)"),
)
_METRIC_NAME_LINE = re.compile(r"^\s*([a-z0-9]+__[a-z0-9_]+)\b")
MAX_METRIC_RETRIES = 4


@dataclass
class NcuPlan:
    """What one ncu collection profiles: sections, explicit metrics, which kernels, how many."""

    sections: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    launch_count: int = 32
    kernel_names: list[str] = field(default_factory=list)  # function names; empty = every kernel
    launch_skip: int = 0  # matching launches not profiled first (warm-up is already outside the profiled range)


@dataclass
class RunResult:
    """Outcome of one tool subprocess; `error` is set (a sentence) whenever it did not succeed."""

    returncode: int | None
    output: str
    seconds: float
    timed_out: bool = False
    error: str = ""
    kind: str = ""  # "", "missing", "permission", "no_kernels", "unknown_metric", "timeout", "app", "failed"
    report: str = ""  # a collection's report file (`--export`), where ncu wrote it

    @property
    def ok(self) -> bool:
        return not self.error


def find_ncu(explicit: str | None = None) -> str | None:
    """ncu from the config, $KW_NCU, PATH, or the usual CUDA / Nsight Compute install folders."""
    for candidate in (explicit, os.environ.get("KW_NCU")):
        if candidate:
            return candidate if Path(candidate).is_file() or shutil.which(candidate) else None
    found = shutil.which("ncu")
    if found:
        return found
    roots = [Path("/usr/local/cuda/bin/ncu")] + sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"))
    return next((str(p) for p in roots if p.is_file()), None)


def kernel_filter(names: list[str]) -> list[str]:
    """`--kernel-name` options selecting exactly `names` (function base names); [] if none is safe.

    Names with characters beyond identifiers and `::` are not matched by regex (templates and
    operators would need escaping ncu may read differently); then no filter is applied and
    `--launch-count` alone bounds the run.
    """
    if not names or any(not re.fullmatch(r"[A-Za-z_][\w:]*", n) for n in names):
        return []
    return ["--kernel-name-base", "function", "--kernel-name", "regex:^(" + "|".join(names) + ")$"]


def collect_command(ncu: str, plan: NcuPlan, report_base: str | Path, program: list[str]) -> list[str]:
    """The ncu command that profiles `program` and writes `<report_base>.ncu-rep`.

    Bounded replay: only launches inside the runner's profiler range (`--profile-from-start off`),
    of the selected kernels, `--launch-skip` then `--launch-count` of them, each replayed alone
    (`--replay-mode kernel`: one pass per group of counters, memory saved and restored between
    passes); ncu's analysis rules are not run (`--apply-rules no`: nothing reads their output).
    """
    cmd = [
        ncu, "--target-processes", "all", "--profile-from-start", "off",
        "--launch-skip", str(max(0, plan.launch_skip)), "--launch-count", str(max(1, plan.launch_count)),
        "--replay-mode", "kernel", "--apply-rules", "no",
        "--export", str(report_base), "--force-overwrite",
    ]
    for section in plan.sections:
        cmd += ["--section", section]
    if plan.metrics:
        cmd += ["--metrics", ",".join(plan.metrics)]
    cmd += kernel_filter(plan.kernel_names)
    return cmd + list(program)


def import_command(ncu: str, report: str | Path, page: str = "raw") -> list[str]:
    """CSV export of a report: `raw` (every metric, base units) or `source` (SASS with samples)."""
    cmd = [ncu, "--import", str(report), "--csv", "--page", page, "--print-kernel-base", "function"]
    if page == "raw":
        cmd += ["--print-units", "base"]
    if page == "source":
        cmd += ["--print-source", "sass"]
    return cmd


def query_metrics_command(ncu: str) -> list[str]:
    return [ncu, "--query-metrics"]


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names listed by `ncu --query-metrics` (first word of each table line)."""
    return {m.group(1) for line in text.splitlines() if (m := _METRIC_NAME_LINE.match(line))}


def filter_metrics(names: list[str], available: set[str]) -> tuple[list[str], list[str]]:
    """(kept, dropped): names whose base (before the first '.') the device lists.

    An empty `available` (the query failed) keeps everything; unknown names are then caught by
    the retry in `run_collection`.
    """
    if not available:
        return list(names), []
    kept = [n for n in names if n.split(".")[0] in available]
    return kept, [n for n in names if n not in kept]


def unknown_metric(output: str) -> str | None:
    """The metric name ncu complained about, if the failure was an unknown metric."""
    for pattern in _UNKNOWN_METRIC:
        if match := pattern.search(output):
            return match.group(1)
    return None


def unknown_section(output: str, sections: list[str]) -> str | None:
    """A requested section that an ncu `==ERROR==` line names (ncu does not ship it)."""
    errors = [line for line in output.splitlines() if "==ERROR==" in line and "section" in line.lower()]
    return next((s for s in sections for line in errors if s in line), None)


def explain_failure(returncode: int | None, output: str, timed_out: bool, timeout_s: float) -> tuple[str, str]:
    """(kind, one-sentence explanation) of a failed ncu run, quoting the decisive line."""
    if timed_out:
        return "timeout", f"ncu did not finish within {timeout_s:.0f} s and was stopped"
    if "ERR_NVGPUCTRPERM" in output:
        return "permission", (
            "ncu may not read the GPU performance counters on this machine (ERR_NVGPUCTRPERM); "
            "an administrator must allow profiling (NVreg_RestrictProfilingToAdminUsers=0) or run as root"
        )
    if name := unknown_metric(output):
        return "unknown_metric", f"ncu does not know the metric {name} on this device"
    if "No kernels were profiled" in output:
        return "no_kernels", "ncu profiled no kernel: the forward pass launched none inside the profiled range"
    errors = [line.strip() for line in output.splitlines() if "==ERROR==" in line]
    if any("application returned an error" in e.lower() for e in errors):
        return "app", "the candidate failed while running under ncu: " + _tail(output)
    detail = errors[0] if errors else _tail(output)
    return "failed", f"ncu exited with status {returncode}: {detail}"


def _tail(text: str, limit: int = 400) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-4:])[-limit:] or "(no output)"


def run_bounded(cmd: list[str], timeout_s: float, env: dict | None = None, cwd: str | None = None) -> RunResult:
    """Run `cmd` in its own session; on timeout kill the whole process group (ncu and its target)."""
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return RunResult(None, "", 0.0, error=f"cannot start {cmd[0]}: {exc}", kind="missing")
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        output, _ = proc.communicate()
        timed_out = True
    seconds = time.perf_counter() - start
    result = RunResult(proc.returncode, output or "", seconds, timed_out)
    if timed_out or proc.returncode != 0:
        result.kind, result.error = explain_failure(proc.returncode, result.output, timed_out, timeout_s)
    return result


def ncu_env(base: dict | None = None) -> dict:
    """Environment for ncu: C locale so numbers print as `1,234.5`, never `1.234,5`."""
    env = dict(os.environ if base is None else base)
    env.update({"LC_ALL": "C", "LANG": "C"})
    return env


def run_collection(ncu: str, plan: NcuPlan, report_base: Path, program: list[str], timeout_s: float,
                   env: dict | None = None, executor=None) -> tuple[RunResult, list[str]]:
    """Collect, dropping metrics and sections ncu rejects (at most MAX_METRIC_RETRIES); (result, dropped).
    `executor` starts ncu (`executor.LocalExecutor` by default)."""
    if executor is None:
        from .executor import LocalExecutor  # noqa: PLC0415 -- cycle: executor.py imports ncu's commands at its top (KNOWN_CYCLES)

        executor = LocalExecutor()
    dropped: list[str] = []
    deadline = time.perf_counter() + timeout_s
    seconds = 0.0
    while True:
        remaining = max(1.0, deadline - time.perf_counter())
        result = executor.collect(ncu, plan, report_base, program, remaining, dict(os.environ if env is None else env))
        seconds += result.seconds
        rejected = None
        if not result.ok and not result.timed_out:
            rejected = unknown_metric(result.output) or unknown_section(result.output, plan.sections)
        known = rejected in plan.metrics or rejected in plan.sections
        if not rejected or not known or len(dropped) >= MAX_METRIC_RETRIES:
            result.seconds = seconds
            return result, dropped
        dropped.append(rejected)
        plan = NcuPlan([s for s in plan.sections if s != rejected], [m for m in plan.metrics if m != rejected],
                       plan.launch_count, plan.kernel_names, plan.launch_skip)
