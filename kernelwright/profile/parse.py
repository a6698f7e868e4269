"""Parse Nsight Compute `--page raw --csv` output into one `KernelProfile` per kernel launch.

The raw page is wide: a header row (`"ID","Process ID",...,"Kernel Name",...,"CC",<metric>...`),
a units row (empty cells for the fixed columns, then `byte`, `nsecond`, `%`, ...), then one row
per profiled launch. Numbers may carry thousands separators (`"1,234,567"`), cells may read `n/a`,
and program output or `==PROF==` lines may surround the table: all handled here. Values are
converted to base units (bytes, nanoseconds, hertz) whatever `--print-units` was used, so rules
compare like with like. Pure Python: runs wherever the CSV was copied to.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field

from .metrics import lookup

FIXED_COLUMNS = (
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
    "Block Size", "Grid Size", "Device", "CC",
)

_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "u": 1e-6, "n": 1e-9, "p": 1e-12}
_BINARY_PREFIX = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
# unit spellings -> base unit; ncu 2025.3 prints durations as "ns" with --print-units base, older
# versions and other print modes as "nsecond", "usecond", "msecond"
_BASES = {"byte": "byte", "second": "second", "s": "second", "hz": "hz", "bit": "bit"}
_TUPLE = re.compile(r"\(?\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)?")


class NcuParseError(ValueError):
    """The text is not an ncu raw CSV export; the message quotes what was found instead."""


@dataclass
class KernelProfile:
    """One kernel (one launch, or several launches of one name after `aggregate_by_name`)."""

    name: str
    launch_id: int = 0
    duration_ns: float | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    regs: int | None = None
    smem: int | None = None  # static + dynamic shared memory per block, bytes
    metrics: dict[str, float] = field(default_factory=dict)  # raw ncu name -> value in base units
    device: str = ""
    cc: str = ""
    launches: int = 1  # launches merged into this profile; duration_ns and metrics are per launch

    @property
    def total_ns(self) -> float:
        return (self.duration_ns or 0.0) * self.launches

    def get(self, key: str) -> float | None:
        """A short key from metrics.ALIASES (e.g. "dram_pct"), or a raw metric name."""
        return lookup(self.metrics, key)

    @property
    def blocks(self) -> int | None:
        return self.grid[0] * self.grid[1] * self.grid[2] if self.grid else None

    @property
    def threads_per_block(self) -> int | None:
        return self.block[0] * self.block[1] * self.block[2] if self.block else None


def parse_number(text: str) -> float | None:
    """`"1,234.5"` -> 1234.5; `n/a`, empty and words -> None. Never raises."""
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned.lower() in {"n/a", "nan", "-"}:
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def to_base(value: float, unit: str) -> tuple[float, str]:
    """Convert `value` in `unit` (e.g. "Mbyte", "usecond", "us", "Gbyte/second") to base units.

    Time is expressed in nanoseconds, ncu's base unit for durations; bytes and hertz in units.
    Units without a known prefix+base ("%", "register/thread", "cycle", "inst") are returned as is.
    """
    unit = unit.strip()
    head, sep, tail = unit.partition("/")
    for prefixes in (_BINARY_PREFIX, _PREFIX):
        for prefix, factor in prefixes.items():
            if not head.startswith(prefix):
                continue
            base = head[len(prefix):]
            if base.lower() not in _BASES:
                continue
            base = _BASES[base.lower()]
            if base == "second":  # durations in ns
                factor *= 1e9
                base = "nsecond"
            return value * factor, base + sep + tail
    return value, unit


def _parse_tuple(text: str) -> tuple[int, int, int] | None:
    match = _TUPLE.search(text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def _rows(text: str) -> list[list[str]]:
    """CSV rows of the lines that look like CSV (quoted cells); `==PROF==` and program output drop out."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    return list(csv.reader(lines))


def _find_header(rows: list[list[str]]) -> int:
    for index, row in enumerate(rows):
        if row and row[0] == "ID" and "Kernel Name" in row:
            return index
    return -1


