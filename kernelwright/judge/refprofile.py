"""The reference's profile, collected once per problem, target and software versions, and reused.

The comparing findings (profile/reference.py) need the reference's own kernels profiled: its Model
run as a candidate through the same `profile_candidate` (timeline, one ncu collection of its hot
kernels). That costs as much as a candidate's profile, and it is the same for every candidate of a
problem, so the first candidate that needs it collects it and the judge keeps the report in its
cache folder (`<cache>/profile/reference/<problem>__<digest>.json`), under a file lock that makes
concurrent candidates of one problem wait for that collection instead of repeating it. The key is
everything the report depends on: the problem's source, its sizes and seed, the device's name, torch,
triton and the ncu binary, what ncu collects (`needs.collection`), the kernel selection's limits and
the report's schema. Only a report with counters (status ok) is kept: a failed collection is tried
again by the next candidate.

Trust: the reference's processes load the problem only (no candidate code), in a folder made for
them after the candidate's own processes ended, started like the candidate's (the supervisor's
executor, each confined afresh); the stored report is data that the candidates' reports quote.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from kernelwright.files import locked_beside
from kernelwright.profile import needs, querycache, reference
from kernelwright.profile.ncu import find_ncu
from kernelwright.profile.report import OK, SCHEMA_VERSION, ProfileReport

from .baseline import triton_version
from .toolchain import installed_torch

PROTOCOL = 1  # bump when what a reference profile measures changes in a way the key does not show
MIN_BUDGET_S = 20.0  # a reference profile is not started with less of the candidate's profile budget left


def cache_key(problem_path, overrides: dict, seed: int, device_label: str, settings) -> dict[str, Any]:
    """Everything the reference's report depends on (`settings`: the candidate's ProfileConfig)."""
    ncu = find_ncu(settings.ncu_path) or ""
    return {"problem_sha256": hashlib.sha256(Path(problem_path).read_bytes()).hexdigest(),
            "overrides": repr(sorted((overrides or {}).items())), "seed": seed, "device": device_label,
            "torch": installed_torch().get("__version__", ""), "triton": triton_version(),
            "ncu": querycache.key(ncu, device_label) if ncu else "", "use_ncu": settings.use_ncu,
            "collection": repr(needs.collection(settings.source_counters)),
            "limits": dataclasses.asdict(settings.limits()), "calls": [settings.warmup, settings.calls],
            "schema": SCHEMA_VERSION, "protocol": PROTOCOL}


def cache_file(root: str | os.PathLike, problem_path, key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return Path(root) / "reference" / f"{Path(problem_path).stem}__{digest}.json"


def read_cached(path: Path, key: dict[str, Any]):
    """The stored ProfileReport for `key`, or None (absent, another key, unreadable)."""
    try:
        data = json.loads(path.read_text())
        return ProfileReport.from_dict(data["report"]) if data.get("key") == key else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_cached(path: Path, key: dict[str, Any], report) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"key": key, "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                   "report": report.to_dict()}))
    partial.replace(path)


def reference_report(problem_path, key: dict[str, Any], root: str | os.PathLike, settings,
                     profile: Callable[..., Any], executor=None,
                     python_in: Callable[[Path], str] | None = None) -> tuple[Any, str]:
    """(the reference's ProfileReport or None, where it came from or why there is none): from the cache,
    else collected now by `profile` (`profile_candidate`'s signature) and kept when it has counters.
    `python_in(folder)`: the interpreter the reference's processes run, made in their fresh folder (the
    judge's build-cache shim, `profiling.build_cache_python`); None: `settings.python`."""
    path = cache_file(root, problem_path, key)
    cached = read_cached(path, key)  # the common case: no lock needed to read a finished file
    if cached is not None:
        return cached, f"cached ({path.name})"
    with locked_beside(path):
        cached = read_cached(path, key)  # another candidate of the problem collected it meanwhile
        if cached is not None:
            return cached, f"cached ({path.name})"
        with tempfile.TemporaryDirectory(prefix="kw_reference_") as folder:
            candidate = Path(folder) / f"{Path(problem_path).stem}__reference.py"
            candidate.write_text(reference.reference_source(Path(problem_path).read_text()))
            python = python_in(Path(folder)) if python_in else settings.python
            report = profile(problem_path, candidate, dataclasses.replace(settings, python=python), executor=executor)
        if report.status != OK:
            why = next((f.text for f in report.findings if f.kind == "notice"), report.status)
            return None, f"the reference could not be profiled: {why}"
        write_cached(path, key, report)
        return report, f"collected now ({report.overhead_s.get('total', 0.0):.0f} s), kept as {path.name}"


def add_reference(report, problem_path, overrides: dict, seed: int, settings, profile, executor=None,
                  python_in: Callable[[Path], str] | None = None) -> None:
    """Quote the reference's profile in the candidate's `report` (a ProfileReport with counters) and
    compare them; a reference that cannot be had leaves a note and the report as it was."""
    left = settings.budget_s - report.overhead_s.get("total", 0.0)
    if left < MIN_BUDGET_S:
        report.notes.append(f"The reference was not profiled: {left:.0f} s of the profile's budget were left.")
        return
    if not settings.cache_dir:
        report.notes.append("The reference was not profiled: no cache folder to keep it in.")
        return
    start = time.perf_counter()
    key = cache_key(problem_path, overrides, seed, report.device, settings)
    bounded = dataclasses.replace(settings, budget_s=left, timeout_s=min(settings.timeout_s, left))
    found, origin = reference_report(problem_path, key, settings.cache_dir, bounded, profile, executor, python_in)
    report.overhead_s["reference"] = round(time.perf_counter() - start, 3)
    if found is None:
        report.notes.append(origin)
        return
    reference.apply(report, found, origin, settings.max_findings)
