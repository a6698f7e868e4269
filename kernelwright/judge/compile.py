"""A build cache for candidates' C++/CUDA extensions, and compiler logs cut down for an LLM.

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
import fcntl
import functools
import hashlib
import inspect
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from .toolchain import (  # noqa: F401 - toolchain and arch detection live in judge/toolchain.py
    _tool_version, arch_list_for, current_arch_list, installed_torch, nvcc_path, pin_arch_list, precompile_env,
    resolve_arch_list, smi_arch_list, toolchain)
from .verdict import CompileResult

BUILD_MARKER = "kw_build.json"  # written after a successful build: its presence means "cached"
LOCK_FOLDER = ".locks"  # <cache>/torch_extensions/.locks/<hashed name>.lock
LOG_FILE = "build.log"
LOG_TAIL_CHARS = 4000  # compiler output kept in CompileResult.log
# load_inline prepends these lines to the sources it writes (unless no_implicit_headers):
# file -> (what the candidate calls it, lines to subtract)
INLINE_FILES = {"cuda.cu": ("cuda_sources", 3), "main.cpp": ("cpp_sources", 1)}
# arguments that change where or how loudly a build runs, not what it builds
_NOT_HASHED = {"build_directory", "verbose", "keep_intermediates"}


@dataclass
class BuildRecord:
    name: str  # the name the candidate asked for
    hashed_name: str
    build_dir: str
    backend: str  # "cuda" (has CUDA sources) or "cpp"
    ok: bool = False
    cached: bool = False
    seconds: float = 0.0
    log: str = ""
    errors: list[str] = field(default_factory=list)
    arch: str = ""


@dataclass
class BuildRecorder:
    """What the patched builders did in this process, in call order."""

    cache_dir: str
    records: list[BuildRecord] = field(default_factory=list)

    def record_failure(self, log: str, backend: str = "triton", name: str = "") -> None:
        """Add a failure seen outside the patched builders (a Triton CompilationError at launch)."""
        self.records.append(BuildRecord(name=name, hashed_name=name, build_dir="", backend=backend,
                                        ok=False, log=_tail(log), errors=trim_errors(log)))

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


# ---------------------------------------------------------------- hashing


def _file_text(path: Any) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return f"<unreadable {path}>"


def build_payload(builder: str, arguments: dict[str, Any], arch: str | None = None,
                  tools: dict[str, str] | None = None) -> dict[str, Any]:
    """What decides the built binary: the builder's arguments (file sources by content), the arch
    list and the toolchain."""
    hashed = {k: v for k, v in arguments.items() if k not in _NOT_HASHED}
    if builder == "load":
        sources = hashed.get("sources")
        sources = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources or [])
        hashed["sources"] = [[Path(s).name, _file_text(s)] for s in sources]
    return {
        "builder": builder,
        "arguments": hashed,
        "arch": current_arch_list() if arch is None else arch,
        "toolchain": toolchain() if tools is None else tools,
    }


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest()


def build_hash(builder: str, arguments: dict[str, Any], arch: str | None = None,
               tools: dict[str, str] | None = None) -> str:
    """sha256 over the builder's arguments (file sources by content), the arch list and toolchain."""
    return _digest(build_payload(builder, arguments, arch, tools))


def hashed_name(name: str, digest: str) -> str:
    return f"{name}_{digest[:16]}"


# ---------------------------------------------------------------- the patch


_INSTALLED: dict[str, Callable] = {}  # builder name -> torch's original (kept across re-installs)


