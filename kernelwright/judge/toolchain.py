"""The toolchain a build or a verdict depends on, found without importing torch or touching CUDA:
the compilers and their versions, the driver, torch's version, and the CUDA arch list builds are
made (and hashed) for.

Read by the build cache (`compile`), the trusted builder and supervisor (which never import
torch), the pool (which never creates a CUDA context) and the environment record (`env`). Tool
versions are kept on disk (`<cache>/tools.json`): every judge worker is a fresh process, and
asking nvcc for its version costs a process start. Imports only the stdlib and `cachedir`.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .cachedir import cache_root

TOOLS_FILE = "tools.json"  # under cache_root(): `nvcc --version` & co., keyed by the binary's identity


# ---------------------------------------------------------------- running tools


def run_tool(*command: str) -> str:
    """stdout of `command` when it succeeds, "" when it is missing or fails (20 s at most)."""
    if not shutil.which(command[0]):
        return ""
    done = subprocess.run(list(command), capture_output=True, text=True, timeout=20)
    return done.stdout.strip() if done.returncode == 0 else ""


def tool_output(executable: str | None, *args: str, timeout: float = 30.0) -> str:
    """stdout (else stderr) of `executable args`, e.g. `nvcc --version`; "" when it cannot run.

    The answer is kept on disk in `<cache>/tools.json`, keyed by the binary's resolved path, size
    and modification time and the arguments, so a new toolchain (or a changed PATH pointing
    elsewhere) is asked again.
    """
    path = shutil.which(executable) if executable else None
    if not path:
        return ""
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError:
        return ""
    key = json.dumps([real, info.st_size, info.st_mtime_ns, list(args)])
    cached = _read_tools().get(key)
    if isinstance(cached, str):
        return cached
    try:
        done = subprocess.run([path, *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return ""
    text = (done.stdout or done.stderr).strip()
    _write_tool(key, text)
    return text


def _tools_path() -> Path:
    return cache_root() / TOOLS_FILE


def _read_tools() -> dict:
    try:
        data = json.loads(_tools_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_tool(key: str, text: str) -> None:
    """Atomic rewrite; two workers writing at once may lose an entry, which is only asked again."""
    path = _tools_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read_tools()
        data[key] = text
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)
    except OSError:
        pass


def _safe(probe, default: Any = None) -> Any:
    try:
        return probe()
    except Exception:  # noqa: BLE001 - a probe that fails only leaves its answer empty
        return default


# ---------------------------------------------------------------- driver and compilers


def _proc_driver_version() -> str:
    """The kernel module's release from /proc (no process to start): "NVRM version: ... 580.159.04 ..."."""
    text = Path("/proc/driver/nvidia/version").read_text()
    for part in text.split():
        pieces = part.split(".")
        if len(pieces) >= 2 and all(p.isdigit() for p in pieces):
            return part
    return ""


@functools.lru_cache(maxsize=None)
def driver_version() -> str:
    """The NVIDIA driver release (e.g. "570.124.06") from /proc/driver/nvidia or nvidia-smi, else
    the CUDA driver API version from libcuda ("cuda-12080"), else ""."""
    release = _safe(_proc_driver_version, "") or ""
    if not release:
        release = _safe(lambda: run_tool("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"), "")
    if release:
        return release.splitlines()[0].strip()
    return _safe(_libcuda_version, "") or ""


def _libcuda_version() -> str:
    lib = ctypes.CDLL("libcuda.so.1")
    version = ctypes.c_int()
    if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return ""
    return f"cuda-{version.value}"


def nvcc_path() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and Path(home, "bin", "nvcc").exists():
        return str(Path(home, "bin", "nvcc"))
    return shutil.which("nvcc") or (str(Path("/usr/local/cuda/bin/nvcc")) if Path("/usr/local/cuda/bin/nvcc").exists() else None)


@functools.lru_cache(maxsize=None)
def nvcc_version() -> str:
    """'13.0.88' from `nvcc --version`, or '' when nvcc is not found."""
    nvcc = _safe(nvcc_path)
    text = _safe(lambda: tool_output(nvcc, "--version"), "") if nvcc else ""
    for part in text.replace(",", " ").split():
        if part.startswith("V") and part[1:2].isdigit():
            return part[1:]
    return ""


