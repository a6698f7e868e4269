"""The device's two ceilings, measured once: copy bandwidth and matrix-product rate per dtype.

The speed-of-light floor (floor.py) divides a problem's bytes and FLOPs by these. Datasheet
numbers overstate what any kernel reaches, so the floor uses what the device really did: a large
device-to-device copy (bytes read + bytes written) and a large random matrix product through
torch (cuBLAS) per dtype, medians of several timed calls. Measured peaks are cached as JSON in
<cache>/peaks.json (env.cache_root: $KW_CACHE_DIR or ~/.cache/kernelwright)
keyed by device name and driver (`kernelwright device-peaks`).
The datasheet table below is only a cold-start fallback and is marked as such in every record.

Measured alone: `ensure_peaks` measures with the device's lock held exclusively (`gpulock`), so no
judge's trials, timing or baselines run beside it, and every candidate process of the judge is
stopped meanwhile (a runner runs only while its checker holds the device). A measured value
outside `PLAUSIBLE` times its datasheet figure (peaks measured while three runners shared an
H100 came out 2.3x low) is measured again after a pause; still outside, it is recorded in
`Peaks.notes` and `peaks_for` uses the datasheet figures instead (errs towards a lower floor).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .cachedir import cache_root
from .config import JudgeConfig
from . import env
from .gpulock import lock_for

MATMUL_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp64")
PLAUSIBLE = (0.5, 1.2)  # measured / datasheet
RETRY_PAUSE_S = 2.0
COPY_BYTES = 2**30  # per buffer: far beyond any L2
MATMUL_SIZE = {"fp32": 8192, "tf32": 8192, "bf16": 8192, "fp16": 8192, "fp64": 4096}


@dataclass
class Peaks:
    device_name: str
    driver: str
    copy_gbps: float  # bytes read + written per second / 1e9
    tflops: dict[str, float] = field(default_factory=dict)  # "fp32", "tf32", "bf16", "fp16", "fp64"
    source: str = "measured"  # "measured" or "datasheet: <which card>"
    measured_at: str = ""
    torch: str = ""
    notes: list[str] = field(default_factory=list)  # values outside PLAUSIBLE x the datasheet's, twice

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Peaks":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


# Datasheet ceilings (dense, no sparsity) for cold start only. Copy is an achievable
# device-to-device rate (~90% of the 3.35 TB/s HBM3 figure), not the datasheet number.
# fp32 is the CUDA-core rate; a float32 problem may also use 3xTF32 on the tensor cores (floor.py).
DATASHEET: dict[str, dict] = {
    "H100 SXM": {"match": ("H100", ("SXM", "HBM3")), "copy_gbps": 3000.0,
                 "tflops": {"fp32": 67.0, "tf32": 494.0, "bf16": 989.0, "fp16": 989.0, "fp64": 67.0}},
    "H100 PCIe": {"match": ("H100", ("PCIe",)), "copy_gbps": 1800.0,
                  "tflops": {"fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp64": 51.0}},
    "H200": {"match": ("H200", ("",)), "copy_gbps": 4300.0,
             "tflops": {"fp32": 67.0, "tf32": 494.0, "bf16": 989.0, "fp16": 989.0, "fp64": 67.0}},
}


def datasheet_peaks(device_name: str, driver: str = "") -> Peaks | None:
    """The fallback ceilings for a known card, or None."""
    for card, entry in DATASHEET.items():
        family, variants = entry["match"]
        if family in device_name and any(v in device_name for v in variants):
            return Peaks(device_name, driver, entry["copy_gbps"], dict(entry["tflops"]), source=f"datasheet: {card}")
    return None


# ---------------------------------------------------------------- cache


def peaks_path(cache_dir: str | os.PathLike | None = None) -> Path:
    return cache_root(cache_dir) / "peaks.json"


def _key(device_name: str, driver: str) -> str:
    return f"{device_name} | driver {driver}"


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def load_peaks(device_name: str, driver: str | None = None, cache_dir=None) -> Peaks | None:
    """Measured peaks for this device and driver (default: the driver installed here), or None."""
    if driver is None:
        driver = env.driver_version()
    entry = _read_cache(peaks_path(cache_dir)).get(_key(device_name, driver))
    try:
        return Peaks.from_dict(entry) if entry else None
    except TypeError:  # an entry from an incompatible version: measure again
        return None


def save_peaks(peaks: Peaks, cache_dir=None) -> Path:
    path = peaks_path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read_cache(path)
    data[_key(peaks.device_name, peaks.driver)] = peaks.to_dict()
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(path)  # atomic: a concurrent reader sees the old or the new file, never half
    return path


def peaks_for(device: str, cache_dir=None) -> Peaks | None:
    """Cached measured peaks, else the datasheet fallback, else None (unknown card or CPU)."""
    if not str(device).startswith("cuda"):
        return None
    name, driver = env.device_name(device), env.driver_version()
    measured, sheet = load_peaks(name, driver, cache_dir), datasheet_peaks(name, driver)
    if measured is not None and measured.notes and sheet is not None:
        sheet.source += f" (measured peaks implausible: {'; '.join(measured.notes)})"
        return sheet
    return measured or sheet


# ---------------------------------------------------------------- measuring


_PEAK_TIMING = JudgeConfig(warmup_ms=100.0, rep_ms=600.0, min_reps=10, max_reps=200, flush_l2=False)


def measure_copy_gbps(device: str = "cuda", nbytes: int = COPY_BYTES) -> float:
    import torch  # noqa: PLC0415 -- peaks.py is imported without torch by target.py (the search and the agents read targets) and the MCP server

    from .timing import measure  # noqa: PLC0415 -- peaks.py is imported without torch by target.py (the search and the agents read targets) and the MCP server

    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    stats, _ = measure(lambda: dst.copy_(src), _PEAK_TIMING, device)
    return 2 * nbytes / (stats.median_ms * 1e-3) / 1e9


def measure_matmul_tflops(kind: str, device: str = "cuda", size: int | None = None) -> float:
    """TFLOP/s of one size x size x size product on random data; kind picks dtype and TF32."""
    import torch  # noqa: PLC0415 -- peaks.py is imported without torch by target.py (the search and the agents read targets) and the MCP server

    from .timing import measure  # noqa: PLC0415 -- peaks.py is imported without torch by target.py (the search and the agents read targets) and the MCP server

    n = size or MATMUL_SIZE[kind]
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
             "fp16": torch.float16, "fp64": torch.float64}[kind]
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    try:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        out = torch.empty(n, n, device=device, dtype=dtype)
        stats, _ = measure(lambda: torch.matmul(a, b, out=out), _PEAK_TIMING, device)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return 2 * n**3 / (stats.median_ms * 1e-3) / 1e12


def measure_peaks(device: str = "cuda") -> Peaks:
    """Measure copy bandwidth and every matmul dtype's rate on `device` (about a minute)."""
    import torch  # noqa: PLC0415 -- peaks.py is imported without torch by target.py (the search and the agents read targets) and the MCP server


    tflops = {}
    for kind in MATMUL_DTYPES:
        tflops[kind] = round(measure_matmul_tflops(kind, device), 2)
        torch.cuda.empty_cache()
    return Peaks(
        device_name=env.device_name(device),
        driver=env.driver_version(),
        copy_gbps=round(measure_copy_gbps(device), 1),
        tflops=tflops,
        source="measured",
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
        torch=torch.__version__,
    )