def install_build_cache(cache_dir: str | os.PathLike | None = None) -> BuildRecorder:
    """Patch torch's load_inline and load to build once per content hash under `cache_dir`."""
    import torch.utils.cpp_extension as cpp

    from .cachedir import cache_root

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
    import torch.utils.cpp_extension as cpp

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
        digest = _digest(payload)
        name = hashed_name(arguments["name"], digest)
        build_dir = root / name
        record = BuildRecord(name=bound.arguments["name"], hashed_name=name, build_dir=str(build_dir),
                             backend="cuda" if _has_cuda(builder, arguments) else "cpp", arch=payload["arch"])
        recorder.records.append(record)
        module = _load_cached(arguments, name, build_dir, digest, record)
        if module is not None:
            return module
        from . import buildservice, service

        if service.available():  # a confined candidate: its supervisor builds and publishes
            return buildservice.build_remotely(builder, arguments, payload["arch"], record)
        build_dir.mkdir(parents=True, exist_ok=True)
        arguments.update(name=name, build_directory=str(build_dir), verbose=True)
        with _locked(build_dir):
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


@contextlib.contextmanager
def _locked(build_dir: Path) -> Iterator[None]:
    """Exclusive lock on one build (`<cache>/torch_extensions/.locks/<name>.lock`, outside the build
    folder, which the trusted builder publishes by renaming); also clears torch's own lock file
    left in the folder by a killed build."""
    locks = build_dir.parent / LOCK_FOLDER
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{build_dir.name}.lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            stale = build_dir / "lock"  # torch's FileBaton: only our lock holder could own it
            if stale.exists():
                stale.unlink()
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _load_cached(arguments: dict, name: str, build_dir: Path, digest: str, record: BuildRecord):
    """The published build of this hash, loaded without any lock (its marker is written last), or
    None. Reading the cache is all a confined candidate may do with it."""
    started = time.perf_counter()
    if not _marker_matches(build_dir / BUILD_MARKER, digest):
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
    if _marker_matches(marker, digest):
        module = _import_prebuilt(arguments)
        if module is not None:
            record.ok, record.cached = True, True
            record.seconds = time.perf_counter() - started
            record.log = "loaded the prebuilt extension (cache hit)"
            return module
    why_missed = explain_miss(build_dir, payload) if payload else ""
    output = _Output()
    try:
        with _captured_output(output):
            module = original(**arguments)
    except BaseException as exc:
        log = output.text + "\n" + f"{type(exc).__name__}: {exc}"
        record.seconds = time.perf_counter() - started
        record.log, record.errors = _tail(log), trim_errors(log, rename=_renames(builder, arguments))
        (build_dir / LOG_FILE).write_text(log)
        raise
    record.ok, record.seconds = True, time.perf_counter() - started
    record.log = _tail(output.text) + (f"\n{why_missed}" if why_missed else "")
    (build_dir / LOG_FILE).write_text(output.text)
    partial = marker.with_suffix(f".tmp{os.getpid()}")
    details = {"hash": digest, "name": arguments["name"], "seconds": record.seconds}
    if payload:
        details.update(sources=_digest(payload["arguments"]), arch=payload["arch"], toolchain=payload["toolchain"])
    partial.write_text(json.dumps(details))
    partial.replace(marker)  # atomic: a process killed here leaves no half-written marker
    return module


def explain_miss(build_dir: Path, payload: dict[str, Any]) -> str:
    """Why a build of these sources was not found: another build of the *same* sources exists
    for a different arch list or toolchain (a miss the caller can fix); "" when none does."""
    sources = _digest(payload["arguments"])
    stem = build_dir.name.rsplit("_", 1)[0]
    for sibling in sorted(build_dir.parent.glob(f"{stem}_*")):
        if sibling == build_dir:
            continue
        try:
            other = json.loads((sibling / BUILD_MARKER).read_text())
        except (OSError, ValueError):
            continue
        if other.get("sources") != sources:
            continue
        if other.get("arch") != payload["arch"]:
            return (f"build cache miss: {sibling.name} holds the same sources built for arch "
                    f"{other.get('arch')!r}; this process builds for {payload['arch']!r} (TORCH_CUDA_ARCH_LIST)")
        changed = sorted(k for k, v in payload["toolchain"].items() if (other.get("toolchain") or {}).get(k) != v)
        return (f"build cache miss: {sibling.name} holds the same sources built with another toolchain "
                f"({', '.join(changed) or 'unknown difference'})")
    return ""


