"""A build cache for candidates' C++/CUDA extensions (its names, markers and locks in `buildcache`,
its logs captured and cut down for an LLM in `buildlog`).

`install_build_cache(cache_dir)` replaces `torch.utils.cpp_extension.load_inline` and `load` (call
it before the candidate is imported: candidates bind `load_inline` at import time). Each build
then gets
- a content name: the extension `name` plus a hash of its sources, every flag, the CUDA arch list
  and the toolchain (nvcc, C++ compiler, torch, python), so two candidates never share a build and
  one candidate never builds twice;
- a build folder `<cache_dir>/torch_extensions/<hashed name>`, so a later process (the measuring
  worker after a compile worker, or a repeat of the same candidate) loads the prebuilt .so;
- a lock per build (`<cache_dir>/torch_extensions/.locks/<hashed name>.lock`, `fcntl.flock`,
  released by the kernel when a process dies, unlike torch's own lock file), so two processes
  building the same hash never interleave;
- a record in the returned `BuildRecorder`: time, cached or not, the full log, and on failure the
  first few errors (`trim_errors`).

Inside the judge, candidate code runs confined and cannot write the cache: a prebuilt library is
loaded directly (reading is allowed), and a miss is built by the supervisor's trusted builder
(`buildservice`), which hashes what it was sent itself and publishes the result. Without a
supervisor (the judge's own tools, tests) the build runs in this process, as before.

Parallel precompile: compile workers run with CUDA hidden, where torch cannot ask the device for
its architecture. They must get `TORCH_CUDA_ARCH_LIST` (`precompile_env`, `resolve_arch_list`),
and the measuring worker must build for the same list, or the hash differs and it builds again.
The judge therefore resolves the list once in the parent (the run's `cuda_arch_list`, else an
existing `TORCH_CUDA_ARCH_LIST`, else the GPUs' capabilities from nvidia-smi) and gives both
phases the same variable; a worker that finds it unset pins it to what torch would detect
(`pin_arch_list`), so the hashed arch is always the arch torch builds for. A miss that a build of
the same sources for another arch or toolchain explains is said so in the build log.
Triton kernels compile at their first launch, which needs the GPU: they cannot be precompiled with
CUDA hidden.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import buildservice, service
from .buildcache import (BUILD_MARKER, BuildRecord, build_payload, content_digest, explain_miss, hashed_name, locked,
                         marker_matches)
from .buildlog import LOG_FILE, LOG_TAIL_CHARS, BuildOutput, captured_output, renames, tail, trim_errors
from .cachedir import cache_root
from .toolchain import (  # noqa: F401 - toolchain and arch detection live in judge/toolchain.py
    arch_list_for,
    current_arch_list,
    installed_torch,
    nvcc_path,
    pin_arch_list,
    precompile_env,
    resolve_arch_list,
    smi_arch_list,
    tool_version,
    toolchain,
)
from .verdict import CompileResult


@dataclass
class BuildRecorder:
    """What the patched builders did in this process, in call order."""

    cache_dir: str
    records: list[BuildRecord] = field(default_factory=list)

    def record_failure(self, log: str, backend: str = "triton", name: str = "") -> None:
        """Add a failure seen outside the patched builders (a Triton CompilationError at launch)."""
        self.records.append(BuildRecord(name=name, hashed_name=name, build_dir="", backend=backend,
                                        ok=False, log=tail(log), errors=trim_errors(log)))

    def result(self) -> CompileResult:
        """All builds folded into one CompileResult (ok=True, backend "none" when nothing was built)."""
        if not self.records:
            return CompileResult(ok=True, backend="none")
        failed = [r for r in self.records if not r.ok]
        shown = failed or self.records
        backends = {r.backend for r in self.records}
        return CompileResult(
            ok=not failed,
            seconds=sum(r.seconds for r in self.records),
            cached=all(r.cached for r in self.records),
            backend="cuda" if "cuda" in backends else sorted(backends)[0],
            log="\n".join(r.log for r in shown if r.log)[-LOG_TAIL_CHARS:],
            errors=[e for r in failed for e in r.errors][:5],
            arch=";".join(sorted({r.arch for r in self.records if r.arch})),
        )


# ---------------------------------------------------------------- the patch


_INSTALLED: dict[str, Callable] = {}  # builder name -> torch's original (kept across re-installs)


def install_build_cache(cache_dir: str | os.PathLike | None = None) -> BuildRecorder:
    """Patch torch's load_inline and load to build once per content hash under `cache_dir`."""
    import torch.utils.cpp_extension as cpp  # noqa: PLC0415 -- torch.utils.cpp_extension takes 0.5 s to import (setuptools): loaded only when an extension is built


    root = cache_root(cache_dir) / "torch_extensions"
    with contextlib.suppress(OSError):  # a confined worker cannot create it (its supervisor has)
        root.mkdir(parents=True, exist_ok=True)
    pin_arch_list()
    recorder = BuildRecorder(cache_dir=str(root))
    for builder in ("load_inline", "load"):
        original = _INSTALLED.setdefault(builder, getattr(cpp, builder))
        setattr(cpp, builder, _cached_builder(builder, original, root, recorder))
    return recorder


