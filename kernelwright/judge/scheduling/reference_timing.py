"""The reference's timing on the device, measured when a batch folder is first contacted.

An engineer looks first at how fast the reference runs and which kernels it spends its time in;
a search judged through a batch folder learns that only from its first verdicts, so its round-1
prompts were planned blind. The search (`search/drivers/targets.py`) writes `NAME.reference.json`
into the folder before its first prompt (the problem and the judge settings its candidates will be
judged with, `write_request`); the batch runner, on contact, measures each such problem's baselines
(`measure_folders`) and writes `NAME.reference_timing.json`:

    eager_ms, compile_ms   the eager and torch.compile medians (ms per call)
    kernels                the eager reference's kernels by share of its GPU time (GPU only:
                           `Baselines.kernels`, judge/kernel_times.py's record)
    eager_label, device, measured, errors, unavailable (why there are no times)

The measurement is the candidates' own (`baseline.get_baselines` in a child process with an
evaluation's environment on the pool's first device, `baseline_lane.child_env`), into the cache
their supervisors read, so it is made once and the first candidate finds it cached. The search
stores the record as the run's `reference_timing` (what `targets.prompt_extra` hands the prompts).
Like the baseline lane, it skips a problem whose sizes are shrunk (known only once the problem is
loaded: a CPU evaluation by default) and says so in the record.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ..config import JudgeConfig
from ..request import SourceText
from . import baseline_child, baseline_lane
from .pool import JudgeJob

REQUEST_SUFFIX = ".reference.json"
RESULT_SUFFIX = ".reference_timing.json"
MODULE = "kernelwright.judge.scheduling.reference_timing"  # the child: `python -m MODULE`
MARGIN_S = 60.0  # beyond the baseline processes' own limits: the child's start and imports


def write_request(folder: str | Path, name: str, problem: SourceText | str | Path, config: JudgeConfig) -> Path:
    """NAME.reference.json: the reference of `problem` to time under `config` (the run's judge settings)."""
    data: dict[str, Any] = {"name": name, "config": config.to_dict()}
    if isinstance(problem, SourceText):
        data.update(problem_source=problem.text, problem_name=problem.name)
    else:
        data["problem_path"] = str(problem)
    path = Path(folder) / f"{name}{REQUEST_SUFFIX}"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(data, indent=1))
    return path


def result_path(folder: str | Path, name: str) -> Path:
    return Path(folder) / f"{name}{RESULT_SUFFIX}"


def read_result(folder: str | Path, name: str) -> dict[str, Any] | None:
    """The measured record for NAME (None while there is none, or it cannot be read)."""
    try:
        data = json.loads(result_path(folder, name).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def pending(folder: str | Path) -> list[Path]:
    return sorted(p for p in Path(folder).glob(f"*{REQUEST_SUFFIX}")
                  if not result_path(folder, p.name[: -len(REQUEST_SUFFIX)]).exists())


def measure_folders(folders: list[Path], pool, log=None) -> list[str]:
    """Measure every pending reference request of `folders` (one at a time, before the candidates:
    this is the folder's first contact); the names answered."""
    done = []
    for folder in folders:
        for request in pending(folder):
            name = request.name[: -len(REQUEST_SUFFIX)]
            started = time.perf_counter()
            record = measure_request(request, pool)
            atomic_write(result_path(folder, name), json.dumps(record, indent=1))
            done.append(name)
            if log:
                what = (f"eager {record['eager_ms']:.4g} ms" if record.get("eager_ms")
                        else record.get("unavailable") or "no eager time")
                log(f"reference timing: {name}: {what} ({time.perf_counter() - started:.1f} s)")
    return done


def measure_request(request: Path, pool) -> dict[str, Any]:
    """The record of one reference request; a failure is said in the record, never raised."""
    try:
        data = json.loads(request.read_text())
        config = JudgeConfig.from_dict({**(pool.config.to_dict() if pool.config else {}), **(data.get("config") or {})})
        if data.get("problem_path"):
            problem: Path | SourceText = Path(request.parent, data["problem_path"])
        else:
            problem = SourceText(str(data["problem_source"]), str(data.get("problem_name") or "problem"))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return {"unavailable": f"bad reference request: {type(exc).__name__}: {exc}"}
    scratch = Path(tempfile.mkdtemp(prefix="kw-reference-timing-"))
    try:
        tasks = baseline_lane.plan([JudgeJob(problem, SourceText("", "reference"), config, name="reference")],
                                   pool, scratch)
        if not tasks:
            return {"unavailable": "not measured ahead: its sizes are known only once the problem is loaded "
                                   "(shrunk on a CPU), or its settings ask for no timing"}
        envs = pool.device_envs() if hasattr(pool, "device_envs") else [{}]
        return run_child(tasks[0], baseline_lane.child_env(tasks[0], envs[0], scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_child(task, env: dict[str, str]) -> dict[str, Any]:
    """`python -m kernelwright.judge.scheduling.reference_timing` for one lane task: its record."""
    config = task.config
    limit = config.timeout_s + 2 * config.compile_timeout_s + MARGIN_S
    try:
        done = subprocess.run(baseline_child.command(MODULE, task), capture_output=True, text=True, env=env, cwd=env.get("HOME"), timeout=limit)
    except subprocess.TimeoutExpired:
        return {"unavailable": f"the measurement gave no result within {limit:.0f} s"}
    try:
        return json.loads((done.stdout or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (done.stderr or done.stdout or "").strip()[-500:]
        return {"unavailable": f"the measurement exited with code {done.returncode}: {tail}"}


def record(baselines, device_label: str) -> dict[str, Any]:
    """The file's record from a `Baselines` (verdict.py)."""
    eager, compiled = baselines.eager, baselines.compile_default
    found: dict[str, Any] = {"eager_ms": eager.median_ms if eager else None,
                             "compile_ms": compiled.median_ms if compiled else None,
                             "kernels": list((baselines.kernels or {}).get("kernels") or []),
                             "eager_label": baselines.eager_label, "device": device_label,
                             "measured": {k: {"measured_at": v.get("measured_at"), "steady": v.get("steady", True)}
                                          for k, v in baselines.measured.items()},
                             "errors": dict(baselines.errors)}
    if eager is None:
        found["unavailable"] = "; ".join(f"{k}: {v}" for k, v in baselines.errors.items()) or "no eager time"
    elif eager.note:
        found["note"] = eager.note
    if not found["kernels"] and (baselines.kernels or {}).get("reason"):
        found["kernels_note"] = baselines.kernels["reason"]
    return found


def main(argv: list[str] | None = None) -> int:
    """The child (`baseline_child.main`): the problem's baselines printed in the file's layout."""
    return baseline_child.main(argv, MODULE, lambda done: record(done.baselines, done.label),
                               lambda device: {"unavailable": f"cannot name the device {device!r}"})


if __name__ == "__main__":
    sys.exit(main())
