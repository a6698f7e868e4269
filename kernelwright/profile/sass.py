"""SASS instruction mix (cuobjdump -sass / nvdisasm).

The static mix answers questions the counters cannot: are global loads 32-bit (`LDG.E`) or
128-bit (`LDG.E.128`), does the kernel touch local memory (`LDL`/`STL`: spills), does it use
tensor cores (`HMMA`, Hopper's `HGMMA`), async copies (`LDGSTS`, TMA `UTMALDG`)? Hot spots, from
ncu's source page, live in hotspots.py.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .resources import find_tool, run_tool

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_NVDISASM_FUNCTION = re.compile(r"^\s*\.text\.(\S+?):?\s*$")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_x]+)*)")
_WIDTH_SUFFIX = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128, "256": 256}

TENSOR_OPS = ("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "BGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCMMA")
FP32_OPS = ("FFMA", "FADD", "FMUL", "FFMA2", "FADD2", "FMUL2")
ASYNC_COPY_OPS = ("LDGSTS", "UTMALDG", "UBLKCP", "UTMASTG")


@dataclass
class SassSummary:
    """Static instruction counts of one kernel function."""

    function: str
    instructions: int = 0
    opcodes: dict[str, int] = field(default_factory=dict)  # base opcode -> count
    global_loads: dict[int, int] = field(default_factory=dict)  # access width in bits -> count
    global_stores: dict[int, int] = field(default_factory=dict)
    local_ops: int = 0  # LDL + STL: spills or local arrays
    shared_ops: int = 0  # LDS/STS/LDSM/...
    tensor_ops: int = 0
    fp32_ops: int = 0
    async_copies: int = 0
    barriers: int = 0
    shuffles: int = 0

    @property
    def dominant_load_bits(self) -> int | None:
        """The global-load width used most often; None without global loads."""
        if not self.global_loads:
            return None
        return max(self.global_loads.items(), key=lambda kv: (kv[1], kv[0]))[0]

    def to_dict(self) -> dict:
        return {
            "function": self.function, "instructions": self.instructions,
            "global_loads": {str(k): v for k, v in sorted(self.global_loads.items())},
            "global_stores": {str(k): v for k, v in sorted(self.global_stores.items())},
            "local_ops": self.local_ops, "shared_ops": self.shared_ops, "tensor_ops": self.tensor_ops,
            "fp32_ops": self.fp32_ops, "async_copies": self.async_copies, "barriers": self.barriers,
            "shuffles": self.shuffles, "top_opcodes": dict(Counter(self.opcodes).most_common(8)),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "SassSummary":
        summary = cls(data.get("function", ""))
        for key in ("instructions", "local_ops", "shared_ops", "tensor_ops", "fp32_ops", "async_copies",
                    "barriers", "shuffles"):
            setattr(summary, key, int(data.get(key, 0)))
        summary.global_loads = {int(k): v for k, v in data.get("global_loads", {}).items()}
        summary.global_stores = {int(k): v for k, v in data.get("global_stores", {}).items()}
        summary.opcodes = dict(data.get("top_opcodes", {}))
        return summary


def access_bits(opcode: str) -> int:
    """Width in bits of a memory instruction from its modifiers: `LDG.E.128` -> 128, `LDG.E` -> 32."""
    for part in opcode.split(".")[1:]:
        if part in _WIDTH_SUFFIX:
            return _WIDTH_SUFFIX[part]
    return 32


def _count(summary: SassSummary, opcode: str) -> None:
    base = opcode.split(".")[0]
    summary.instructions += 1
    summary.opcodes[base] = summary.opcodes.get(base, 0) + 1
    if base == "LDG":
        bits = access_bits(opcode)
        summary.global_loads[bits] = summary.global_loads.get(bits, 0) + 1
    elif base in ("STG", "RED", "ATOMG"):
        bits = access_bits(opcode)
        summary.global_stores[bits] = summary.global_stores.get(bits, 0) + 1
    elif base in ("LDL", "STL"):
        summary.local_ops += 1
    elif base in ("LDS", "STS", "LDSM", "STSM", "ATOMS"):
        summary.shared_ops += 1
    elif base in TENSOR_OPS:
        summary.tensor_ops += 1
    elif base in FP32_OPS:
        summary.fp32_ops += 1
    elif base in ASYNC_COPY_OPS:
        summary.async_copies += 1
    elif base in ("BAR", "SYNCS"):
        summary.barriers += 1
    elif base == "SHFL":
        summary.shuffles += 1


def parse_sass(text: str) -> list[SassSummary]:
    """One summary per function in `cuobjdump -sass` (or `nvdisasm`) output; padding NOPs skipped."""
    summaries: list[SassSummary] = []
    current: SassSummary | None = None
    for line in text.splitlines():
        if match := _FUNCTION.match(line) or _NVDISASM_FUNCTION.match(line):
            current = SassSummary(match.group(1))
            summaries.append(current)
            continue
        if current is None:
            continue
        if match := _INSTRUCTION.match(line):
            opcode = match.group(1)
            if opcode != "NOP":
                _count(current, opcode)
    return summaries


def disassemble(path: str | Path, timeout_s: float = 120.0) -> tuple[list[SassSummary], str, str]:
    """(summaries, raw listing, note): cuobjdump -sass on a cubin or .so, nvdisasm for a bare cubin."""
    path = Path(path)
    attempts = []
    if tool := find_tool("cuobjdump"):
        attempts.append([tool, "-sass", str(path)])
    if path.suffix == ".cubin" and (tool := find_tool("nvdisasm")):
        attempts.append([tool, str(path)])
    if not attempts:
        return [], "", "neither cuobjdump nor nvdisasm found"
    note = ""
    for args in attempts:
        ok, out = run_tool(args, timeout_s)
        summaries = parse_sass(out) if ok else []
        if summaries:
            return summaries, out, ""
        note = out.strip()[-300:]
    return [], "", note
