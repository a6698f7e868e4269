"""The machine a verdict was measured on, recorded beside every timing.

Numbers from different GPUs, drivers or library versions are not comparable; the verdict carries
this record so a reader can tell. Every probe is guarded: a missing tool leaves its field empty,
and `environment()` never raises.
"""
from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import socket
import subprocess
from typing import Any, Callable

TOOLS_FILE = "tools.json"  # under cache_root(): `nvcc --version` & co., keyed by the binary's identity


_DEFAULT_ROOT: list[str] = []  # set by a worker for its own process (use_cache_root)


def cache_root(cache_dir: str | os.PathLike | None = None):
    """Where the judge keeps builds, baselines and peaks: `cache_dir` if given, else the folder this
    process was told (`use_cache_root`: a worker, whose environment names no cache), else
    $KW_CACHE_DIR, else ~/.cache/kernelwright."""
    from pathlib import Path

    chosen = cache_dir or (_DEFAULT_ROOT[0] if _DEFAULT_ROOT else None) or os.environ.get("KW_CACHE_DIR") \
        or Path.home() / ".cache" / "kernelwright"
    return Path(chosen).expanduser()


def use_cache_root(cache_dir: str | os.PathLike | None) -> None:
    """The default of `cache_root()` in this process (the worker reads it from its request)."""
    _DEFAULT_ROOT[:] = [str(cache_dir)] if cache_dir else []


def _safe(probe: Callable[[], Any], default: Any = None) -> Any:
    try:
        return probe()
    except Exception:  # a probe that fails only leaves its field empty
        return default


def _run(*command: str) -> str:
    if not shutil.which(command[0]):
        return ""
    done = subprocess.run(list(command), capture_output=True, text=True, timeout=20)
    return done.stdout.strip() if done.returncode == 0 else ""


def tool_output(executable: str | None, *args: str, timeout: float = 30.0) -> str:
    """stdout (else stderr) of `executable args`, e.g. `nvcc --version`; "" when it cannot run.

    Every judge worker is a fresh process, and asking nvcc for its version costs a process start
    (tenths of a second on a loaded machine). The answer is kept on disk in `<cache>/tools.json`,
    keyed by the binary's resolved path, size and modification time and the arguments, so a new
    toolchain (or a changed PATH pointing elsewhere) is asked again.
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


def _tools_path():
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


def _proc_driver_version() -> str:
    """The kernel module's release from /proc (no process to start): "NVRM version: ... 580.159.04 ..."."""
    from pathlib import Path

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
        release = _safe(lambda: _run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"), "")
    if release:
        return release.splitlines()[0].strip()
    return _safe(_libcuda_version, "") or ""


def _libcuda_version() -> str:
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    version = ctypes.c_int()
    if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return ""
    return f"cuda-{version.value}"


@functools.lru_cache(maxsize=None)
def nvcc_version() -> str:
    """'13.0.88' from `nvcc --version`, or '' when nvcc is not found."""
    from .compile import nvcc_path

    nvcc = _safe(nvcc_path)
    text = _safe(lambda: tool_output(nvcc, "--version"), "") if nvcc else ""
    for part in text.replace(",", " ").split():
        if part.startswith("V") and part[1:2].isdigit():
            return part[1:]
    return ""


def device_name(device: str = "cuda") -> str:
    """The GPU's name, or 'cpu:<processor>' for CPU runs: the key for cached peaks and baselines."""
    import torch

    if str(device).startswith("cuda") and _safe(torch.cuda.is_available, False):
        return _safe(lambda: torch.cuda.get_device_name(torch.device(device)), "cuda") or "cuda"
    return f"cpu:{platform.processor() or platform.machine()}"


def device_name_without_torch(device: str = "cuda") -> str:
    """`device_name(device)` without importing torch or touching CUDA: the processor for the CPU,
    nvidia-smi's name of the visible GPU `device` means; "" when nvidia-smi cannot say."""
    if not str(device).startswith("cuda"):
        return f"cpu:{platform.processor() or platform.machine()}"
    index = int(str(device).split(":")[1]) if ":" in str(device) else 0
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if "CUDA_VISIBLE_DEVICES" in os.environ and index >= len(visible):
        return ""
    target = visible[index] if visible else str(index)
    listed = _safe(lambda: _run("nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", target), "")
    return listed.splitlines()[0].strip() if listed else ""


def _gpu(device: str) -> dict[str, Any]:
    import torch

    dev = torch.device(device)
    props = torch.cuda.get_device_properties(dev)
    return {
        "gpu": props.name,
        "capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_gb": round(props.total_memory / 2**30, 1),
        "l2_mb": round(getattr(props, "L2_cache_size", 0) / 2**20, 1),
        "cuda_runtime": torch.version.cuda,
        "driver": driver_version(),
    }


def environment(device: str = "cuda") -> dict[str, Any]:
    """GPU, capability, SM count, memory, L2, driver, CUDA runtime, torch, triton, python, nvcc, host."""
    import torch

    env: dict[str, Any] = {
        "device": str(device),
        "torch": torch.__version__,
        "triton": _safe(lambda: __import__("triton").__version__, ""),
        "numpy": _safe(lambda: __import__("numpy").__version__, ""),
        "python": platform.python_version(),
        "nvcc": nvcc_version(),
        "hostname": _safe(socket.gethostname, ""),
        "platform": _safe(platform.platform, ""),
    }
    if str(device).startswith("cuda") and _safe(torch.cuda.is_available, False):
        env.update(_safe(lambda: _gpu(device), {}) or {})
    else:
        env["cpu"] = _safe(lambda: platform.processor() or platform.machine(), "")
        env["cpu_threads"] = _safe(torch.get_num_threads, None)
    return env
