"""The run's target on the search side: chosen (--target), detected (local evaluation) or learned
from the evaluation side (a batch folder's device.json), and what prompts get from it.

Every prompt describes the device candidates are judged on, so a run needs its target before its
first prompt. Local evaluation judges here: the target is this machine's GPU (or its CPU, with
Triton in the interpreter). Batch evaluation judges elsewhere: the batch runner records its device
in the folder on first contact; until that file (or --target) is there, the run pauses.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.scheduling import reference_timing
from kernelwright.judge.target import Target, TargetError, detect_target, load_target, read_device_file

from ..problem_info import ProblemInfo
from .errors import RunError

WAITING = (
    "this batch run does not know its evaluation device yet, and every prompt describes it. On the GPU "
    "machine run `kernelwright judge --batch {evals}` (or `python -m kernelwright.judge.scheduling.batch "
    "{evals}`): with no requests yet it only records the device in {evals}/device.json. "
    "Copy that file back and resume with `kernelwright optimize --resume {run_dir}`, or resume with "
    "--target h100 (built-in facts of a known GPU) or --target PATH/device.json")


def target_of_spec(spec: str) -> Target:
    """The target a --target option names, or a usage error that says why not."""
    try:
        return load_target(spec)
    except TargetError as exc:
        raise RunError(f"--target {spec}: {exc}") from None


def _device_file(evals_dir: Path) -> Target | None:
    try:
        return read_device_file(evals_dir)
    except TargetError as exc:
        raise RunError(str(exc)) from None


def learn(spec: str | None, eval_mode: str, evals_dir: Path, judge_device: str = "auto") -> Target | None:
    """The target from --target, else for a batch run its folder's device file (None while there is
    none), else this machine's device (local evaluation)."""
    if spec:
        return target_of_spec(spec)
    if eval_mode == "batch":
        return _device_file(evals_dir)
    return detect_target(judge_device, measure_peaks=False)


initial_target = learn  # at creation, the same rules apply


def newer_target(current: Any, spec: str | None, eval_mode: str, evals_dir: Path) -> Target | None:
    """A target that should replace `current` from now on (a --target given on resume, or a batch
    folder's device file that differs, e.g. measured facts after built-in ones); else None."""
    if spec:
        found = target_of_spec(spec)
    elif eval_mode == "batch":
        found = _device_file(evals_dir)
    else:
        return None
    if found is None or (current is not None and found.to_dict() == _as_dict(current)):
        return None
    return found


def _as_dict(target: Any) -> dict:
    return target.to_dict() if hasattr(target, "to_dict") else dict(target)


def stored_target(stored: dict[str, Any]) -> Target | None:
    data = stored.get("target")
    return Target.from_dict(data) if isinstance(data, dict) else None


def describe_on(info: ProblemInfo, target: Target) -> ProblemInfo:
    """The problem as judged on `target`: its device line and GPU generation (for skill conditions)."""
    info.device = target.label()
    info.gpu = target.arch or None
    return info


def tolerance_text(judge: dict[str, Any], dtypes: list[str]) -> str:
    """The judge's correctness thresholds for the problem's dtypes, in one sentence for the rules."""
    config = JudgeConfig.from_dict(judge) if judge else JudgeConfig()
    parts = []
    for dtype in dtypes or ["float32"]:
        atol, rel_l2 = config.tolerance_for(dtype)
        parts.append(f"{dtype}: every element within |out - ref| <= {atol:g} * S + {atol:g} * |ref| "
                     f"(S = max(1, RMS of the reference output)) and ||out - ref|| / ||ref|| <= {rel_l2:g}")
    return "; ".join(parts)


REFERENCE_REQUEST = "reference"  # a run's reference-timing request in its batch folder (after its prefix)
TIMING_KEYS = ("eager_ms", "compile_ms", "kernels", "eager_label", "device", "note")


def learn_reference_timing(evals_dir: Path, name: str, problem: Any, judge: dict[str, Any]) -> dict[str, Any] | None:
    """What the batch runner measured of the reference before round 1 (`judge.scheduling.reference_timing`):
    {"reference_timing": {eager_ms, compile_ms, kernels, ...}} once it has times, {"reference_timing_note":
    why} once it has none; None while it is not measured yet (the request is written then, once)."""
    found = reference_timing.read_result(evals_dir, name)
    if found is None:
        if not (Path(evals_dir) / f"{name}{reference_timing.REQUEST_SUFFIX}").is_file():
            reference_timing.write_request(evals_dir, name, problem, JudgeConfig.from_dict(judge) if judge
                                           else JudgeConfig())
        return None
    if not found.get("eager_ms"):
        return {"reference_timing_note": str(found.get("unavailable") or "the batch runner measured no eager time")}
    return {"reference_timing": {k: found[k] for k in TIMING_KEYS if found.get(k) not in (None, "", [])}}


def prompt_extra(stored: dict[str, Any]) -> dict[str, Any]:
    """What every AgentContext.extra carries for this run (the tolerances quoted in the rules)."""
    dtypes = (stored.get("problem") or {}).get("dtypes") or []
    extra: dict[str, Any] = {}
    if isinstance(stored.get("reference_timing"), dict):  # measured on the device before round 1 (learn_reference_timing)
        extra["reference_timing"] = dict(stored["reference_timing"])
    try:
        extra["tolerances"] = tolerance_text(stored.get("judge") or {}, dtypes)
    except (TypeError, ValueError):  # a judge config from another version: the rules stay general
        pass
    return extra
