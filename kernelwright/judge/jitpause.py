"""Triton's JIT compiles with the device let go.

A Triton kernel compiles at its first launch, in the middle of a trial, while the worker holds the
device's lock shared (gpulock). A compile is seconds of CPU work and no GPU work, yet a writer
waiting to time another candidate waits for it, and the turnstile keeps every new reader out
meanwhile: on the H100 a batch of Triton candidates stopped gaining at 12 lanes (docs/benchmarks.md).
So `install` wraps `triton.compiler.compile` (which every JITFunction binds when it first runs):
the device is synchronised (the candidate's queued work finishes under the hold, so a timing never
overlaps it), the shared hold is let go for the compile and taken again behind waiting writers.
Outside a shared hold, or while a CUDA graph is being captured (no synchronising then), the
compile runs as it is. A candidate that unwraps it only keeps the device longer itself.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager


def install(step_off: Callable[[], AbstractContextManager]) -> Callable[[], None]:
    """Run every Triton compile inside `step_off()`; returns the function that takes it off again
    (a no-op without Triton)."""
    try:
        import triton.compiler as package
        from triton.compiler import compiler as module
    except Exception:  # noqa: BLE001 - no Triton here: nothing compiles
        return lambda: None
    original = package.compile
    if getattr(original, "__kw_step_off__", False):
        return lambda: None

    @functools.wraps(original)
    def compile(*args, **kwargs):
        with step_off():
            return original(*args, **kwargs)

    compile.__kw_step_off__ = True  # type: ignore[attr-defined]
    replaced = [(owner, owner.compile) for owner in (package, module) if getattr(owner, "compile", None) is original]
    for owner, _ in replaced:
        owner.compile = compile

    def uninstall() -> None:
        for owner, before in replaced:
            if owner.compile is compile:
                owner.compile = before

    return uninstall


def device_idle(device: str) -> bool:
    """Wait until `device` has finished the work this process queued; False when it cannot be waited
    for now (a CUDA graph is being captured: synchronising would break the capture). CPU: True."""
    if not str(device).startswith("cuda"):
        return True
    import torch

    from .guards import synchronize

    try:
        if torch.cuda.is_current_stream_capturing():
            return False
        synchronize(device)
    except Exception:  # noqa: BLE001 - a device in error: keep the hold, the trial reports the error
        return False
    return True
