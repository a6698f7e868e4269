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
from .checks import flag_code
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
           vendor: list[str]) -> WorkRecord:
    reference = work_counts(ref_ops)
    python = work_counts(buckets.get("python", {}))
    extension = work_counts(buckets.get("extension", {}))
    torch = python + extension
    replaced = {k: reference[k] - torch.get(k, 0) for k in reference if reference[k] > torch.get(k, 0)}
    return WorkRecord(rules=rules, reference=dict(reference), torch=dict(torch), python=dict(python),
                      extension=dict(extension), replaced=replaced, launches=launches,
                      libraries=[Path(p).name for p in libraries], vendor=list(vendor))


def _show(counts: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "nothing"


def _flag(check: str, message: str) -> Flag:
    return Flag(flag_code(check), REJECT, message, check=check)


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
             source: str) -> tuple[WorkRecord, list[Flag]]:
    """The record and the flags of the checks `rule_set` names (own launches, torch work, vendors)."""
    checks = rule_set.check_ids()
    vendor, aten, unreadable = [], Counter(), []
    if "extension_libraries" in checks or "extension_torch_ops" in checks:
        vendor, aten, unreadable = scan_libraries(libraries)
    if "extension_libraries" in checks:
        vendor += scan_source(source)
    work = record(rule_set.name, ref_ops, buckets, launches, libraries, vendor)
    python_names = {n for n in buckets.get("python", {}) if work_kind(n) is not None}
    torch_names = python_names | {n for n in buckets.get("extension", {}) if work_kind(n) is not None}
    work.libraries = [name for name in work.libraries if not any(u.startswith(name + " ") for u in unreadable)]
    work.libraries += unreadable
    flags = [own_kernel_flag(work) if "own_kernel_launch" in checks else None,
             torch_work_flag(work, torch_names) if "torch_work" in checks else None,
             python_work_flag(work, python_names) if "python_torch_ops" in checks else None,
             extension_work_flag(work, aten) if "extension_torch_ops" in checks else None,
             vendor_flag(work) if "extension_libraries" in checks else None]
    return work, [f for f in flags if f is not None]
