"""The target: the device a run's candidates are judged on, as one typed record.

A run's prompts describe this device (its limits, its measured ceilings, the software that
judges), so it must be the device of the evaluation, not of the machine that writes the prompts.
Three ways to know it:

- measured where the judge runs: `detect_target()` reads the GPU's properties through torch and
  its copy/matmul peaks (measured once and cached by `peaks.ensure_peaks`); the batch runner
  writes this record as `device.json` into its folder on first contact (`write_device_file`);
- named: `known_target("h100")` holds a known card's facts with datasheet peaks (marked so);
- read back from a device file (`read_target(path)`).

Stdlib only at import time (torch lazily): the batch runner on a GPU machine writes it, and the
search reads it anywhere.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files import atomic_write
from .env import driver_version, environment
from .peaks import datasheet_peaks, ensure_peaks, peaks_for

DEVICE_FILE = "device.json"
KINDS = ("cuda", "cpu")
SCHEMA = 1


@dataclass
class Target:
    """Facts of one evaluation device. Sizes are bytes; None means unknown."""

    kind: str  # "cuda" or "cpu"
    name: str  # "NVIDIA H100 80GB HBM3", "cpu:x86_64"
    arch: str = ""  # "sm_90"
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    smem_per_block: int | None = None  # the most one block may use (after opting in)
    smem_per_sm: int | None = None
    regs_per_block: int | None = None
    regs_per_sm: int | None = None
    regs_per_thread: int | None = None  # the most one thread may hold
    max_threads_per_block: int | None = None
    max_threads_per_sm: int | None = None
    warp_size: int | None = None
    peaks: dict[str, Any] | None = None  # peaks.Peaks.to_dict(): copy_gbps, tflops, source
    software: dict[str, str] = field(default_factory=dict)  # torch, triton, cuda, driver, nvcc, python
    # what the installed Triton offers (`probe_triton_features`: name -> present), found by
    # introspection where the target was detected; {} when Triton is missing or was not probed
    triton_features: dict[str, bool] = field(default_factory=dict)
    interpreter: bool = False  # Triton runs under TRITON_INTERPRET=1 (CPU evaluation)
    source: str = ""  # "measured on the device", "built-in facts (datasheet peaks)", "file ..."
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"target kind must be one of {', '.join(KINDS)}, got {self.kind!r}")

    @property
    def is_gpu(self) -> bool:
        return self.kind == "cuda"

    @property
    def copy_gbps(self) -> float | None:
        return (self.peaks or {}).get("copy_gbps")

    def tflops(self, kind: str) -> float | None:
        return ((self.peaks or {}).get("tflops") or {}).get(kind)

    @property
    def peaks_source(self) -> str:
        return str((self.peaks or {}).get("source") or "")

    def label(self) -> str:
        """One line: what a verdict's `device` and a prompt's heading say."""
        if not self.is_gpu:
            return f"{self.name} (Triton in the CPU interpreter)" if self.interpreter else self.name
        return f"{self.name} ({self.arch})" if self.arch else self.name

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Target":
        if not isinstance(data, dict):
            raise ValueError("a target must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def same_device(self, other: "Target | None") -> bool:
        return other is not None and (self.kind, self.name, self.arch) == (other.kind, other.name, other.arch)


# ------------------------------------------------------------------ known cards (no GPU needed)

_HOPPER = dict(arch="sm_90", smem_per_block=232448, smem_per_sm=233472, regs_per_block=65536,
               regs_per_sm=65536, regs_per_thread=255, max_threads_per_block=1024, max_threads_per_sm=2048,
               warp_size=32)
# name fragment -> (facts, datasheet card in peaks.DATASHEET or None)
KNOWN: dict[str, tuple[dict[str, Any], str | None]] = {
    "h100": (dict(name="NVIDIA H100 80GB HBM3", sm_count=132, l2_bytes=50 * 2**20, memory_bytes=80 * 10**9,
                  **_HOPPER), "NVIDIA H100 80GB HBM3"),
    "h200": (dict(name="NVIDIA H200", sm_count=132, l2_bytes=50 * 2**20, memory_bytes=141 * 10**9, **_HOPPER),
             "NVIDIA H200"),
    "a100": (dict(name="NVIDIA A100-SXM4-80GB", arch="sm_80", sm_count=108, l2_bytes=40 * 2**20,
                  memory_bytes=80 * 2**30, smem_per_block=166912, smem_per_sm=167936, regs_per_block=65536,
                  regs_per_sm=65536, regs_per_thread=255, max_threads_per_block=1024, max_threads_per_sm=2048,
                  warp_size=32), None),
    "l4": (dict(name="NVIDIA L4", arch="sm_89", sm_count=58, l2_bytes=48 * 2**20, memory_bytes=24 * 2**30,
                smem_per_block=101376, smem_per_sm=102400, regs_per_block=65536, regs_per_sm=65536,
                regs_per_thread=255, max_threads_per_block=1024, max_threads_per_sm=1536, warp_size=32), None),
}


class TargetError(ValueError):
    """A --target value that names no known card and no readable device file."""


def known_target(name: str) -> Target:
    """A known card's facts; its peaks are datasheet values, marked so, until measured."""
    key = name.strip().lower()
    for short, (facts, card) in KNOWN.items():
        if short in key:
            peaks = datasheet_peaks(card) if card else None
            return Target(kind="cuda", peaks=peaks.to_dict() if peaks else None,
                          source=f"built-in facts for {short.upper()} (not measured)", **facts)
    raise TargetError(f"no built-in facts for a device named {name!r}; known: {', '.join(KNOWN)} "
                      f"(or give a {DEVICE_FILE} written by `kernelwright judge --batch` on the device)")


