"""A new run's start: torch.compile's kernels written as a candidate (`kernelwright seed`,
docs/seed.md) before round 1, when the search setting `seed_start` is on.

The seed is written here, in the driver (it runs inductor on the reference's Model: trusted code,
never a candidate), and stored with the run's settings (`settings["start"]`): a resume and a replay
read it from there, never write it again. What cannot be written is stored as the reason, logged,
and the run goes on from the reference; the engine judges what was written (search/start.py).

A seed is specialized to the device and the sizes it was written for, so it is written where it
will be judged: on this machine's GPU, or on its CPU (the interpreter) when the judge runs on a
CPU here. A run judged elsewhere (batch, Ray) from a machine without a GPU gets no seed.
"""
from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from kernelwright.seed import SeedError, SeedOptions, seed_problem

from ..start import Start

log = logging.getLogger("kernelwright.search")


def write_start(problem_path: str, judge: Any, eval_mode: str) -> dict[str, Any]:
    """{"code": the seed's source} or {"reason": why none was written}; never raises for a problem
    the seed cannot export (`judge` is the run's JudgeConfig: its rule set, device and sizes)."""
    device, why_not = _device(judge.device, eval_mode, judge.shrink)
    if why_not:
        return {"reason": why_not}
    if device == "cpu":  # Triton has no CPU backend: the seed's kernels run under the interpreter
        os.environ.setdefault("TRITON_INTERPRET", "1")
    options = SeedOptions(rules=judge.rules, overrides=dict(judge.overrides or {}), device=device)
    with tempfile.TemporaryDirectory(prefix="kw-start-") as folder:
        try:
            seed = seed_problem(problem_path, Path(folder) / "seed_model_new.py", options)
        except SeedError as exc:
            return {"reason": f"no seed written: {exc}"}
        except Exception as exc:  # noqa: BLE001 -- inductor's own failures: the run goes on without a seed
            return {"reason": f"writing the seed failed: {type(exc).__name__}: {str(exc)[:500]}"}
    return {"code": seed.source, "device": device, "kernels": list(seed.kernels), "notes": list(seed.notes)}


def _device(judge_device: str, eval_mode: str, judge_shrink: bool | None) -> tuple[str, str]:
    """(where to write the seed, "") or ("", why it is not written here)."""
    import torch  # noqa: PLC0415 -- search/drivers/ stay torch-free at import (the CLI loads them per command; torch takes 1-2 s): loaded to ask whether this machine has a GPU

    here = torch.cuda.is_available()
    if judge_device == "cpu" or (judge_device == "auto" and not here and eval_mode == "local"):
        device = "cpu"
    elif here:
        device = "cuda"
    else:
        device = ""
    if device and judge_shrink is not None and judge_shrink != (device == "cpu"):
        return "", (f"the judge runs {'shrunk' if judge_shrink else 'at full size'} on the {device} and a seed is "
                    f"written at the sizes the judge uses there by default ({'shrunk' if device == 'cpu' else 'full'})")
    if device:
        return device, ""
    if judge_device == "cuda":
        return "", "the judge runs on a GPU and this machine has none: a seed is written where it is judged"
    if eval_mode != "local":
        return "", (f"the run is judged elsewhere ({eval_mode}) and this machine has no GPU: a seed is written on "
                    "the device it is judged on (`kernelwright seed` there)")
    return "", f"the judge's device {judge_device!r} is not one a seed is written for"


def stored_start(stored: dict[str, Any]) -> Start | None:
    """The start a stored run was given (None: none, or the reason it has none)."""
    code = (stored.get("start") or {}).get("code")
    return Start(code=code) if code else None


def announce(start: dict[str, Any]) -> None:
    """The run log's line on the start."""
    if start.get("code"):
        log.info("start: torch.compile's kernels written as a seed (%s kernel(s), on %s); judged first",
                 len(start.get("kernels") or []), start.get("device"))
    else:
        log.warning("no seed to start from: %s; the search starts from the reference", start.get("reason"))


def judged_start(start: dict[str, Any] | None) -> None:
    """The run log's line on a seed that failed the judge (the search went on from the reference)."""
    if start and start.get("status") not in ("pass", "pending"):
        log.warning("the seed %s did not pass the judge (%s): the search went on from the reference; %s",
                    start.get("id"), start.get("status"), start.get("reason") or "no reason given")
