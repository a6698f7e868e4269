"""Stall hot spots: the SASS instructions warps wait at, from ncu's source page (SourceCounters).

ncu attributes a warp-stall sample to the instruction the warp is *waiting to issue*, not to the
one that caused the wait: in a pointer chase the samples land on the `LEA` that needs the loaded
index, not on the `LDG` that loads it (H100 recording, tests/profile/fixtures/h100/latency_chase).
So each hot spot also carries its dominant stall reason (the page's per-reason `stall_*` columns)
and, when it waits on a memory result (long or short scoreboard), the load that produces a
register it reads.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field

from .parse import parse_number
from .sass import access_bits

# The source page's stall columns, as ncu 2025.3 labels them (`stall_long_sb`), -> (the stall name of
# metrics.STALL_REASONS, the PC-sampling metric behind the column: smsp__pcsamp_warps_issue_stalled_<it>).
STALL_COLUMNS: dict[str, tuple[str, str]] = {
    "long_sb": ("long_scoreboard", "long_scoreboard"), "short_sb": ("short_scoreboard", "short_scoreboard"),
    "math": ("math_pipe_throttle", "math_pipe_throttle"), "mio": ("mio_throttle", "mio_throttle"),
    "lg": ("lg_throttle", "lg_throttle"), "tex": ("tex_throttle", "tex_throttle"),
    "no_inst": ("no_instruction", "no_instructions"), "imc": ("imc_miss", "imc_miss"),
    "dispatch": ("dispatch_stall", "dispatch_stall"), "sleep": ("sleeping", "sleeping"),
    "barrier": ("barrier", "barrier"), "branch_resolving": ("branch_resolving", "branch_resolving"),
    "drain": ("drain", "drain"), "membar": ("membar", "membar"), "misc": ("misc", "misc"),
    "not_selected": ("not_selected", "not_selected"), "selected": ("selected", "selected"),
    "wait": ("wait", "wait"),
}
_PCSAMP_STALL = "smsp__pcsamp_warps_issue_stalled_"
SAMPLE_METRIC = "smsp__pcsamp_sample_count"  # the page's "# Samples" column
# What this parser reads from the page, as metrics to collect (needs.py): warp-stall samples per
# instruction and per reason. PC sampling only: no SASS patching (the SourceCounters section's
# per-instruction counters, which nothing here reads, are not needed).
SOURCE_METRICS: tuple[str, ...] = (SAMPLE_METRIC,) + tuple(_PCSAMP_STALL + m for _, m in STALL_COLUMNS.values())
_SAMPLE_HEADERS = ("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (All Cycles)", "# Samples", SAMPLE_METRIC)
_WAITS_ON_RESULT = ("long_scoreboard", "short_scoreboard")
_LOADS = ("LDG", "LDL", "LD", "LDS", "LDSM", "ATOMG", "ATOM", "ATOMS")
_INSTRUCTION = re.compile(r"^(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*)$")
_REGISTER = re.compile(r"\bR(\d+)\b")


@dataclass
class HotSpot:
    address: str
    source: str  # the SASS instruction text
    samples: float  # warp-stall samples attributed to it
    share: float  # of all samples in the kernel
    executed: float | None = None
    stall: str = ""  # dominant stall reason of its samples (metrics.STALL_REASONS name), "" if not listed
    waits_on: str = ""  # the load whose result it waits for, when the stall is a scoreboard wait


@dataclass
class _Row:
    address: str
    source: str
    samples: float = 0.0
    executed: float | None = None
    stalls: dict[str, float] = field(default_factory=dict)


def _sample_column(header: list[str]) -> int | None:
    for wanted in _SAMPLE_HEADERS:
        if wanted in header:
            return header.index(wanted)
    return next((i for i, cell in enumerate(header) if "Sampl" in cell), None)


def _stall_name(cell: str) -> str | None:
    """The stall reason of a per-reason column of all samples (labelled `stall_long_sb`, or named by its
    metric, `smsp__pcsamp_warps_issue_stalled_long_scoreboard`); None for other columns, not-issued ones too."""
    if cell.startswith("stall_") and "(" not in cell:
        suffix = cell[len("stall_"):]
        return STALL_COLUMNS[suffix][0] if suffix in STALL_COLUMNS else suffix
    if cell.startswith(_PCSAMP_STALL) and not cell.endswith("_not_issued"):
        metric = cell[len(_PCSAMP_STALL):]
        return next((name for name, m in STALL_COLUMNS.values() if m == metric), metric)
    return None


def _stall_columns(header: list[str]) -> dict[int, str]:
    """Column index -> stall name, for the per-reason columns of all samples (not the not-issued ones)."""
    return {index: name for index, cell in enumerate(header) if (name := _stall_name(cell)) is not None}


def _block_rows(header: list[str], block: list[list[str]]) -> list[_Row]:
    samples_at, source_at = _sample_column(header), header.index("Source")
    if samples_at is None:
        return []
    executed_at = header.index("Instructions Executed") if "Instructions Executed" in header else None
    address_at = header.index("Address") if "Address" in header else 0
    stall_at = _stall_columns(header)
    rows = []
    for cells in block:
        if len(cells) < len(header):
            continue
        stalls = {name: v for i, name in stall_at.items() if (v := parse_number(cells[i]))}
        rows.append(_Row(cells[address_at].strip(), cells[source_at].strip(), parse_number(cells[samples_at]) or 0.0,
                         parse_number(cells[executed_at]) if executed_at is not None else None, stalls))
    return rows


def _merge(into: dict[str, _Row], rows: list[_Row]) -> None:
    """Add a launch's rows to those of earlier launches of the same kernel (same address, same instruction)."""
    for row in rows:
        known = into.get(row.address)
        if known is None:
            into[row.address] = _Row(row.address, row.source, row.samples, row.executed, dict(row.stalls))
            continue
        known.samples += row.samples
        if row.executed is not None:
            known.executed = (known.executed or 0.0) + row.executed
        for name, value in row.stalls.items():
            known.stalls[name] = known.stalls.get(name, 0.0) + value


