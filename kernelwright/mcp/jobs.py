"""Queries that need torch or the problem's code run in a child process, never in the server.

    python -m kernelwright.mcp.jobs device
    python -m kernelwright.mcp.jobs baseline PROBLEM [--sizes JSON] [--device auto|cuda|cpu]

Each prints one JSON object on stdout. The server stays free of CUDA contexts (a long-lived
server holding GPU memory would disturb every timing) and never executes a problem file itself:
`baseline` loads the problem (to shrink it for a CPU, as the judge does) and times the reference
through `kernelwright.judge.baseline`, which runs each measurement in its own process again.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelwright.judge import JudgeConfig
from kernelwright.judge.api import PACKAGE_ROOT
from kernelwright.judge.baseline import get_baselines
from kernelwright.judge.env import environment
from kernelwright.judge.peaks import peaks_for
from kernelwright.judge.sandbox import network_prefix
from kernelwright.problem import load_problem


class JobError(RuntimeError):
    """The child process failed; the message holds the decisive lines of its output."""


def run_job(args: list[str], timeout_s: float, cwd: Path) -> dict[str, Any]:
    """Run `python -m kernelwright.mcp.jobs ARGS` and return its JSON answer."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    try:
        done = subprocess.run([sys.executable, "-m", "kernelwright.mcp.jobs", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise JobError(f"`{args[0]}` did not finish within {timeout_s:.0f} s") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = " | ".join(line for line in done.stderr.strip().splitlines()[-6:] if line.strip())
        raise JobError(f"`{args[0]}` failed (exit {done.returncode}): {tail[-1500:] or 'no output'}")
    return json.loads(lines[-1])


# ---- in the child ------------------------------------------------------------------------------


def device_info() -> dict[str, Any]:
    """What the judge would run on here: the device, its measured (or datasheet) peaks, the tools."""
    import torch  # noqa: PLC0415 -- the server imports this module for the parent's half and stays free of torch (module docstring): torch only in the child


    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    info: dict[str, Any] = {"device": device, "cuda_devices": torch.cuda.device_count() if cuda else 0,
                            "environment": environment(device)}
    peaks = peaks_for(device) if cuda else None
    info["peaks"] = peaks.to_dict() if peaks else None
    info["tools"] = {"nvcc": shutil.which("nvcc"), "ncu": os.environ.get("KW_NCU") or shutil.which("ncu"),
                     "cuobjdump": shutil.which("cuobjdump")}
    info["sandbox_network"] = network_prefix()[1]
    if not cuda:
        info["note"] = ("no CUDA device: Triton candidates run in the interpreter, problem sizes are shrunk, "
                        "and times are CPU wall time (not GPU performance)")
    return info


def baseline(problem: str, sizes: dict[str, Any], device: str) -> dict[str, Any]:
    """Eager (and, on a GPU, torch.compile) times of the reference at the sizes a verdict would use."""
    import torch  # noqa: PLC0415 -- the server imports this module for the parent's half and stays free of torch (module docstring): torch only in the child


    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    shrink = not device.startswith("cuda")
    effective = dict(load_problem(problem, sizes, shrink=shrink).overrides) if shrink else dict(sizes)
    result = get_baselines(problem, effective, JudgeConfig(overrides=dict(sizes)), device)
    return {"device": device, "sizes": effective, "shrunk": shrink and effective != sizes,
            "baselines": asdict(result)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.mcp.jobs")
    sub = parser.add_subparsers(dest="job", required=True)
    sub.add_parser("device")
    base = sub.add_parser("baseline")
    base.add_argument("problem")
    base.add_argument("--sizes", default="{}")
    base.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    if args.job == "device":
        answer = device_info()
    else:
        answer = baseline(args.problem, json.loads(args.sizes), args.device)
    sys.stdout.write(json.dumps(answer, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
