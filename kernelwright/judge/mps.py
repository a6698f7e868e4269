"""A private MPS server for one evaluation: how the checker can time the runner's GPU work.

Two processes on one GPU normally take turns (time slicing): a call whose work alternates between
the checker's context and the runner's pays a context switch each way, ~0.3 ms per call measured
on the H100/H200 machines (docs/benchmarks.md), far above the kernels being timed. Under an MPS
server both processes are clients of one server context: the runner's kernels follow the
checker's stream operations within microseconds (~5 µs per call, the same machines), so the
checker's own CUDA events can time work that only the runner launches.

The supervisor starts the server's control daemon before it forks the checker and the runner
(`start`, `nvidia-cuda-mps-control -d` with a pipe folder of the evaluation's own: no other
program's CUDA work joins it), gives both the same `CUDA_MPS_PIPE_DIRECTORY`, and stops it after
them (`stop`; the tree's clean-up kills what is left). One server per evaluation also keeps a
fault where it belongs: a client's illegal memory access ends the clients of its server, never
another evaluation's (measured: a bystander of another server ran on). The server is started
with the persisting-L2 limit at 0, so no client can set L2 aside to survive the checker's flush.
Where MPS cannot run (no control program, a refused start, switched off with `KW_JUDGE_MPS=0`)
`start` says why and the runner times itself (`checker.link`), which the verdict reports.

Stdlib only (the supervisor does not import torch).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CONTROL = "nvidia-cuda-mps-control"
ENV_SWITCH = "KW_JUDGE_MPS"
_MAX_PIPE_PATH = 80  # the daemon's socket names go below it; sun_path holds 108 bytes
START_TIMEOUT_S = 20.0


@dataclass
class Mps:
    """A started control daemon (`env` for its clients), or why there is none (`note`)."""

    env: dict[str, str] = field(default_factory=dict)
    note: str = ""
    pipe: Path | None = None
    owned_tmp: str | None = None  # a short folder made because the evaluation's path was too long

    @property
    def active(self) -> bool:
        return bool(self.env)


def start(folder: Path) -> Mps:
    """A control daemon with its pipe and log folders under `folder` (made here)."""
    if os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "off", "no", "false"):
        return Mps(note=f"MPS switched off (${ENV_SWITCH}=0)")
    control = shutil.which(CONTROL)
    if control is None:
        return Mps(note=f"{CONTROL} is not installed")
    owned = None
    pipe, log = folder / "pipe", folder / "log"
    if len(str(pipe)) > _MAX_PIPE_PATH:
        owned = tempfile.mkdtemp(prefix="kw-mps-")
        pipe, log = Path(owned) / "pipe", Path(owned) / "log"
    try:
        pipe.mkdir(parents=True, exist_ok=True)
        log.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return Mps(note=f"cannot make the MPS folders: {exc}", owned_tmp=owned)
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(log),
           "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT": "0"}
    try:
        done = subprocess.run([control, "-d"], env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=START_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return Mps(note=f"{CONTROL} -d could not run: {exc}", owned_tmp=owned)
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip()[-300:] or f"exit code {done.returncode}"
        return Mps(note=f"{CONTROL} -d refused: {why}", owned_tmp=owned)
    return Mps(env=env, pipe=pipe, owned_tmp=owned)


def stop(mps: Mps) -> None:
    """Ask the daemon to quit (its server goes with it); what remains is killed with the tree."""
    control = shutil.which(CONTROL)
    if mps.active and control is not None:
        try:
            subprocess.run([control], input="quit\n", env={**os.environ, **mps.env}, capture_output=True,
                           text=True, timeout=START_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            pass
    if mps.owned_tmp:
        shutil.rmtree(mps.owned_tmp, ignore_errors=True)


def client_env(mps: Mps) -> dict[str, str]:
    """What a client (the checker, the runner) needs in its environment to join the server."""
    return {k: v for k, v in mps.env.items() if k.startswith("CUDA_MPS_")}