def implausible(peaks: Peaks, sheet: Peaks | None) -> dict[str, tuple[float, float]]:
    """Values outside PLAUSIBLE x the datasheet's: name -> (measured, datasheet)."""
    if sheet is None:
        return {}
    pairs = {"copy_gbps": (peaks.copy_gbps, sheet.copy_gbps)}
    pairs.update({kind: (peaks.tflops.get(kind, 0.0), sheet.tflops.get(kind, 0.0)) for kind in sheet.tflops})
    low, high = PLAUSIBLE
    return {name: (got, want) for name, (got, want) in pairs.items()
            if want > 0 and not low <= got / want <= high}


def measure_checked(device: str = "cuda", sleep=time.sleep) -> Peaks:
    """`measure_peaks`, with values outside PLAUSIBLE x the datasheet's measured again once and,
    still outside, named in `notes`."""
    peaks = measure_peaks(device)
    off = implausible(peaks, datasheet_peaks(peaks.device_name, peaks.driver))
    if not off:
        return peaks
    sleep(RETRY_PAUSE_S)
    again = measure_peaks(device)
    still = implausible(again, datasheet_peaks(again.device_name, again.driver))
    again.notes = [f"{name} measured {got:g} twice, {got / want:.2f}x the datasheet's {want:g}"
                   for name, (got, want) in still.items()]
    return again


def ensure_peaks(device: str = "cuda", force: bool = False, cache_dir=None) -> Peaks:
    """Cached peaks for this device, measured (alone on the device: its lock held exclusively) and
    saved when missing (or when `force`)."""
    if not force:
        cached = load_peaks(env.device_name(device), env.driver_version(), cache_dir)
        if cached:
            return cached
    with lock_for(device, cache_dir).exclusive():
        peaks = measure_checked(device)
    save_peaks(peaks, cache_dir)
    return peaks