@functools.lru_cache(maxsize=None)
def tool_version(*command: str) -> str:
    """`command` output, cached per process and on disk (tool_output): workers are fresh processes."""
    return tool_output(command[0], *command[1:])


def toolchain() -> dict[str, str]:
    """Everything outside the source that decides the built binary. Read without importing torch:
    the judge's supervisor hashes builds too, and never imports torch."""
    nvcc = nvcc_path()
    torch_version = installed_torch()
    return {
        "nvcc": tool_version(nvcc, "--version") if nvcc else "",
        "cxx": (tool_version(os.environ.get("CXX", "c++"), "--version").splitlines() or [""])[0],
        "torch": torch_version.get("__version__", ""),
        "torch_cuda": str(torch_version.get("cuda")),
        "python": platform.python_version(),
        "abi": sys.implementation.cache_tag,
    }


@functools.lru_cache(maxsize=None)
def installed_torch() -> dict[str, Any]:
    """`torch.version`'s constants (`__version__`, `cuda`, ...), read from its file without importing
    torch (a few milliseconds instead of seconds); from torch itself when the file is not there."""
    try:
        spec = importlib.util.find_spec("torch")
        folder = Path(list(spec.submodule_search_locations)[0])
        namespace: dict[str, Any] = {}
        exec(compile((folder / "version.py").read_text(), str(folder / "version.py"), "exec"), namespace)
        return {k: v for k, v in namespace.items() if k in ("__version__", "cuda", "hip", "git_version")}
    except Exception:  # noqa: BLE001 - an unusual install: ask torch
        import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

        return {"__version__": torch.__version__, "cuda": torch.version.cuda}


# ---------------------------------------------------------------- the CUDA arch list


def arch_list_for(device_capability) -> str:
    """TORCH_CUDA_ARCH_LIST for one capability (9, 0) -> "9.0", or several -> "8.0;9.0"."""
    caps = [device_capability] if isinstance(device_capability[0], int) else list(device_capability)
    return ";".join(sorted({f"{major}.{minor}" for major, minor in caps}))


def current_arch_list() -> str:
    """What torch will build for: TORCH_CUDA_ARCH_LIST, else the visible devices, else "none"."""
    env = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if env and env != "native":
        return env
    try:
        import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

        caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - no driver, CUDA hidden: nothing to ask
        caps = []
    return arch_list_for(caps) if caps else "none"


@functools.lru_cache(maxsize=None)
def smi_arch_list() -> str:
    """Compute capabilities of the GPUs nvidia-smi lists ("9.0"), without creating a CUDA context
    (the judge's parent process must not hold one); "" without nvidia-smi."""
    try:
        listed = run_tool("nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader")
    except Exception:  # noqa: BLE001 - no driver, a hung tool: nothing detected
        return ""
    caps = sorted({line.strip() for line in listed.splitlines() if line.strip()})
    return ";".join(caps)


def resolve_arch_list(explicit: str | None = None) -> str:
    """The one TORCH_CUDA_ARCH_LIST both phases of a judgement build for: `explicit` (the run's
    `cuda_arch_list`), else the environment's, else the GPUs' capabilities, else "" (no GPU)."""
    env = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if explicit:
        return explicit
    if env and env != "native":
        return env
    return smi_arch_list()


def pin_arch_list() -> str:
    """Set TORCH_CUDA_ARCH_LIST to what torch would detect when it is unset, so that the arch in the
    build hash is exactly the arch torch builds for (torch's own default adds +PTX); returns it."""
    env = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if env and env != "native":
        return env
    os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
    detected = current_arch_list()
    if detected != "none":
        os.environ["TORCH_CUDA_ARCH_LIST"] = detected
    return detected


def precompile_env(cache_dir: str | os.PathLike, arch: str) -> dict[str, str]:
    """Environment for a compile worker with CUDA hidden: it must be told the arch to build for."""
    cache = Path(cache_dir).expanduser()
    return {
        "TORCH_CUDA_ARCH_LIST": arch,
        "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "CUDA_VISIBLE_DEVICES": "",
    }
