"""Read what the compiler decided about a kernel: registers, spills, shared memory.

Two sources: the Triton kernels a module launched (their compiled objects carry `n_regs`,
`n_spills` and `metadata.shared`), and the text of `ptxas -v` for CUDA C++ extensions, both read
by profile/resources.py (the one home of these parsers). Both feed `prune.resource_violation`, which prunes configurations that spill or exceed the device.
"""
from __future__ import annotations

import types
from typing import Any, Iterable

from kernelwright.profile.resources import ResourceReport, parse_ptxas_verbose, triton_kernel_metadata

from .prune import KernelResources

def parse_ptxas(log: str) -> list[KernelResources]:
    """Resources per kernel from `ptxas -v` output (as nvcc -Xptxas -v prints it); the parser is
    profile.resources' (one home), spills are stores plus loads in bytes."""
    return [_from_report(r) for r in parse_ptxas_verbose(log)]


def _from_report(report: ResourceReport) -> KernelResources:
    stores, loads = report.spill_store_bytes, report.spill_load_bytes
    spills = None if stores is None and loads is None else (stores or 0) + (loads or 0)
    return KernelResources(name=report.function, registers=report.registers, spills=spills,
                           shared_bytes=report.shared_bytes)


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
    meta = triton_kernel_metadata(compiled)  # profile.resources reads a compiled kernel (one home)
    num_warps = meta.get("num_warps")
    return KernelResources(
        name=name,
        registers=meta.get("n_regs"),
        spills=meta.get("n_spills"),  # Triton's count (local memory / 4), as before
        shared_bytes=meta.get("shared"),
        threads=num_warps * 32 if isinstance(num_warps, int) else None,
    )
