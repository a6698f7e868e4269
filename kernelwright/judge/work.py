"""Whose code did the work: the rule set's checks on the op record (see kernelwright.rules).

Inputs are what the worker recorded: the reference's ops, the candidate's ops sorted by origin
(`OpRecorder` buckets: "python" for forward's own Python, "extension" for ATen ops its C++ called),
its own launches (`own_code.OwnCode`), and what its built libraries and sources reveal
(`scan_libraries`, `scan_source`). `evaluate` runs the checks the rule set names and returns the
`WorkRecord` for the verdict with the flags. Counting is per work kind (`problem.ops.work_kind`):

- `torch_work`: for every kind, torch (Python + extension) runs no more ops than the reference, and
  fewer for at least one kind; a reference that runs no work at all leaves the candidate none.
- `python_torch_ops`: no work kind at all among forward's Python ops.
- `extension_torch_ops`: no work kind among the extension's ATen ops, nor ATen compute symbols
  referenced by its libraries (they would run inside calls the dispatcher does not show).
- `extension_libraries`: no vendor library linked or referenced, no CUTLASS/CuTe in the sources.
- `own_kernel_launch`: the recorded forward launched a Triton kernel, called the candidate's
  extension, or one of its compiled custom ops.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ..problem.ops import FREE_OPS, base_name, op_kind, work_counts, work_kind
from ..rules import RuleSet
from .checks import check_flag
from .elf import ElfError, read_elf
from .verdict import REJECT, Flag, WorkRecord

VENDOR_LIBRARY = re.compile(r"^lib(cublasLt|cublas|cudnn\w*|cusparse\w*|cusolver\w*|cufft\w*)\.so")
VENDOR_SYMBOL = re.compile(r"^(cublasLt|cublas|cudnn|cusparse|cusolver|cufft)[A-Z_]")
VENDOR_INCLUDE = re.compile(r"#\s*include\s*[<\"](cutlass|cute|cublasLt|cublas|cudnn|cusparse|cusolver|cufft)\w*[/.]",
                            re.IGNORECASE)
CUTLASS_SYMBOL = re.compile(r"\d+cutlass|\d+cute\d")
ATEN_OPS_SYMBOL = re.compile(r"_ZN2at4_ops(\d+)")


# ---------------------------------------------------------------------------------- evidence


def scan_libraries(paths: list[str]) -> tuple[list[str], Counter, list[str]]:
    """(vendor findings, ATen compute ops referenced, libraries that could not be read) of the
    candidate's built libraries. An unreadable file is the judge's blind spot, not the candidate's
    fault: it is named in the record, not flagged."""
    findings: list[str] = []
    aten: Counter = Counter()
    unreadable: list[str] = []
    for path in paths:
        name = Path(path).name
        try:
            info = read_elf(path)
        except (OSError, ElfError) as exc:
            unreadable.append(f"{name} (not inspected: {exc})")
            continue
        findings += [f"{name} links {lib}" for lib in info.needed if VENDOR_LIBRARY.match(lib)]
        calls = sorted(s for s in info.undefined if VENDOR_SYMBOL.match(s))
        if calls:
            findings.append(f"{name} calls {', '.join(calls[:6])}" + (" ..." if len(calls) > 6 else ""))
        if any(CUTLASS_SYMBOL.search(s) for s in info.defined | info.undefined):
            findings.append(f"{name} instantiates CUTLASS/CuTe templates")
        for symbol in info.undefined:
            op = aten_op_of_symbol(symbol)
            if op is not None and work_kind(op) is not None:
                aten[op] += 1
    return findings, aten, unreadable


def scan_source(source: str) -> list[str]:
    """Vendor library headers the candidate's sources include (CUTLASS/CuTe, cuBLAS, cuDNN, ...)."""
    headers = sorted({m.group(0).split("<")[-1].split('"')[-1].rstrip("/.") for m in VENDOR_INCLUDE.finditer(source)})
    return [f"the sources include {h}" for h in headers]


def aten_op_of_symbol(symbol: str) -> str | None:
    """'mm' for `_ZN2at4_ops2mm4call...` (at::_ops::mm::call): the ATen op a C++ call reaches, with
    its overload suffix removed (`add_Tensor` -> `add`); None for other symbols or unknown ops."""
    match = ATEN_OPS_SYMBOL.match(symbol)
    if not match:
        return None
    length = int(match.group(1))
    name = symbol[match.end():match.end() + length]
    while name:
        if _known(name):
            return name
        if "_" not in name.strip("_"):
            return None
        name = name.rsplit("_", 1)[0]
    return None