def cpu_target(interpreter: bool = True) -> Target:
    """The CPU as a target: correctness only, times are CPU wall time."""
    return Target(kind="cpu", name=f"cpu:{platform.processor() or platform.machine()}", interpreter=interpreter,
                  software={"python": platform.python_version()}, source="this machine")


def load_target(spec: str | os.PathLike) -> Target:
    """`--target`: a device file (or a folder holding one), else a known card's name."""
    path = Path(spec)
    if path.is_dir():
        path = path / DEVICE_FILE
    if path.is_file():
        return read_target(path)
    return known_target(str(spec))


def read_target(path: str | os.PathLike) -> Target:
    try:
        target = Target.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError) as exc:
        raise TargetError(f"{path}: not a readable device file ({exc})") from None
    return target


def read_device_file(folder: str | os.PathLike) -> Target | None:
    """The target recorded in a batch folder, or None when there is none (yet)."""
    path = Path(folder) / DEVICE_FILE
    return read_target(path) if path.is_file() else None


# ------------------------------------------------------------------ measured on the device


def detect_target(device: str = "auto", measure_peaks: bool = False) -> Target:
    """The device the judge would use here: GPU properties and peaks, or the CPU."""
    import torch  # noqa: PLC0415 -- target.py is stdlib-only at import: the search and the agents read targets (docs/architecture.md)


    use_cuda = torch.cuda.is_available() and device != "cpu"
    if not use_cuda:
        target = cpu_target(interpreter=True)
        target.software.update(_software(environment("cpu")))
        target.triton_features = probe_triton_features()
        return target
    dev = torch.device("cuda" if device in ("auto", "cuda") else device)
    props = torch.cuda.get_device_properties(dev)
    base = _known_facts(props.name)
    peaks = _peaks(str(dev), measure_peaks)
    return Target(
        kind="cuda", name=props.name, arch=f"sm_{props.major}{props.minor}",
        sm_count=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None) or base.get("l2_bytes"),
        memory_bytes=props.total_memory,
        smem_per_block=getattr(props, "shared_memory_per_block_optin", None) or base.get("smem_per_block"),
        smem_per_sm=getattr(props, "shared_memory_per_multiprocessor", None) or base.get("smem_per_sm"),
        regs_per_block=getattr(props, "regs_per_block", None) or base.get("regs_per_block"),
        regs_per_sm=getattr(props, "regs_per_multiprocessor", None) or base.get("regs_per_sm"),
        regs_per_thread=base.get("regs_per_thread", 255),
        max_threads_per_block=getattr(props, "max_threads_per_block", None) or base.get("max_threads_per_block", 1024),
        max_threads_per_sm=getattr(props, "max_threads_per_multi_processor", None) or base.get("max_threads_per_sm"),
        warp_size=getattr(props, "warp_size", None) or 32,
        peaks=peaks.to_dict() if peaks else None,
        software={**_software(environment(str(dev))), "driver": driver_version()},
        triton_features=probe_triton_features(),
        source="measured on the device",
    )


