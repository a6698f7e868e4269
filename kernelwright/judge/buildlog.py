"""A build's log: captured from the compilers' file descriptors, kept short, and cut down to the
first errors with the candidate's own file and line (nvcc, gcc, ptxas, ninja, the linker, Python and
Triton tracebacks), which is what an LLM repairing the code needs."""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Iterator

LOG_FILE = "build.log"
LOG_TAIL_CHARS = 4000  # compiler output kept in CompileResult.log
# load_inline prepends these lines to the sources it writes (unless no_implicit_headers):
# file -> (what the candidate calls it, lines to subtract)
INLINE_FILES = {"cuda.cu": ("cuda_sources", 3), "main.cpp": ("cpp_sources", 1)}


def renames(builder: str, arguments: dict) -> dict[str, tuple[str, int]]:
    if builder != "load_inline":
        return {}
    if arguments.get("no_implicit_headers"):
        return {file: (label, 0) for file, (label, _) in INLINE_FILES.items()}
    return dict(INLINE_FILES)


class BuildOutput:
    text = ""


@contextlib.contextmanager
def captured_output(captured: BuildOutput) -> Iterator[BuildOutput]:
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


def tail(text: str) -> str:
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