def _marker_matches(marker: Path, digest: str) -> bool:
    try:
        return json.loads(marker.read_text()).get("hash") == digest
    except (OSError, ValueError):
        return False


def _import_prebuilt(arguments: dict):
    """Import the built library directly (no compiler, no ninja); None when that is not possible."""
    import torch.utils.cpp_extension as cpp

    importer = getattr(cpp, "_import_module_from_library", None)
    if importer is None or arguments.get("is_standalone"):
        return None
    try:
        return importer(arguments["name"], arguments["build_directory"], arguments.get("is_python_module", True))
    except Exception:  # noqa: BLE001 -- a damaged build folder: build again
        return None


def _renames(builder: str, arguments: dict) -> dict[str, tuple[str, int]]:
    if builder != "load_inline":
        return {}
    if arguments.get("no_implicit_headers"):
        return {file: (label, 0) for file, (label, _) in INLINE_FILES.items()}
    return dict(INLINE_FILES)


class _Output:
    text = ""


@contextlib.contextmanager
def _captured_output(captured: _Output) -> Iterator[_Output]:
    """Send file descriptors 1 and 2 (ninja and the compilers write there directly) and Python's
    sys.stdout/sys.stderr to one temporary file."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fds, saved_streams = [os.dup(1), os.dup(2)], (sys.stdout, sys.stderr)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        text = open(sink.fileno(), "w", buffering=1, closefd=False, errors="replace")
        sys.stdout = sys.stderr = text
        try:
            yield captured
        finally:
            text.flush()
            sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            for fd in saved_fds:
                os.close(fd)
            sink.seek(0)
            captured.text = sink.read().decode(errors="replace")


def _tail(text: str) -> str:
    return text.strip()[-LOG_TAIL_CHARS:]


# ---------------------------------------------------------------- error trimming

# nvcc:  /x/cuda.cu(12): error: identifier "foo" is undefined
_NVCC = re.compile(r"^(?P<file>[^\s:()][^:()]*)\((?P<line>\d+)\): (?:catastrophic )?error(?: #\w+-D)?: (?P<msg>.*)$")
# gcc/clang/ptxas:  /x/main.cpp:5:10: error: 'foo' was not declared in this scope
_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.*)$")
_PTXAS = re.compile(r"^ptxas (?:fatal|error)\s*: (?P<msg>.*)$")
_NINJA = re.compile(r"^FAILED: (?P<target>\S+)")
_LINKER = re.compile(r"^(?:/\S*/)?ld(?:\.\w+)?: (?P<msg>.*)$|undefined reference to|undefined symbol")
# Python:  ValueError: bad thing   (the final line of a traceback)
_PYEXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Failure|Interrupt)): (?P<msg>.+)$")
_PYFRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
# Triton:  "at 6:22:" then source lines, a caret line, then the error (e.g. NameError('...'))
_TRITON_AT = re.compile(r"(?:^|\w: )at (?P<line>\d+):(?P<col>\d+):\s*$")


def trim_errors(log: str, limit: int = 5, rename: dict[str, tuple[str, int]] | None = None) -> list[str]:
    """The first `limit` distinct errors of a build or compile log, each with file:line and one line
    of source context, ready for an LLM. Recognises nvcc, gcc/clang, ptxas, Triton CompilationError,
    the linker, Python exceptions and ninja FAILED lines, in that order of priority (a compiler
    error says more than "FAILED: cuda.cuda.o"). `rename` maps a generated file to the name the
    candidate knows and a line offset (load_inline writes `cuda.cu` with 3 extra lines on top).
    Falls back to the last lines of the log when nothing is recognised."""
    lines = (log or "").splitlines()
    found: list[tuple[int, int, str]] = []  # (priority, position, text)
    seen: set[str] = set()
    for index, line in enumerate(lines):
        hit = _match_error(lines, index, line.rstrip(), rename or {})
        if hit:
            key = re.sub(r"\s+", " ", hit[1])
            if key not in seen:
                seen.add(key)
                found.append((hit[0], index, hit[1]))
    if not found:
        tail = [l.strip() for l in lines if l.strip()][-limit:]
        return ["\n".join(tail)] if tail else []
    return [text for _, _, text in sorted(found)[:limit]]


def _match_error(lines: list[str], index: int, line: str, rename: dict) -> tuple[int, str] | None:
    """(priority, error text) when `line` starts an error; lower priority numbers come first."""
    stripped = line.strip()
    for pattern in (_NVCC, _GCC):
        hit = pattern.match(stripped)
        if hit:
            where = _where(hit["file"], int(hit["line"]), rename)
            return 0, f"{where}: error: {hit['msg'].strip()}" + _context(lines, index)
    hit = _TRITON_AT.search(stripped)
    if hit:
        return 0, _triton_error(lines, index, int(hit["line"]))
    hit = _PTXAS.match(stripped)
    if hit:
        return 1, f"ptxas: {hit['msg'].strip()}"
    if _LINKER.search(stripped) and "collect2" not in stripped:
        return 2, f"linker: {stripped[:300]}"
    hit = _PYEXC.match(stripped)
    if hit and not any(noise in stripped for noise in _PY_NOISE):
        return 3, _python_error(lines, index, hit)
    hit = _NINJA.match(stripped)
    if hit:
        return 4, f"ninja: FAILED building {hit['target']}"
    return None


# exception lines that only say "the build failed", not why
_PY_NOISE = ("Error building extension", "CalledProcessError", "returned non-zero exit status")


def _where(file: str, line: int, rename: dict) -> str:
    base = Path(file.strip()).name
    if base in rename:
        label, offset = rename[base]
        return f"{label} line {max(line - offset, 1)}"
    return f"{base}:{line}"


def _context(lines: list[str], index: int) -> str:
    """The next line when it quotes source (nvcc indents it; gcc prefixes 'NN |')."""
    if index + 1 >= len(lines):
        return ""
    nxt = lines[index + 1]
    gcc_quote = re.match(r"^\s*\d+\s*\|(.*)$", nxt)
    if gcc_quote:
        return "\n    " + gcc_quote.group(1).strip()
    if nxt.startswith((" ", "\t")) and nxt.strip() and not nxt.strip().startswith(("^", "detected during")):
        return "\n    " + nxt.strip()
    return ""


def _triton_error(lines: list[str], index: int, line_no: int) -> str:
    """'at L:C:' + source excerpt + caret + message: keep the offending line and the message.
    Triton counts L from the kernel's `def` line, so the kernel is named when the excerpt shows it."""
    source_line, message, kernel = "", "", ""
    for offset in range(index + 1, min(index + 16, len(lines))):
        defined = re.match(r"\s*def (\w+)\(", lines[offset])
        if defined:
            kernel = defined.group(1)
        if re.fullmatch(r"\s*\^\s*", lines[offset]):
            source_line = lines[offset - 1].strip()
            message = lines[offset + 1].strip() if offset + 1 < len(lines) else ""
            break
    where = f"triton kernel {kernel}, line {line_no} from its def" if kernel else f"triton kernel line {line_no}"
    text = f"{where}: {message or 'compilation error'}"
    return text + (f"\n    {source_line}" if source_line else "")


def _python_error(lines: list[str], index: int, hit: re.Match) -> str:
    """Exception line with the nearest traceback frame above it."""
    for back in range(index - 1, max(index - 40, -1), -1):
        frame = _PYFRAME.match(lines[back])
        if frame:
            where = f"{Path(frame['file']).name}:{frame['line']}"
            code = lines[back + 1].strip() if back + 1 < index else ""
            return f"{where}: {hit['type']}: {hit['msg'].strip()}" + (f"\n    {code}" if code else "")
    return f"{hit['type']}: {hit['msg'].strip()}"