def _split(source: str) -> tuple[str, str]:
    """(opcode with modifiers, operands) of one SASS instruction; predicate guards dropped."""
    match = _INSTRUCTION.match(source)
    return (match.group(1), match.group(2)) if match else ("", "")


def _written(opcode: str, operands: str) -> set[int]:
    """Registers a load writes: its first operand, widened for 64/128-bit loads (`LDG.E.128 R4` -> R4..R7)."""
    first = _REGISTER.findall(operands.split(",", 1)[0])
    if not first:
        return set()
    count = max(1, access_bits(opcode) // 32)
    return set(range(int(first[0]), int(first[0]) + count))


def _producer(rows: list[_Row], index: int) -> str:
    """The nearest earlier load (wrapping around, for loop-carried values) that writes a register the
    instruction at `index` reads; "" when there is none."""
    _, operands = _split(rows[index].source)
    reads = {int(r) for r in _REGISTER.findall(operands.split(",", 1)[1] if "," in operands else "")}
    for step in range(1, len(rows)):
        opcode, theirs = _split(rows[(index - step) % len(rows)].source)
        if opcode.split(".")[0] in _LOADS and _written(opcode, theirs) & reads:
            return rows[(index - step) % len(rows)].source
    return ""


def _address(row: _Row) -> int:
    try:
        return int(row.address, 16)
    except ValueError:
        return 0


def _hotspots(rows: list[_Row], top: int) -> list[HotSpot]:
    """Hottest rows first (ties in address order); `rows` go in address order so the load a row waits
    for does not depend on which launch listed which instruction first."""
    rows = sorted(rows, key=_address)
    total = sum(r.samples for r in rows) or 1.0
    ranked = sorted((i for i, r in enumerate(rows) if r.samples), key=lambda i: (-rows[i].samples, i))[:top]
    spots = []
    for i in ranked:
        row = rows[i]
        stall = max(row.stalls, key=row.stalls.get) if row.stalls else ""
        waits_on = _producer(rows, i) if stall in _WAITS_ON_RESULT else ""
        spots.append(HotSpot(row.address, row.source, row.samples, row.samples / total, row.executed, stall, waits_on))
    return spots


def parse_source_page(text: str, top: int = 5) -> dict[str, list[HotSpot]]:
    """Top SASS instructions by warp-stall samples, per kernel, from `ncu --page source --csv`.

    The export holds one block per profiled launch: a `"Kernel Name","<name>"` row, a header row
    (`"Address","Source","Warp Stall Sampling (All Samples)",...`), then one row per instruction.
    Launches of one kernel name are summed (a later block used to replace an earlier one); blocks
    without a name row are keyed "". Returns {} when there is no source table (SourceCounters not
    collected, or an export ncu could not produce).
    """
    merged: dict[str, dict[str, _Row]] = {}
    name, header, block = "", None, []

    def close():
        if header is not None:
            _merge(merged.setdefault(name, {}), _block_rows(header, block))

    for row in csv.reader(text.splitlines()):
        if len(row) >= 2 and row[0] == "Kernel Name":
            close()
            name, header, block = row[1].strip(), None, []
        elif "Source" in row and header is None:
            header = row
        elif header is not None:
            block.append(row)
    close()
    return {kernel: _hotspots(list(rows.values()), top) for kernel, rows in merged.items()}
