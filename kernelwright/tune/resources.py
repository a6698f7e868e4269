"""Read what the compiler decided about a kernel: registers, spills, shared memory.

Two sources: the Triton kernels a module launched (their compiled objects carry `n_regs`,
`n_spills` and `metadata.shared`), and the text of `ptxas -v` for CUDA C++ extensions. Both
feed `prune.resource_violation`, which prunes configurations that spill or exceed the device.
"""
from __future__ import annotations

import re
import types
from typing import Any, Iterable

from .prune import KernelResources

_PTXAS_ENTRY = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:, (?:\d+) bytes [\w\[\]0-9]+)*")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(log: str) -> list[KernelResources]:
    """Resources per kernel from `ptxas -v` output (as nvcc -Xptxas -v prints it)."""
    kernels: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    for line in log.splitlines():
        entry = _PTXAS_ENTRY.search(line)
        if entry:
            name = entry.group(1)
            current = kernels.setdefault(name, KernelResources(name=name))
            continue
        if current is None:
            continue
        spill = _PTXAS_SPILL.search(line)
        if spill:
            current.spills = int(spill.group(1)) + int(spill.group(2))
        used = _PTXAS_USED.search(line)
        if used:
            current.registers = int(used.group(1))
            smem = _PTXAS_SMEM.search(line)
            current.shared_bytes = int(smem.group(1)) if smem else 0
    return list(kernels.values())


def triton_resources(module: types.ModuleType) -> list[KernelResources]:
    """Resources of every Triton kernel of `module` compiled so far (after a first launch)."""
    found = []
    for name, obj in vars(module).items():
        for compiled in _compiled_kernels(obj):
            found.append(_from_compiled(name, compiled))
    return found


def _compiled_kernels(fn: Any) -> Iterable[Any]:
    fn = getattr(fn, "fn", fn) if type(fn).__name__ == "Autotuner" else fn
    caches = getattr(fn, "device_caches", None)
    if not isinstance(caches, dict):
        return []
    compiled = []
    for entry in caches.values():
        parts = entry if isinstance(entry, tuple) else (entry,)
        for part in parts:
            if isinstance(part, dict):
                compiled.extend(v for v in part.values() if hasattr(v, "metadata"))
                break
    return compiled


def _from_compiled(name: str, compiled: Any) -> KernelResources:
    try:  # handles (and n_regs) are loaded lazily by some Triton versions
        init = getattr(compiled, "_init_handles", None)
        if callable(init):
            init()
    except Exception:  # noqa: BLE001 -- reading resources must never break the caller
        pass
    meta = getattr(compiled, "metadata", None)
    num_warps = getattr(meta, "num_warps", None)
    return KernelResources(
        name=name,
        registers=getattr(compiled, "n_regs", None),
        spills=getattr(compiled, "n_spills", None),
        shared_bytes=getattr(meta, "shared", None),
        threads=num_warps * 32 if isinstance(num_warps, int) else None,
    )
