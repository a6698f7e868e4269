"""Where the candidate's own code runs: Triton launches, calls into the extensions it built, and
compiled custom ops it registered. The judge needs this twice:

- to know that `forward` launched a kernel of its own (every rule set requires one), and
- to attribute the ops the dispatcher records: ops inside a Triton launch are the interpreter's
  bookkeeping (on a GPU there are none), ops inside an extension call are ATen ops the
  candidate's C++ called ("extension": allowed by some rule sets, counted by all), everything else
  ran in forward's Python ("python").

`install()` patches `run` of Triton's kernel classes (JIT, interpreter, autotuner, heuristics) and
wraps `torch.utils.cpp_extension.load_inline` / `load` (over the build cache) so that every callable
of a module they return counts its calls. Install it before the candidate is imported (candidates
bind `load_inline` at import time) and `uninstall()` it before timing: the wrappers cost a
fraction of a microsecond per call, and the timer should measure the candidate alone.

A custom op that reaches the dispatcher under another namespace than aten counts as the
candidate's own code when the candidate registered it while loading and it is not implemented in
Python (`torch.library.custom_op` bodies are Python, whose torch ops the dispatcher would hide);
otherwise it counts as torch work under its own name.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import types
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import torch

from ..problem.ops import ATEN_NAMESPACES, PYTHON

EXTENSION, KERNEL, OWN_OP = "extension", "kernel", "own_op"
_TRITON_CLASSES = (("triton.runtime.jit", "JITFunction", True), ("triton.runtime.interpreter", "InterpretedFunction", True),
                   ("triton.runtime.autotuner", "Autotuner", False), ("triton.runtime.autotuner", "Heuristics", False))


class OwnCode:
    """Counts of own launches and the state the op recorder asks for (see the module docstring)."""

    def __init__(self):
        self.triton: Counter[str] = Counter()  # kernel name -> launches
        self.extension: Counter[str] = Counter()  # extension function -> calls
        self.custom_ops: Counter[str] = Counter()  # candidate-registered compiled op -> calls
        self.libraries: list[str] = []  # files of the extension modules the candidate loaded
        self.depth = {KERNEL: 0, EXTENSION: 0}
        self.ops_before: frozenset[str] | None = None  # dispatcher ops registered before the candidate loaded
        self.ranges: str | None = None  # a profiler range name around each launch (the runner's profiler)
        self._patched: list[tuple[Any, str, Any]] = []

    # ---------------------------------------------------------------- what the recorder asks

    def origin(self, func) -> str:
        """The bucket of one dispatched op: "kernel", "extension", "own_op" or "python"."""
        if self.depth[KERNEL]:
            return KERNEL
        if self.depth[EXTENSION]:
            return EXTENSION
        namespace = getattr(func, "namespace", "aten")
        if namespace not in ATEN_NAMESPACES and self.is_own_op(func):
            self.custom_ops[_qualified(func)] += 1
            return OWN_OP
        return PYTHON

    def is_own_op(self, func) -> bool:
        if self.ops_before is None:  # this torch cannot list its operators: custom ops count as torch work
            return False
        qualified = _qualified(func)
        return qualified not in self.ops_before and not _python_implemented(qualified)

    def launches(self) -> dict[str, dict[str, int]]:
        return {"triton": dict(self.triton), "extension": dict(self.extension), "custom_ops": dict(self.custom_ops)}

    def launched(self) -> bool:
        return bool(self.triton or self.extension or self.custom_ops)

    def reset(self) -> None:
        """Forget launches so far (the recorded trial counts its own)."""
        self.triton.clear()
        self.extension.clear()
        self.custom_ops.clear()

    # ---------------------------------------------------------------- patching

    def install(self) -> "OwnCode":
        self.ops_before = _registered_ops()
        for module_name, class_name, is_launch in _TRITON_CLASSES:
            cls = _find(module_name, class_name)
            if cls is not None and "run" in vars(cls):
                self._patch(cls, "run", self._triton_run(vars(cls)["run"], is_launch))
        import torch.utils.cpp_extension as cpp  # noqa: PLC0415 -- torch.utils.cpp_extension takes 0.5 s to import (setuptools): loaded only when an extension is built

        for builder in ("load_inline", "load"):
            self._patch(cpp, builder, self._loader(getattr(cpp, builder)))
        return self

    def uninstall(self) -> None:
        """Put the originals back (modules already returned keep their counting wrappers)."""
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched = []

    def _patch(self, owner, name: str, replacement) -> None:
        self._patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def _triton_run(self, original: Callable, is_launch: bool) -> Callable:
        tracker = self

        @functools.wraps(original)
        def run(fn, *args, **kwargs):
            if not is_launch:  # an autotuner or heuristics: its hooks run the candidate's Python, not a kernel
                return original(fn, *args, **kwargs)
            tracker.depth[KERNEL] += 1
            try:
                with _range(tracker.ranges):
                    result = original(fn, *args, **kwargs)
            finally:
                tracker.depth[KERNEL] -= 1
            if not kwargs.get("warmup", False):
                tracker.triton[_kernel_name(fn)] += 1
            return result

        return run

    def _loader(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def load(*args, **kwargs):
            module = original(*args, **kwargs)
            if isinstance(module, types.ModuleType):
                self.wrap_module(module)
            return module

        return load

    def wrap_module(self, module: types.ModuleType) -> types.ModuleType:
        """Replace every function of an extension module by one that counts its calls and marks the
        ops it dispatches as the extension's."""
        path = getattr(module, "__file__", None)
        if path and path not in self.libraries:
            self.libraries.append(str(Path(path)))
        for name, value in list(vars(module).items()):
            if name.startswith("__") or isinstance(value, (type, types.ModuleType)) or not callable(value):
                continue
            setattr(module, name, self._counted(f"{module.__name__}.{name}", value))
        return module

    def _counted(self, label: str, function: Callable) -> Callable:
        tracker = self

        def call(*args, **kwargs):
            tracker.extension[label] += 1
            tracker.depth[EXTENSION] += 1
            try:
                with _range(tracker.ranges):
                    return function(*args, **kwargs)
            finally:
                tracker.depth[EXTENSION] -= 1

        call.__name__ = call.__qualname__ = getattr(function, "__name__", label)
        call.__doc__ = getattr(function, "__doc__", None)
        call.__wrapped__ = function
        return call


