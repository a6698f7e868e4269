"""Reading where an asynchronous CUDA fault happened, from the output of the rerun that locates it.

A kernel that reads out of bounds does not fail at its launch: CUDA reports the fault at the next
call that waits for the GPU (a later launch, a copy, the judge's comparison), so the line of the
first verdict names where it was *reported*. The judge runs the failing call again (`judge/locate.py`)
with CUDA_LAUNCH_BLOCKING=1, where every launch waits for its kernel and the error is raised by the
launch that faulted, and under `compute-sanitizer --tool memcheck` where it is installed, which
names the kernel, the access and the thread. This module only reads text (stdlib, no torch): the
runner's error paragraph and the sanitizer's log. The result is `Verdict.fault`:
{"tool", "kernel", "where", "report"}.
"""
from __future__ import annotations

import re
from pathlib import PurePath
from typing import Callable

# errors CUDA reports after the fact, at the next call that waits for the GPU (the agents' Repairer
# recognises the same ones in the failure text: agents/repairer.py `cuda_fault`)
ASYNC_FAULT = re.compile(
    r"an illegal memory access was encountered|misaligned address|device-side assert triggered|"
    r"unspecified launch failure|an illegal instruction was encountered|"
    r"cudaErrorIllegalAddress|cudaErrorMisalignedAddress|cudaErrorLaunchFailure|cudaErrorAssert",
    re.IGNORECASE)

REPORT_LINES = 12  # the sanitizer's first error block, without its host backtrace
REPORT_CHARS = 1500

_PREFIX = re.compile(r"^=+ ?")  # compute-sanitizer prefixes every line with "========= "
# the first line of an error block (memcheck's access errors, hardware exceptions, API errors, leaks)
# (not the sanitizer's own "Error: ..." lines: those say it could not attach, not that a kernel faulted)
_BLOCK_START = re.compile(r"^(Invalid |Misaligned |Program hit |Out-of-range |Malloc/Free error|"
                          r"Hardware exception|Barrier error|Illegal |Stack overflow|Device-side assert|"
                          r"Warp |Leaked )", re.IGNORECASE)
_BACKTRACE = re.compile(r"^(Saved host backtrace|Host Frame|Device Frame|in /|in [^ ]+\.so)", re.IGNORECASE)
# "at add_kernel+0x1d0 in /path/cand.py:14" (2022 and later) or "at 0x70 in /path/demo.cu:6:kern()" (older)
_AT_NEW = re.compile(r"^at (?P<kernel>[^\s]+?)\+0x[0-9a-fA-F]+(?: in (?P<file>[^\s]+?):(?P<line>\d+))?\s*$")
_AT_OLD = re.compile(r"^at 0x[0-9a-fA-F]+ in (?P<file>[^\s]+?):(?P<line>\d+):(?P<kernel>.+?)\s*$")
# where the runner says the candidate's line is: "... (/path/runner/cand.py, line 42)"
_LINE = re.compile(r"\((?P<file>[^()]*?\.py), line (?P<line>\d+)\)")
# what a launch line calls: a Triton launch `name[grid](...)`, else the called function `mod.fn(...)`
_TRITON_LAUNCH = re.compile(r"([A-Za-z_][\w.]*)\s*\[[^\]]*\]\s*\(")
_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def async_fault(text: str | None) -> str:
    """The asynchronous CUDA error a failure reports ('' when it reports none)."""
    match = ASYNC_FAULT.search(text or "")
    return match.group(0) if match else ""


def sanitizer_block(log: str) -> list[str]:
    """The lines of the sanitizer's first error block, prefixes and host backtrace removed."""
    block: list[str] = []
    for raw in log.splitlines():
        if not _PREFIX.match(raw):
            if block:
                break  # the program's own output after the block
            continue
        line = _PREFIX.sub("", raw).strip()
        if not block:
            if _BLOCK_START.match(line) and not line.upper().startswith("ERROR SUMMARY"):
                block.append(line)
            continue
        if not line or _BLOCK_START.match(line) or line.upper().startswith("ERROR SUMMARY"):
            break  # the block ends at a blank line, the next error or the summary
        if _BACKTRACE.match(line):
            continue
        block.append(line)
    return block


def from_sanitizer(log: str, candidate_file: str = "") -> dict[str, str]:
    """`Verdict.fault` from a compute-sanitizer log: the kernel and the source line of its first
    error (the candidate's file named by its base name), and the block trimmed; {} without one."""
    block = sanitizer_block(log)
    if not block:
        return {}
    kernel, where = "", ""
    for line in block[1:]:
        match = _AT_NEW.match(line) or _AT_OLD.match(line)
        if match:
            kernel = match.group("kernel").removesuffix("()")
            if match.group("file"):
                where = f"{_short(match.group('file'), candidate_file)}:{match.group('line')}"
            break
    report = "\n".join(block[:REPORT_LINES])[:REPORT_CHARS]
    return {"tool": "compute-sanitizer --tool memcheck", "kernel": kernel, "where": where, "report": report}


def from_launch_blocking(error: str, source: str, candidate_file: str = "",
                         classify: Callable[[str], str] | None = None) -> dict[str, str]:
    """`Verdict.fault` from the rerun's error paragraph with CUDA_LAUNCH_BLOCKING=1: the line of the
    candidate's file that raised it (the faulting launch), the kernel that line launches, and the
    paragraph; {} when the rerun raised no asynchronous fault or named no line of the candidate's."""
    if not (classify or async_fault)(error):
        return {}
    found = list(_LINE.finditer(error or ""))
    if not found:
        return {}
    match = found[-1]  # the last one: the runner names the candidate's line at the end of its paragraph
    number = int(match.group("line"))
    code = _source_line(source, number)
    where = f"line {number} of {_short(match.group('file'), candidate_file)}" + (f": `{code}`" if code else "")
    return {"tool": "CUDA_LAUNCH_BLOCKING=1", "kernel": launched_kernel(code), "where": where,
            "report": (error or "")[:REPORT_CHARS]}


def launched_kernel(code: str) -> str:
    """What a line of Python launches: the Triton kernel of `name[grid](...)`, else the last function
    it calls (an extension's `module.fn(...)`); '' when it calls nothing."""
    match = _TRITON_LAUNCH.search(code or "")
    if match:
        return match.group(1)
    calls = _CALL.findall(code or "")
    return calls[-1] if calls else ""


def merged(sanitizer: dict[str, str], blocking: dict[str, str]) -> dict[str, str]:
    """One record from both tools: the launch line (launch blocking), the faulting access's line and
    the kernel (the sanitizer's, which knows the kernel that ran), the sanitizer's report."""
    if not sanitizer:
        return dict(blocking)
    if not blocking:
        return dict(sanitizer)
    where = blocking["where"]
    if sanitizer.get("where"):
        where += f"; the faulting access at {sanitizer['where']}"
    return {"tool": f"{sanitizer['tool']} with {blocking['tool']}",
            "kernel": sanitizer.get("kernel") or blocking.get("kernel", ""), "where": where,
            "report": sanitizer.get("report") or blocking.get("report", "")}


def _source_line(source: str, number: int) -> str:
    lines = (source or "").splitlines()
    return lines[number - 1].strip()[:200] if 0 < number <= len(lines) else ""


def _short(path: str, candidate_file: str) -> str:
    """The candidate's file by its base name (the runner's copy lives in a scratch folder); another
    file keeps its path."""
    name = PurePath(path).name
    if candidate_file and PurePath(path).stem == PurePath(candidate_file).stem:
        return name
    return path