def parse_raw_csv(text: str) -> list[KernelProfile]:
    """All launches in an ncu `--page raw --csv` export, in launch order.

    Raises NcuParseError when there is no raw-page header (e.g. ncu printed only errors), quoting
    the first lines of the text so the reason is visible to whoever reads the error.
    """
    rows = _rows(text)
    start = _find_header(rows)
    if start < 0:
        head = "\n".join(text.strip().splitlines()[:6]) or "(empty output)"
        raise NcuParseError(f"no ncu raw-page CSV header found; the output begins:\n{head}")
    header = rows[start]
    units = [""] * len(header)
    body = rows[start + 1:]
    if body and len(body[0]) == len(header) and not body[0][0].strip():
        units, body = body[0], body[1:]
    return [_profile(header, units, row) for row in body if len(row) == len(header) and row[0].strip()]


def _profile(header: list[str], units: list[str], row: list[str]) -> KernelProfile:
    cells = dict(zip(header, row, strict=False))
    metrics: dict[str, float] = {}
    for name, unit, cell in zip(header, units, row, strict=False):
        if name in FIXED_COLUMNS:
            continue
        value = parse_number(cell)
        if value is not None:
            metrics[name] = to_base(value, unit)[0]
    profile = KernelProfile(
        name=cells.get("Kernel Name", "").strip(),
        launch_id=int(parse_number(cells.get("ID", "")) or 0),
        grid=_parse_tuple(cells.get("Grid Size", "")),
        block=_parse_tuple(cells.get("Block Size", "")),
        metrics=metrics,
        device=cells.get("Device", ""),
        cc=cells.get("CC", ""),
    )
    profile.duration_ns = profile.get("duration_ns")
    regs = profile.get("registers")
    profile.regs = int(regs) if regs is not None else None
    smem = [v for v in (profile.get("smem_static"), profile.get("smem_dynamic")) if v is not None]
    profile.smem = int(sum(smem)) if smem else None
    return profile


def function_base(name: str) -> str:
    """`void ns::k<(bool)1, 4>(float *, int)` -> `k`: the bare function name of a kernel signature.

    ncu prints names demangled or as function bases depending on options; compilers emit mangled
    symbols. Comparing bare names lets the three be matched. `(anonymous namespace)::` is a namespace,
    not the start of the parameter list (`at::native::(anonymous namespace)::softmax_warp_forward<...>`).
    """
    depth, bare = 0, []
    for char in name.replace("(anonymous namespace)::", ""):  # drop template arguments, which may themselves hold parentheses
        if char == "<":
            depth += 1
        elif char == ">" and depth:
            depth -= 1
        elif depth == 0:
            bare.append(char)
    text = "".join(bare).split("(")[0].strip()
    return text.split()[-1].split("::")[-1] if text else ""


def aggregate_by_name(profiles: list[KernelProfile]) -> list[KernelProfile]:
    """One profile per kernel name, hottest (largest total time) first; values are per-launch means.

    A forward pass may launch the same kernel several times (one GEMM per layer); the Planner cares
    about the kernel, not the launch. Counts (bytes, instructions) are averaged per launch too, so a
    metric keeps the meaning "per launch" whatever the number of launches.
    """
    groups: dict[str, list[KernelProfile]] = {}
    for profile in profiles:
        groups.setdefault(profile.name, []).append(profile)
    merged = [_merge(group) for group in groups.values()]
    return sorted(merged, key=lambda p: -p.total_ns)


def _merge(group: list[KernelProfile]) -> KernelProfile:
    if len(group) == 1:
        return group[0]
    weights = [max(p.duration_ns or 0.0, 1e-9) for p in group]
    names = {name for p in group for name in p.metrics}
    metrics = {}
    for name in names:
        pairs = [(p.metrics[name], w) for p, w in zip(group, weights, strict=False) if name in p.metrics]
        metrics[name] = sum(v * w for v, w in pairs) / sum(w for _, w in pairs)
    first = group[0]
    durations = [p.duration_ns for p in group if p.duration_ns is not None]
    return KernelProfile(
        name=first.name,
        launch_id=first.launch_id,
        duration_ns=sum(durations) / len(durations) if durations else None,
        grid=first.grid,
        block=first.block,
        regs=first.regs,
        smem=first.smem,
        metrics=metrics,
        device=first.device,
        cc=first.cc,
        launches=sum(p.launches for p in group),
    )
