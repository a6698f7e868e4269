"""Compiler resource reports: registers, shared memory, spills and stack per kernel function.

Three sources give the same facts: `ptxas -v` output (CUDA C++ builds, or PTX re-assembled),
`cuobjdump -res-usage` on any binary holding device code (a load_inline extension's .so, a cubin),
and the metadata of a compiled Triton kernel. All parsers are pure and return `ResourceReport`s.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

_ENTRY = re.compile(r"(?:^|\s)ptxas\S*\s+info\s+:\s+Compiling entry function '([^']+)'")
_PROPS = re.compile(r"(?:^|\s)ptxas\S*\s+info\s+:\s+Function properties for '?([^'\s]+)'?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"(?:^|\s)ptxas\S*\s+info\s+:\s+Used (\d+) registers(.*)$")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_RES_FUNC = re.compile(r"^\s*Function (\S+):\s*$")
_RES_FIELD = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")


@dataclass
class ResourceReport:
    function: str  # symbol as the compiler names it (mangled for CUDA C++)
    source: str  # "ptxas", "cuobjdump", "triton"
    registers: int | None = None
    shared_bytes: int | None = None  # static shared memory (Triton: what the launch requests)
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    stack_bytes: int | None = None
    local_bytes: int | None = None
    barriers: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None

    @property
    def spills(self) -> bool:
        return bool((self.spill_store_bytes or 0) + (self.spill_load_bytes or 0))

    def to_dict(self) -> dict:
        return asdict(self)


def parse_ptxas_verbose(text: str) -> list[ResourceReport]:
    """Reports for every entry function in `ptxas -v` output (any ptxas build: `ptxas-blackwell` too)."""
    reports: dict[str, ResourceReport] = {}
    current: str | None = None
    for line in text.splitlines():
        line = line.rstrip()
        if match := _ENTRY.search(line) or _PROPS.search(line):
            current = match.group(1)
            reports.setdefault(current, ResourceReport(current, "ptxas"))
            continue
        if current is None:
            continue
        report = reports[current]
        if match := _FRAME.search(line):
            report.stack_bytes, report.spill_store_bytes, report.spill_load_bytes = map(int, match.groups())
        elif match := _USED.search(line):
            report.registers = int(match.group(1))
            rest = match.group(2)
            if barriers := _BARRIERS.search(rest):
                report.barriers = int(barriers.group(1))
            smem = _SMEM.search(rest)
            report.shared_bytes = int(smem.group(1)) if smem else 0
    return list(reports.values())


def parse_res_usage(text: str) -> list[ResourceReport]:
    """Reports from `cuobjdump -res-usage` (`REG:32 STACK:640 SHARED:0 LOCAL:0 ...` per function)."""
    reports: list[ResourceReport] = []
    current: ResourceReport | None = None
    for line in text.splitlines():
        if match := _RES_FUNC.match(line):
            current = ResourceReport(match.group(1), "cuobjdump")
            reports.append(current)
            continue
        if current is None or "REG:" not in line:
            continue
        fields = {k: int(v) for k, v in _RES_FIELD.findall(line)}
        current.registers = fields.get("REG")
        current.stack_bytes = fields.get("STACK")
        current.shared_bytes = fields.get("SHARED")
        current.local_bytes = fields.get("LOCAL")
    return reports


def from_triton_metadata(name: str, metadata: dict) -> ResourceReport:
    """A report from what a compiled Triton kernel knows about itself.

    `metadata` holds plain values: `n_regs`/`n_spills` (filled when the kernel was loaded on a
    device), `shared`, `num_warps`, `num_stages`. Triton's `n_spills` is the driver's per-thread
    local memory size divided by 4; Triton kernels use local memory only for spills, so it is
    stored back as bytes of spill stores and of local memory, the unit every other source uses.
    """
    spills = metadata.get("n_spills")
    local = None if spills is None else int(spills) * 4
    return ResourceReport(
        function=name,
        source="triton",
        registers=metadata.get("n_regs"),
        shared_bytes=metadata.get("shared"),
        spill_store_bytes=local,
        local_bytes=local,
        num_warps=metadata.get("num_warps"),
        num_stages=metadata.get("num_stages"),
    )


def triton_kernel_metadata(compiled) -> dict:
    """Plain metadata of a triton CompiledKernel (attributes differ a little across Triton 3.x)."""
    meta = getattr(compiled, "metadata", None)
    out = {
        "name": getattr(meta, "name", None),
        "shared": getattr(meta, "shared", None),
        "num_warps": getattr(meta, "num_warps", None),
        "num_stages": getattr(meta, "num_stages", None),
    }
    for attr in ("n_regs", "n_spills"):
        value = getattr(compiled, attr, None)
        if isinstance(value, (int, float)):
            out[attr] = int(value)
    return {k: v for k, v in out.items() if v is not None}


def find_tool(name: str) -> str | None:
    """`cuobjdump`, `nvdisasm`, `ptxas`: on PATH, under CUDA_HOME, or the copies Triton ships."""
    found = shutil.which(name)
    if found:
        return found
    candidates = [Path("/usr/local/cuda/bin") / name]
    try:
        import triton  # noqa: PLC0415 -- triton may be absent or broken: then PATH and CUDA_HOME only

        candidates.append(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)
    except Exception:  # noqa: BLE001 -- triton absent or broken: PATH and CUDA_HOME only
        pass
    return next((str(p) for p in candidates if p.is_file()), None)


def run_tool(args: list[str], timeout_s: float = 60.0) -> tuple[bool, str]:
    """Run a CUDA binary tool; (ok, stdout+stderr). Never raises: a missing tool is a message."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{args[0]} failed: {exc}"
    return done.returncode == 0, done.stdout + done.stderr


def binary_resources(path: str | Path, timeout_s: float = 60.0) -> tuple[list[ResourceReport], str]:
    """`cuobjdump -res-usage` on a cubin or a shared library; (reports, note when unavailable)."""
    tool = find_tool("cuobjdump")
    if not tool:
        return [], "cuobjdump not found"
    ok, out = run_tool([tool, "-res-usage", str(path)], timeout_s)
    return (parse_res_usage(out), "") if ok else ([], out.strip()[-300:])
