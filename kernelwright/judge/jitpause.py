"""Triton's JIT compiles with the device let go.

A Triton kernel compiles at its first launch, in the middle of a trial, while the worker holds the
device's lock shared (gpulock). A compile is seconds of CPU work and no GPU work, yet a writer
waiting to time another candidate waits for it, and the turnstile keeps every new reader out
meanwhile: on the H100 a batch of Triton candidates stopped gaining at 12 lanes (docs/benchmarks.md).
The first launch also builds C code: Triton (3.x) compiles a launcher for the kernel's signature
and, once per process, its driver utilities, into the worker's own Triton cache, which starts
empty in every evaluation (`triton.runtime.build`: a C compiler run, then loading the library). On
the H100 that was 0.7 s of the first trial's hold beside 11 other workers (docs/benchmarks.md).
So `install` wraps `triton.compiler.compile` (which every JITFunction binds when it first runs)
and the C compiler's run (`triton.runtime.build._build`, a subprocess): the device is synchronised
(the candidate's queued work finishes under the hold, so a timing never overlaps it), the shared
hold is let go for the compile and taken again behind waiting writers. Loading what was built (a
library's constructors run in this process) and loading the kernel onto the device stay under the
hold. Outside a shared hold, or while a CUDA graph is being captured (no synchronising then), the
compile runs as it is. A candidate that unwraps it only keeps the device longer itself.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import ModuleType


def install(step_off: Callable[[], AbstractContextManager]) -> Callable[[], None]:
    """Run every Triton compile (kernels, and the C compiler's runs) inside `step_off()`; returns the
    function that takes it off again (a no-op without Triton)."""
    try:
        import triton.compiler as package  # noqa: PLC0415 -- the checker imports this module at its top, before its guards run and torch loads (checker/main.py, step 1)
        from triton.compiler import compiler as module  # noqa: PLC0415 -- the checker imports this module at its top, before its guards run and torch loads (checker/main.py, step 1)
        from triton.runtime import build  # noqa: PLC0415 -- the checker imports this module at its top, before its guards run and torch loads (checker/main.py, step 1)
    except Exception:  # noqa: BLE001 - no Triton here: nothing compiles
        return lambda: None
    undo = [_wrap("compile", [package, module], step_off), _wrap("_build", [build], step_off)]

    def uninstall() -> None:
        for restore in undo:
            restore()

    return uninstall


def _wrap(name: str, owners: list[ModuleType], step_off: Callable[[], AbstractContextManager]) -> Callable[[], None]:
    """Replace function `name` (as the first owner holds it) by one that runs inside `step_off()`, in
    every owner that holds that same function; returns what restores them."""
    original = getattr(owners[0], name, None)
    if original is None or getattr(original, "__kw_step_off__", False):
        return lambda: None

    @functools.wraps(original)
    def stepped_off(*args, **kwargs):
        with step_off():
            return original(*args, **kwargs)

    stepped_off.__kw_step_off__ = True  # type: ignore[attr-defined]
    replaced = [owner for owner in dict.fromkeys(owners) if getattr(owner, name, None) is original]
    for owner in replaced:
        setattr(owner, name, stepped_off)

    def restore() -> None:
        for owner in replaced:
            if getattr(owner, name, None) is stepped_off:
                setattr(owner, name, original)

    return restore


def device_idle(device: str) -> bool:
    """Wait until `device` has finished the work this process queued; False when it cannot be waited
    for now (a CUDA graph is being captured: synchronising would break the capture). CPU: True."""
    if not str(device).startswith("cuda"):
        return True
    import torch  # noqa: PLC0415 -- the checker imports this module at its top, before its guards run and torch loads (checker/main.py, step 1)

    from .guards import synchronize  # noqa: PLC0415 -- the checker imports this module at its top, before its guards run and torch loads (checker/main.py, step 1)

    try:
        if torch.cuda.is_current_stream_capturing():
            return False
        synchronize(device)
    except Exception:  # noqa: BLE001 - a device in error: keep the hold, the trial reports the error
        return False
    return True
