"""Where a user's judge daemon listens, and the key a daemon must match to be used.

The key (`daemon_key`) holds everything a verdict depends on that is fixed when a judge process
starts: kernelwright's version and a digest of its source files, the Python interpreter, the
installed torch/triton/numpy versions (read from their metadata: nothing is imported), the GPU
device nodes, the user, the judge's cache folder and the environment variables the judge, torch,
Triton, CUDA or the interpreter read (`KEY_ENV`, `KEY_PREFIXES`). Its digest names the socket, so
a call never reaches a daemon started under another key: a new one is started, and the old one
ends at its idle timeout (or at once, when it sees its package change on disk).

The socket lies in a folder of the user's own (mode 0700, checked) inside the judge's cache
folder, else (a path too long for a UNIX socket) under the temporary folder. Messages are one
JSON object per line each way (`wire`). Standard library only: the CLI imports this before it knows
whether it will need torch.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from kernelwright import __version__

from .forkserver import IMPORT_ENV, package_digest

ENV_SWITCH = "KW_JUDGE_DAEMON"  # 0/off/no/false: judge in the CLI's own process
ENV_IDLE = "KW_JUDGE_DAEMON_IDLE"  # seconds a daemon waits for its next request before it ends
DEFAULT_IDLE_S = 300.0
PACKAGE = Path(__file__).resolve().parents[2]  # kernelwright/
KEY_ENV = (*IMPORT_ENV, "PATH", "HOME", "TMPDIR", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MALLOC_PERTURB_")
KEY_PREFIXES = ("KW_", "TORCH", "TRITON", "CUDA", "CUBLAS", "CUDNN", "NVIDIA", "PYTORCH", "NCCL", "CC", "CXX",
                "NVCC", "MAX_JOBS")
_NOT_KEY = (ENV_SWITCH, ENV_IDLE)  # how the daemon is used, not what it judges with
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes


class DaemonUnavailable(RuntimeError):
    """No daemon can be used for this call (the reason is shown; the CLI judges in its own process)."""


def enabled(env: dict[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get(ENV_SWITCH, "").strip().lower()
    return value not in ("0", "off", "no", "false")


def idle_seconds(given: float | None = None) -> float:
    if given is not None:
        return float(given)
    try:
        return float(os.environ.get(ENV_IDLE) or DEFAULT_IDLE_S)
    except ValueError:
        return DEFAULT_IDLE_S


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def key_env(env: dict[str, str]) -> dict[str, str]:
    chosen = {k: v for k, v in sorted(env.items()) if (k in KEY_ENV or k.startswith(KEY_PREFIXES)) and k not in _NOT_KEY}
    if "PYTHONPATH" in chosen:
        chosen["PYTHONPATH"] = absolute_path_list(chosen["PYTHONPATH"])
    return chosen


def absolute_path_list(value: str) -> str:
    """A PYTHONPATH with its relative entries made absolute (from this process's folder): a daemon
    runs in another folder, and two calls from two folders with PYTHONPATH=. mean two packages."""
    return os.pathsep.join(str(Path(part).resolve()) if part else part for part in value.split(os.pathsep))


def daemon_key(cache_dir: str | Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """See the module docstring. `cache_dir`: the judge's resolved cache folder."""
    env = dict(os.environ if env is None else env)
    return {
        "kernelwright": __version__, "package": package_digest(PACKAGE), "package_path": str(PACKAGE),
        "python": sys.executable, "python_version": sys.version,
        "torch": _version("torch"), "triton": _version("triton"), "numpy": _version("numpy"),
        "devices": sorted(p.name for p in Path("/dev").glob("nvidia[0-9]*")),
        "uid": os.getuid(), "cache_dir": str(cache_dir), "env": key_env(env),
    }


def key_digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def socket_path(cache_dir: str | Path, digest: str) -> Path:
    """The socket of the daemon with this key digest (its folder made, and checked to be the user's own)."""
    name = f"{digest[:16]}.sock"
    folder = Path(cache_dir) / f"judged-{os.getuid()}"
    if len(str(folder / name)) > _MAX_SOCKET_PATH:
        tag = hashlib.sha256(str(cache_dir).encode()).hexdigest()[:8]
        folder = Path(tempfile.gettempdir()) / f"kw-judged-{os.getuid()}-{tag}"
    own_folder(folder)
    return folder / name


def own_folder(folder: Path) -> None:
    """Make `folder` (0700); raise DaemonUnavailable unless it is a folder only this user can use."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = folder.lstat()
    except OSError as exc:
        raise DaemonUnavailable(f"cannot make the daemon's folder {folder}: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise DaemonUnavailable(f"{folder} is not a folder of this user's alone (mode {oct(info.st_mode & 0o777)}, "
                                f"owner uid {info.st_uid}): not used for the judge daemon's socket")


