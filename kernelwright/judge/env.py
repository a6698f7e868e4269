"""The machine a verdict was measured on, recorded beside every timing.

Numbers from different GPUs, drivers or library versions are not comparable; the verdict carries
this record so a reader can tell. Every probe is guarded: a missing tool leaves its field empty,
and `environment()` never raises. Tools and their versions are `toolchain`'s; where the caches
live is `cachedir`'s (neither imports this module).
"""
from __future__ import annotations

import os
import platform
import socket
from typing import Any, Callable

from .cachedir import cache_root, use_cache_root  # noqa: F401 - this module's names since before
from .toolchain import TOOLS_FILE, driver_version, nvcc_version, tool_output  # noqa: F401
from .toolchain import run_tool as _run


def _safe(probe: Callable[[], Any], default: Any = None) -> Any:
    try:
        return probe()
    except Exception:  # noqa: BLE001 -- a probe that fails only leaves its field empty
        return default


def device_name(device: str = "cuda") -> str:
    """The GPU's name, or 'cpu:<processor>' for CPU runs: the key for cached peaks and baselines."""
    import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

    if str(device).startswith("cuda") and _safe(torch.cuda.is_available, False):
        return _safe(lambda: torch.cuda.get_device_name(torch.device(device)), "cuda") or "cuda"
    return f"cpu:{platform.processor() or platform.machine()}"


def device_name_without_torch(device: str = "cuda", environ: dict[str, str] | None = None) -> str:
    """`device_name(device)` without importing torch or touching CUDA: the processor for the CPU,
    nvidia-smi's name of the visible GPU `device` means (in a process whose environment is
    `environ`, default this one's); "" when nvidia-smi cannot say."""
    if not str(device).startswith("cuda"):
        return f"cpu:{platform.processor() or platform.machine()}"
    environ = os.environ if environ is None else environ
    index = int(str(device).split(":")[1]) if ":" in str(device) else 0
    visible = [v.strip() for v in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if "CUDA_VISIBLE_DEVICES" in environ and index >= len(visible):
        return ""
    target = visible[index] if visible else str(index)
    listed = _safe(lambda: _run("nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", target), "")
    return listed.splitlines()[0].strip() if listed else ""


def _gpu(device: str) -> dict[str, Any]:
    import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

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
    import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

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
