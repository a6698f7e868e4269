"""The verdict record: everything the judge found about one candidate, as versioned JSON.

Plain dataclasses (stdlib only): verdicts are written on GPU machines that hold nothing but torch,
triton and numpy, and read back anywhere. Bump SCHEMA_VERSION on any incompatible change;
`Verdict.from_json` refuses versions it does not know.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

# verdict.status values
PASS, FAIL, ERROR = "pass", "fail", "error"
# verdict.stage values: the last stage the candidate reached
PEAK_KEY = "gpu_peak_bytes"  # verdict.environment: the evaluation's measured GPU memory peak (admission reads it)

STAGES = ("load", "compile", "check", "time", "profile", "done")
# flag severities: "reject" fails the verdict, "warn" is reported, "info" is context
REJECT, WARN, INFO = "reject", "warn", "info"


@dataclass
class CompileResult:
    ok: bool
    seconds: float = 0.0
    cached: bool = False
    backend: str = ""  # "cuda", "triton", "none"
    log: str = ""  # trimmed compiler output, ready for an LLM
    errors: list[str] = field(default_factory=list)  # first few errors with line numbers
    arch: str = ""  # TORCH_CUDA_ARCH_LIST the extension was built (or found in the cache) for


@dataclass
class TrialResult:
    trial: int
    seed: int
    variant: str  # input variant (see problem/inputs.py)
    ok: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_l2_err: float | None = None  # ||out - ref|| / ||ref||: catches outputs tiny everywhere
    atol_scale: float | None = None  # S of |out - ref| <= atol*S + rtol*|ref|: max(1, RMS of the reference)
    # margins: measured / allowed (1.0 is the limit), worst over outputs; None where not measured
    error_ratio: float | None = None  # max over elements of |out - ref| / (atol*S + rtol*|ref|)
    rel_l2_ratio: float | None = None  # rel_l2_err / the dtype's rel-L2 bound
    shape_ok: bool = True
    dtype_ok: bool = True
    nonfinite: bool = False
    message: str = ""
    fallback_from: str | None = None  # the variant asked for, when its reference was non-finite
    grads: dict[str, dict[str, float | None]] = field(default_factory=dict)  # backward problems: errors per gradient


@dataclass
class Flag:
    code: str  # e.g. "input_mutation", "output_cache", "torch_op", "monkeypatch", "uninitialized_output"
    severity: str  # REJECT | WARN | INFO
    message: str
    check: str = ""  # id of the judge check that raised it (kernelwright.judge.checks), where there is one


@dataclass
class WorkRecord:
    """Whose code did the work, as the rule set counts it (see kernelwright.rules and judge/work.py).

    Counts are per work kind (matmul, conv, elementwise, ...): `reference` for the reference's
    forward, `python` for torch ops the candidate's forward ran outside its own code, `extension`
    for ATen ops its C++ extension called; `torch` = python + extension, compared with `reference`.
    """

    rules: str
    reference: dict[str, int] = field(default_factory=dict)
    torch: dict[str, int] = field(default_factory=dict)
    python: dict[str, int] = field(default_factory=dict)
    extension: dict[str, int] = field(default_factory=dict)
    replaced: dict[str, int] = field(default_factory=dict)  # reference - torch, where positive
    launches: dict[str, dict[str, int]] = field(default_factory=dict)  # triton / extension / custom_ops
    libraries: list[str] = field(default_factory=list)  # extension libraries that were inspected
    vendor: list[str] = field(default_factory=list)  # vendor libraries or ATen compute found in them
    threads: dict[str, int] = field(default_factory=dict)  # torch ops seen on other threads (counted in python)
    own_kernels: int | None = None  # kernels of the candidate's own code seen on the GPU in the trials
    kernels: dict[str, Any] = field(default_factory=dict)  # most torch work in one call: recorded, unrecorded calls


@dataclass
class TimingStats:
    """Time of one call of forward, in milliseconds."""

    median_ms: float
    iqr_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    n: int
    method: str  # a candidate: "checker_events", "runner_events", "wall_cpu"; a baseline: "cuda_events", "cuda_graph", "wall_cpu"
    l2_flushed: bool = False
    note: str = ""  # e.g. "CPU wall time: not GPU performance"


@dataclass
class Baselines:
    eager: TimingStats | None = None
    compile_default: TimingStats | None = None
    compile_max_autotune: TimingStats | None = None
    cached: bool = False
    errors: dict[str, str] = field(default_factory=dict)
    eager_label: str = "eager PyTorch"  # what "eager" times: the reference as written ("reference kernel (Triton)")
    work: str = "forward"  # or "forward+backward" (problems whose backward pass is part of the work)
    # per kind: which measurement the speedups use (cache file, key digest, when, repeats, steady)
    measured: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the eager reference's per-kernel shares (judge/kernel_times.py's record), measured with its eager
    # baseline on a GPU; {} on a CPU and in records measured before it was kept
    kernels: dict[str, Any] = field(default_factory=dict)


@dataclass
class Floor:
    """Speed-of-light floor: no kernel can beat max(flops / peak_flops, bytes / peak_bandwidth)."""

    flops: float
    bytes: float
    peak_tflops: float
    peak_gbps: float
    floor_ms: float
    pct_of_floor: float | None = None  # floor / measured, in percent
    bound: str = ""  # "memory" or "compute"
    peak_kind: str = ""  # which matmul rate was used: "fp32", "tf32", "bf16", "fp16", "fp64"
    peak_source: str = ""  # "measured" or "datasheet: <card>" (cold start, before device-peaks ran)
    warm_bytes: float = 0.0  # input bytes left out of `bytes`: written right before each call, they fit in L2


@dataclass
class ProcessInfo:
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""
    network_isolated: bool = False  # the candidate ran in its own network namespace (no network)
    confined: bool = False  # its writes were confined to its scratch folder (isolation["confinement"] says how)
    killed_processes: int = 0  # processes the candidate left running, killed when its evaluation ended
    isolation: dict[str, Any] = field(default_factory=dict)  # what the sandbox enforced, see docs/judge.md


@dataclass
class Verdict:
    problem: str
    candidate: str
    status: str = ERROR
    stage: str = "load"
    error: str | None = None  # one paragraph, for a person or an LLM
    compile: CompileResult | None = None
    trials: list[TrialResult] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    rules: str = ""  # the rule set judged by (kernelwright.rules); "" in verdicts from before rule sets
    ops: dict[str, int] = field(default_factory=dict)  # ATen ops ModelNew.forward's own Python executed
    work: WorkRecord | None = None  # whose code did the work, as the rule set counts it
    timing: TimingStats | None = None
    baselines: Baselines | None = None
    speedup: dict[str, float] = field(default_factory=dict)  # "eager", "compile_default", ...
    floor: Floor | None = None
    precision: dict[str, Any] = field(default_factory=dict)  # dtype, tf32 allowed, tolerances used
    overrides: dict[str, Any] = field(default_factory=dict)
    shrunk: bool = False
    device: str = "cpu"
    # the GPU it was judged on, as the pool that started it knows it: {"index", "name", "uuid"}
    # (the physical index, nvidia-smi's name and UUID); empty on a CPU or outside a pool
    gpu: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    process: ProcessInfo | None = None
    profile: dict[str, Any] | None = None  # kernelwright.profile ProfileReport.to_dict(), when asked for
    sweep: dict[str, Any] | None = None  # a sweep request's record (judge/sweep.py SweepResult.to_dict())
    energy: dict[str, Any] | None = None  # joules per call (GPU), or {"available": False, "reason": ...}
    # what the reference is made of (problem.reference.ReferenceInfo: torch ops or its own Triton/CUDA
    # kernels, its launches, inputs it writes in place, backward), plus "build" for its own extension
    reference: dict[str, Any] | None = None
    # the share of each kernel in the candidate's GPU time (judge/kernel_times.py), or why not
    kernels: dict[str, Any] | None = None
    # wall seconds per judging stage (imports, setup, reference, compile, check, guards, wait_gpu,
    # time, energy, baselines, floor, profile, overhead); nested work is counted once, where it ran
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # where an asynchronous CUDA fault happened, from the rerun that located it (judge/locate.py):
    # tool, kernel, where, report; empty when the candidate did not fault or no rerun located it
    fault: dict[str, str] = field(default_factory=dict)
    # the device lock this evaluation took, per kind ("shared", "exclusive"): {"holds", "held_s"}
    device_lock: dict[str, dict[str, float]] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def reject_flags(self) -> list[Flag]:
        return [f for f in self.flags if f.severity == REJECT]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=_jsonable)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Verdict":
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"verdict schema version {version!r} is not {SCHEMA_VERSION}")
        return dataclass_from(cls, data)

    @classmethod
    def from_json(cls, text: str) -> "Verdict":
        return cls.from_dict(json.loads(text))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


_NESTED = {
    "compile": CompileResult, "timing": TimingStats, "baselines": Baselines, "floor": Floor,
    "process": ProcessInfo, "eager": TimingStats, "compile_default": TimingStats,
    "compile_max_autotune": TimingStats, "work": WorkRecord,
}
_LISTS = {"trials": TrialResult, "flags": Flag}


def dataclass_from(cls: type, data: dict[str, Any]):
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in known:
            continue
        if key in _LISTS and isinstance(value, list):
            value = [dataclass_from(_LISTS[key], v) for v in value]
        elif key in _NESTED and isinstance(value, dict):
            value = dataclass_from(_NESTED[key], value)
        kwargs[key] = value
    return cls(**kwargs)
