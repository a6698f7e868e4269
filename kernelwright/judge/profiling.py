"""The profile of a passing candidate (`config.profile`): kernelwright.profile, run by the judge.

`profile_candidate` runs its own processes (a timeline pass, one ncu collection) and never raises
for a bad candidate or a missing tool: what cannot run becomes a finding in the report. Under the
judge's supervisor those processes are started by the supervisor, each confined afresh
(`profilehost`). The judge runs it with the verdict's sizes and seed, within the candidate's time
budget, and through a stand-in interpreter (`cached_run`) that installs the judge's build cache in
those processes, so a CUDA extension built and hashed for this verdict is loaded there, not built
again. ncu profiles the kernels that take most of the time in the verdict's per-kernel split
(`verdict.kernels`, from the timing stage; a batch profile job, which does not time, is given its
stored verdict's in `config.profile_kernels`), and the list of counters ncu offers is kept in the
judge's cache folder. A candidate whose kernels were profiled is compared with the reference's own
kernels, profiled once per problem, target and software versions and kept in the same folder
(`refprofile`, profile/reference.py). Whatever goes wrong, the verdict keeps everything else it
holds: this returns a record that says why, and never raises.
"""
from __future__ import annotations

import sys
from pathlib import Path

from kernelwright import profile as kwprofile  # its functions looked up when called (tests replace them)

from . import service
from .cachedir import cache_root
from .profilehost import ServiceExecutor
from .refprofile import add_reference


def profile_report(problem_path, candidate_path, verdict, config, device: str) -> dict:
    """`ProfileReport.to_dict()` for the candidate, or a record ("unavailable", "failed") saying why."""
    try:
        settings = kwprofile.ProfileConfig(overrides=dict(verdict.overrides), shrink=False, seed=config.seed,
                                 device="cuda" if device.startswith("cuda") else "cpu",
                                 timeout_s=config.timeout_s, budget_s=0.9 * config.timeout_s,
                                 python=build_cache_python(cache=cache_root(config.cache_dir)), artifacts_dir=None,
                                 cache_dir=profile_cache(config))
        executor = profile_executor()
        report = kwprofile.profile_candidate(problem_path, candidate_path, settings, executor=executor,
                                   kernel_shares=kernel_shares(verdict, config))
    except Exception as exc:  # noqa: BLE001 -- the verdict is already made: a profile must not unmake it
        return failed_record(f"the profile stopped: {type(exc).__name__}: {exc}")
    if report.status == "ok":  # kernels with counters: they are compared with the reference's own
        try:
            add_reference(report, problem_path, dict(verdict.overrides), config.seed, settings, kwprofile.profile_candidate,
                          executor, python_in=lambda folder: build_cache_python(folder, cache_root(config.cache_dir)))
        except Exception as exc:  # noqa: BLE001 -- the candidate's report stands without the reference's
            report.notes.append(f"The reference's profile could not be added: {type(exc).__name__}: {exc}")
    return report.to_dict()


def kernel_shares(verdict, config) -> dict | None:
    """The per-kernel split ncu's kernels are picked from: this verdict's (its timing stage), else the one
    the evaluation was given (`config.profile_kernels`: a profile job of the batch runner, which does not
    time, gets its stored verdict's), else None (the profile's own timeline)."""
    return getattr(verdict, "kernels", None) or getattr(config, "profile_kernels", None) or None


def failed_record(why: str) -> dict:
    """What a verdict's `profile` holds when no report came back: the reason, as a notice prompts show."""
    return {"status": "failed", "findings": [{"text": f"The candidate was not profiled: {why}.", "kind": "notice"}],
            "notes": [why]}


def profile_cache(config) -> str | None:
    """The profile's folder in the judge's cache (what ncu lists per device), or None where unknown."""
    try:
        return str(cache_root(getattr(config, "cache_dir", None)) / "profile")
    except Exception:  # noqa: BLE001 -- a cache is an optimisation
        return None


def profile_executor():
    """Under a supervisor, the profile's processes are started by it, each confined afresh with its own
    /proc entries writable (`profilehost`): a process this confined worker started could not use CUDA.
    Without one (no service), they are started here."""
    if not service.available():
        return None

    return ServiceExecutor()


def build_cache_python(folder: Path = Path("."), cache: Path | None = None) -> str:
    """A `#!python` shim (in the worker's scratch folder) that runs `-m MODULE` with the build cache
    of `cache` (the judge's cache root, named in the shim: the profile's processes have no
    $KW_CACHE_DIR and a scratch HOME, and without it looked in another folder, missed the build the
    runner had published, asked to build, and were refused: every CUDA candidate's profile failed
    in 5 s on the H200, 2026-11-28)."""
    shim = folder / "kw_python"
    root = str(Path(cache if cache is not None else cache_root()).resolve())
    text = f"#!{sys.executable}\nfrom kernelwright.judge.cached_run import main\nmain({root!r})\n"
    if not shim.exists() or shim.read_text() != text:
        shim.write_text(text)
        shim.chmod(0o755)
    return str(shim.resolve())