def _known(name: str) -> bool:
    base = base_name(name)
    return op_kind(name) is not None or base in FREE_OPS or base.lstrip("_") in FREE_OPS


# ---------------------------------------------------------------------------------- the record


def record(rules: str, ref_ops, buckets: dict, launches: dict, libraries: list[str],
           vendor: list[str], thread_ops: dict[str, int] | None = None) -> WorkRecord:
    reference = work_counts(ref_ops)
    python = work_counts(buckets.get("python", {})) + Counter(thread_ops or {})
    extension = work_counts(buckets.get("extension", {}))
    torch = python + extension
    replaced = {k: reference[k] - torch.get(k, 0) for k in reference if reference[k] > torch.get(k, 0)}
    return WorkRecord(rules=rules, reference=dict(reference), torch=dict(torch), python=dict(python),
                      extension=dict(extension), replaced=replaced, launches=launches,
                      libraries=[Path(p).name for p in libraries], vendor=list(vendor),
                      threads=dict(thread_ops or {}))


def _show(counts: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "nothing"


def _flag(check: str, message: str) -> Flag:
    return check_flag(check, REJECT, message)


# ---------------------------------------------------------------------------------- the checks


def own_kernel_flag(work: WorkRecord) -> Flag | None:
    if any(work.launches.get(kind) for kind in ("triton", "extension", "custom_ops")):
        return None
    return _flag("own_kernel_launch", "ModelNew.forward launched no kernel of its own (no Triton launch, no call "
                 "into an extension it built): the work must run in your own Triton or CUDA kernels")


def _ops(names) -> str:
    return f" (torch ops: {', '.join(sorted(names))})" if names else ""


def torch_work_flag(work: WorkRecord, names=()) -> Flag | None:
    over = {k: n for k, n in work.torch.items() if n > work.reference.get(k, 0)}
    if not work.reference:
        if not work.torch:
            return None
        return _flag("torch_work", f"the reference does no counted work, yet ModelNew runs torch ops "
                     f"({_show(work.torch)}){_ops(names)}: compute in your own kernels")
    if not over and work.replaced:
        return None
    detail = (f"torch runs more than the reference for {_show(over)} (reference: {_show(work.reference)})" if over
              else f"torch still runs all of the reference's work ({_show(work.reference)})")
    return _flag("torch_work", f"ModelNew hands the reference's work to torch: {detail}{_ops(names)}. Your own "
                 "kernels must take over part of it: fewer torch ops of at least one kind, and no more of any kind")


def python_work_flag(work: WorkRecord, names=()) -> Flag | None:
    if not work.python:
        return None
    return _flag("python_torch_ops", f"ModelNew.forward runs torch compute in Python ({_show(work.python)})"
                 f"{_ops(names)}; under "
                 f"the {work.rules} rules only views, allocation, fills, copies and concatenation may run there")


def extension_work_flag(work: WorkRecord, aten_symbols: Counter) -> Flag | None:
    """ATen compute recorded inside the extension's calls, or referenced by its library (calls the
    dispatcher record cannot show, e.g. inside a compiled custom op)."""
    if not work.extension and not aten_symbols:
        return None
    parts = []
    if work.extension:
        parts.append(f"recorded in its calls: {_show(work.extension)}")
    if aten_symbols:
        parts.append(f"referenced by its library: {', '.join(f'at::{op}' for op in sorted(aten_symbols))}")
    return _flag("extension_torch_ops", f"the candidate's extension calls ATen compute ({'; '.join(parts)}); under the "
                 f"{work.rules} rules every compute op runs in a kernel you wrote")


def vendor_flag(work: WorkRecord) -> Flag | None:
    found = work.vendor
    if not found:
        return None
    return _flag("extension_libraries", f"the candidate uses vendor libraries ({'; '.join(found[:4])}); under the "
                 f"{work.rules} rules every compute op runs in a kernel you wrote")


def evaluate(rule_set: RuleSet, ref_ops, buckets: dict, launches: dict, libraries: list[str],
             source: str, thread_ops: dict[str, int] | None = None,
             own_kernels: int | None = None) -> tuple[WorkRecord, list[Flag]]:
    """The record and the flags of the checks `rule_set` names (own launches, torch work, vendors).
    `thread_ops`: torch compute the runner's profiler saw on threads other than the calling one
    (the dispatcher's record is per thread): counted as forward's Python."""
    checks = rule_set.check_ids()
    vendor, aten, unreadable = [], Counter(), []
    if "extension_libraries" in checks or "extension_torch_ops" in checks:
        vendor, aten, unreadable = scan_libraries(libraries)
    if "extension_libraries" in checks:
        vendor += scan_source(source)
    work = record(rule_set.name, ref_ops, buckets, launches, libraries, vendor, thread_ops)
    work.own_kernels = own_kernels
    python_names = {n for n in buckets.get("python", {}) if work_kind(n) is not None}
    python_names |= {f"{kind} (another thread)" for kind in (thread_ops or {})}
    torch_names = python_names | {n for n in buckets.get("extension", {}) if work_kind(n) is not None}
    work.libraries = [name for name in work.libraries if not any(u.startswith(name + " ") for u in unreadable)]
    work.libraries += unreadable
    flags = [own_kernel_flag(work) if "own_kernel_launch" in checks else None,
             torch_work_flag(work, torch_names) if "torch_work" in checks else None,
             python_work_flag(work, python_names) if "python_torch_ops" in checks else None,
             extension_work_flag(work, aten) if "extension_torch_ops" in checks else None,
             vendor_flag(work) if "extension_libraries" in checks else None]
    return work, [f for f in flags if f is not None]


# ---------------------------------------------------------------------------------- the runner's record


def phase_calls(observed: dict, phase: str) -> list[dict]:
    """The runner's per-call records of one profiler phase ("trials" or "timed")."""
    phases = observed.get("phases") or {}
    calls = observed.get("calls") or {}
    return [dict(record) for call, record in calls.items() if phases.get(call) == phase]


def per_call_max(records: list[dict], key: str) -> Counter:
    """Per kind, the most any one call ran (a lazily initialised first call does not count twice)."""
    found: Counter = Counter()
    for record in records:
        for kind, count in (record.get(key) or {}).items():
            found[kind] = max(found[kind], int(count))
    return found


def thread_ops(observed: dict, phase: str) -> dict[str, int]:
    """Torch compute on threads other than the calling one, per kind (the most in one call)."""
    return dict(per_call_max(phase_calls(observed, phase), "thread_ops"))


def own_kernels_seen(observed: dict, phase: str) -> int | None:
    """Kernels of the candidate's own code the profiler saw on the GPU in a phase (None: no kernel
    record, e.g. a CPU run)."""
    records = phase_calls(observed, phase)
    if not records or not any("kernel_us" in r and r.get("kernel_us") for r in records):
        return None
    return sum(int(r.get("own_kernels") or 0) for r in records)


def split_recorded(observed: dict) -> tuple[list[dict], list[dict]]:
    """The runner's per-call records of the calls its dispatcher recorded and of all the others."""
    recorded = {str(n) for n in observed.get("recorded") or []}
    calls = observed.get("calls") or {}
    watched = [dict(r) for n, r in calls.items() if n in recorded]
    unwatched = [dict(r) for n, r in calls.items() if n not in recorded]
    return watched, unwatched


def observed_work_flag(watched: list[dict], unwatched: list[dict], key: str) -> Flag | None:
    """Calls the judge did not record op by op (most trials, every timed call) must not run more
    torch work, per kind and per call, than the recorded ones did: a candidate that behaves when
    watched and hands work to torch otherwise is caught by what ran (`key`: "kernels" on a GPU, the
    profiler's kernels of every thread; "top_ops" on a CPU, its ATen ops of every thread)."""
    if not watched or not unwatched:
        return None
    seen, unseen = per_call_max(watched, key), per_call_max(unwatched, key)
    over = {kind: n for kind, n in unseen.items() if n > seen.get(kind, 0)}
    if not over:
        return None
    what = "library/torch kernels" if key == "kernels" else "torch ops"
    return _flag("observed_work", f"calls the judge did not record op by op ran more {what} than the ones it "
                 f"recorded ({_show(over)} per call at most, against {_show(dict(seen))}): the work must be the "
                 "same whether or not a call is watched")
