"""The profile of a passing candidate (`config.profile`): kernelwright.profile, run by the judge.

`profile_candidate` runs its own processes (a timeline pass, ncu passes) and never raises for a
bad candidate or a missing tool: what cannot run becomes a finding in the report. Under the judge's
supervisor those processes are started by the supervisor, each confined afresh (`profilehost`). The judge runs it
with the verdict's sizes and seed, within the candidate's time budget, and through a stand-in
interpreter (`cached_run`) that installs the judge's build cache in those processes, so a CUDA
extension built and hashed for this verdict is loaded there, not built again.
"""
from __future__ import annotations

import sys
from pathlib import Path


def profile_report(problem_path, candidate_path, verdict, config, device: str) -> dict:
    """`ProfileReport.to_dict()` for the candidate, or an "unavailable" record saying why."""
    try:
        from kernelwright.profile import ProfileConfig, profile_candidate
    except ImportError as exc:
        return {"status": "unavailable", "findings": [], "notes": [f"kernelwright.profile is not importable: {exc}"]}
    settings = ProfileConfig(overrides=dict(verdict.overrides), shrink=False, seed=config.seed,
                             device="cuda" if device.startswith("cuda") else "cpu",
                             timeout_s=config.timeout_s, budget_s=0.9 * config.timeout_s,
                             python=build_cache_python(), artifacts_dir=None)
    return profile_candidate(problem_path, candidate_path, settings, executor=profile_executor()).to_dict()


def profile_executor():
    """Under a supervisor, the profile's processes are started by it, each confined afresh with its own
    /proc entries writable (`profilehost`): a process this confined worker started could not use CUDA.
    Without one (no service), they are started here."""
    from . import service

    if not service.available():
        return None
    from .profilehost import ServiceExecutor

    return ServiceExecutor()


def build_cache_python(folder: Path = Path(".")) -> str:
    """A `#!python` shim (in the worker's scratch folder) that runs `-m MODULE` with the build cache."""
    shim = folder / "kw_python"
    if not shim.exists():
        shim.write_text(f"#!{sys.executable}\nfrom kernelwright.judge.cached_run import main\nmain()\n")
        shim.chmod(0o755)
    return str(shim.resolve())
