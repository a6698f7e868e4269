"""Who starts the processes of a profile: the candidate's runs, ncu over them, ncu on its own.

`LocalExecutor` (the default) starts them itself with `ncu.run_bounded`. The judge passes its own
executor (`kernelwright.judge.profilehost.ServiceExecutor`) that asks its trusted supervisor to start
them, so every process that runs the candidate is confined afresh with its own /proc entries
writable (CUDA needs them; a process the confined worker started could not be given its own).
Every method returns a `RunResult` whose `error`/`kind` say why it failed; `collect` also names the
report file ncu wrote (`RunResult.report`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

from .ncu import NcuPlan, RunResult, collect_command, ncu_env, run_bounded


class Executor(Protocol):
    def run(self, cmd: list[str], timeout_s: float, env: dict, cwd: str | None = None) -> RunResult:
        """A program that runs the candidate (the profile runner), under a timeout."""
        ...

    def collect(self, ncu: str, plan: NcuPlan, report_base: Path, program: list[str], timeout_s: float,
                env: dict) -> RunResult:
        """ncu collecting `plan` over `program`; `result.report` is the report file it wrote."""
        ...

    def ncu(self, ncu: str, args: list[str], timeout_s: float) -> RunResult:
        """ncu without a target: `--query-metrics`, or `--import REPORT ...` of a report `collect` wrote."""
        ...


class LocalExecutor:
    """Starts every process itself (`kernelwright profile`, tests, a judge without a supervisor)."""

    def run(self, cmd: list[str], timeout_s: float, env: dict, cwd: str | None = None) -> RunResult:
        return run_bounded(cmd, timeout_s, env, cwd)

    def collect(self, ncu: str, plan: NcuPlan, report_base: Path, program: list[str], timeout_s: float,
                env: dict) -> RunResult:
        result = run_bounded(collect_command(ncu, plan, report_base, program), timeout_s, ncu_env(env))
        result.report = f"{report_base}.ncu-rep"
        return result

    def ncu(self, ncu: str, args: list[str], timeout_s: float) -> RunResult:
        return run_bounded([ncu, *args], timeout_s, ncu_env())