# name (as a prompt quotes it) -> whether the installed Triton has it, read from its API without
# compiling anything: `tl` is triton.language, `ir` its compiler's IR module (the dot precisions)
TRITON_PROBES: dict[str, Any] = {
    'tl.dot(..., input_precision="tf32x3")':
        lambda tl, ir: _has_param(tl.dot, "input_precision") and hasattr(ir.INPUT_PRECISION, "TF32x3"),
    'tl.dot(..., input_precision="bf16x3")':
        lambda tl, ir: _has_param(tl.dot, "input_precision") and hasattr(ir.INPUT_PRECISION, "BF16x3"),
    "tl.make_tensor_descriptor": lambda tl, ir: hasattr(tl, "make_tensor_descriptor"),
    "tl.extra.cuda.libdevice": lambda tl, ir: _imports(f"{tl.__name__}.extra.cuda.libdevice"),
    "tl.fdiv": lambda tl, ir: hasattr(tl, "fdiv"),
    "tl.load(..., eviction_policy=...)": lambda tl, ir: _has_param(tl.load, "eviction_policy"),
    "tl.range(..., num_stages=...)": lambda tl, ir: _has_param(tl.range.__init__, "num_stages"),
    "tl.range(..., warp_specialize=...)": lambda tl, ir: _has_param(tl.range.__init__, "warp_specialize"),
}


def probe_triton_features(tl: Any = None, ir: Any = None) -> dict[str, bool]:
    """Which of `TRITON_PROBES` the installed Triton has ({} without Triton): the prompts state what
    the judge's Triton can do instead of guessing it from the version. A probe that raises counts as
    missing (the API it reads is not there)."""
    if tl is None:
        try:
            import triton.language as tl  # noqa: PLC0415 -- target.py is stdlib-only at import: the search and the agents read targets (docs/architecture.md)
            from triton._C.libtriton import ir  # noqa: PLC0415 -- target.py is stdlib-only at import: the search and the agents read targets (docs/architecture.md)
        except Exception:  # noqa: BLE001 - no (working) Triton: nothing to say about its features
            return {}
    found = {}
    for name, probe in TRITON_PROBES.items():
        try:
            found[name] = bool(probe(tl, ir))
        except Exception:  # noqa: BLE001 - the attribute or module the probe reads is missing
            found[name] = False
    return found


def _has_param(fn: Any, name: str) -> bool:
    return name in inspect.signature(fn).parameters


def _imports(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _known_facts(name: str) -> dict[str, Any]:
    for short, (facts, _) in KNOWN.items():
        if short in name.lower():
            return facts
    return {}


def _peaks(device: str, measure: bool):
    try:
        return ensure_peaks(device) if measure else peaks_for(device)
    except Exception:  # noqa: BLE001 - no peaks is a missing fact, not a failed target
        return peaks_for(device)


def _software(env: dict[str, Any]) -> dict[str, str]:
    keys = {"torch": "torch", "triton": "triton", "cuda_runtime": "cuda", "nvcc": "nvcc", "python": "python"}
    return {short: str(env[key]) for key, short in keys.items() if env.get(key)}


def write_device_file(folder: str | os.PathLike, device: str = "auto", measure_peaks: bool = True,
                      log=None) -> Path:
    """Record this machine's device in `folder` (first contact of a batch folder); kept when the
    file already describes this device with the measured peaks the judge's floors use now (the
    peaks cache, `peaks.peaks_for`): peaks measured again since (implausible ones are) are written
    over the old, so the prompt's floor and the verdicts' come from one record."""
    folder = Path(folder)
    path = folder / DEVICE_FILE
    target = detect_target(device, measure_peaks=False)
    existing = read_device_file(folder) if path.is_file() else None
    cached = (target.peaks or {}).get("source") == "measured"
    if (existing is not None and target.same_device(existing) and existing.peaks_source == "measured"
            and (existing.peaks == target.peaks or not (cached or measure_peaks))
            and existing.triton_features == target.triton_features):  # another Triton since: rewritten
        return path
    if measure_peaks and target.is_gpu and (target.peaks or {}).get("source") != "measured":
        if log:
            log("measuring the device's copy and matmul peaks once (cached for later runs)")
        target = detect_target(device, measure_peaks=True)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(target.to_dict(), indent=1, sort_keys=True))
    return path


def main(argv: list[str] | None = None) -> int:
    """`python -m kernelwright.judge.target DIR`: record this machine's device in DIR/device.json."""
    parser = argparse.ArgumentParser(prog="python -m kernelwright.judge.target", description=main.__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu")
    parser.add_argument("--no-peaks", action="store_true", help="do not measure missing peaks (datasheet values)")
    args = parser.parse_args(argv)
    path = write_device_file(args.folder, args.device, measure_peaks=not args.no_peaks,
                             log=lambda line: print(line, flush=True))
    target = read_target(path)
    print(f"{path}: {target.label()}; peaks: {target.peaks_source or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