def uninstall_build_cache() -> None:
    """Put torch's builders back (tests; a worker process simply exits)."""
    import torch.utils.cpp_extension as cpp  # noqa: PLC0415 -- torch.utils.cpp_extension takes 0.5 s to import (setuptools): loaded only when an extension is built

    for builder, original in _INSTALLED.items():
        setattr(cpp, builder, original)


def _cached_builder(builder: str, original: Callable, root: Path, recorder: BuildRecorder) -> Callable:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def build(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        payload = build_payload(builder, arguments)
        digest = content_digest(payload)
        name = hashed_name(arguments["name"], digest)
        build_dir = root / name
        record = BuildRecord(name=bound.arguments["name"], hashed_name=name, build_dir=str(build_dir),
                             backend="cuda" if _has_cuda(builder, arguments) else "cpp", arch=payload["arch"])
        recorder.records.append(record)
        module = _load_cached(arguments, name, build_dir, digest, record)
        if module is not None:
            return module

        if service.available():  # a confined candidate: its supervisor builds and publishes
            return buildservice.build_remotely(builder, arguments, payload["arch"], record)
        build_dir.mkdir(parents=True, exist_ok=True)
        arguments.update(name=name, build_directory=str(build_dir), verbose=True)
        with locked(build_dir):
            return _build_or_load(original, arguments, record, digest, builder, payload)

    return build


def _has_cuda(builder: str, arguments: dict[str, Any]) -> bool:
    if arguments.get("with_cuda"):
        return True
    if builder == "load_inline":
        return bool(arguments.get("cuda_sources"))
    sources = arguments.get("sources")
    sources = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources or [])
    return any(str(s).endswith((".cu", ".cuh")) for s in sources)


def _load_cached(arguments: dict, name: str, build_dir: Path, digest: str, record: BuildRecord):
    """The published build of this hash, loaded without any lock (its marker is written last), or
    None. Reading the cache is all a confined candidate may do with it."""
    started = time.perf_counter()
    if not marker_matches(build_dir / BUILD_MARKER, digest):
        return None
    module = _import_prebuilt({**arguments, "name": name, "build_directory": str(build_dir)})
    if module is not None:
        record.ok, record.cached = True, True
        record.seconds = time.perf_counter() - started
        record.log = "loaded the prebuilt extension (cache hit)"
    return module


def _build_or_load(original: Callable, arguments: dict, record: BuildRecord, digest: str, builder: str,
                   payload: dict[str, Any] | None = None):
    build_dir = Path(arguments["build_directory"])
    marker = build_dir / BUILD_MARKER
    started = time.perf_counter()
    if marker_matches(marker, digest):
        module = _import_prebuilt(arguments)
        if module is not None:
            record.ok, record.cached = True, True
            record.seconds = time.perf_counter() - started
            record.log = "loaded the prebuilt extension (cache hit)"
            return module
    why_missed = explain_miss(build_dir, payload) if payload else ""
    output = BuildOutput()
    try:
        with captured_output(output):
            module = original(**arguments)
    except BaseException as exc:
        log = output.text + "\n" + f"{type(exc).__name__}: {exc}"
        record.seconds = time.perf_counter() - started
        record.log, record.errors = tail(log), trim_errors(log, rename=renames(builder, arguments))
        (build_dir / LOG_FILE).write_text(log)
        raise
    record.ok, record.seconds = True, time.perf_counter() - started
    record.log = tail(output.text) + (f"\n{why_missed}" if why_missed else "")
    (build_dir / LOG_FILE).write_text(output.text)
    partial = marker.with_suffix(f".tmp{os.getpid()}")
    details = {"hash": digest, "name": arguments["name"], "seconds": record.seconds}
    if payload:
        details.update(sources=content_digest(payload["arguments"]), arch=payload["arch"], toolchain=payload["toolchain"])
    partial.write_text(json.dumps(details))
    partial.replace(marker)  # atomic: a process killed here leaves no half-written marker
    return module


def _import_prebuilt(arguments: dict):
    """Import the built library directly (no compiler, no ninja); None when that is not possible."""
    import torch.utils.cpp_extension as cpp  # noqa: PLC0415 -- torch.utils.cpp_extension takes 0.5 s to import (setuptools): loaded only when an extension is built

    importer = getattr(cpp, "_import_module_from_library", None)
    if importer is None or arguments.get("is_standalone"):
        return None
    try:
        return importer(arguments["name"], arguments["build_directory"], arguments.get("is_python_module", True))
    except Exception:  # noqa: BLE001 -- a damaged build folder: build again
        return None