def _range(name: str | None):
    """A profiler range `name` (a no-op without one, or without a profiler running)."""
    if name is None:
        return contextlib.nullcontext()

    return torch.profiler.record_function(name)


def _find(module_name: str, class_name: str):
    try:
        return getattr(importlib.import_module(module_name), class_name, None)
    except Exception:  # noqa: BLE001 - no triton, or a version without this class
        return None


def _kernel_name(fn) -> str:
    inner = getattr(fn, "fn", None)
    return getattr(inner, "__name__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def _qualified(func) -> str:
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "__name__", "") or str(func)
    return f"{getattr(func, 'namespace', 'aten')}::{name.split('.')[-1]}"


def _registered_ops() -> frozenset[str] | None:
    """Every operator the dispatcher knows now, as 'ns::name' (overloads folded); None when this
    torch cannot list them."""
    try:
        names = torch._C._dispatch_get_all_op_names()
    except Exception:  # noqa: BLE001 - an older torch
        return None
    return frozenset(name.split(".")[0] for name in names)


def _python_implemented(qualified: str) -> bool:
    """Whether a custom op's kernels were registered from Python (torch.library)."""
    try:
        from torch._library import custom_ops  # noqa: PLC0415 -- torch._library is private: a torch without it answers from torch.library below

        if qualified in custom_ops.OPDEFS:
            return True
    except Exception:  # noqa: BLE001 - a torch without this registry
        pass
    try:
        import torch.library  # noqa: PLC0415 -- a torch without torch.library: the op is not Python-implemented

        prefix = qualified.replace("::", "/") + "."
        return any(str(entry).startswith(prefix) or str(entry).startswith(prefix[:-1] + "/")
                   for entry in getattr(torch.library, "_impls", ()))
    except Exception:  # noqa: BLE001
        return False
