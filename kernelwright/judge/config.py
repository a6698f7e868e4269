"""Judge settings: a plain dataclass (stdlib only) that travels to worker processes as JSON."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..rules import DEFAULT as DEFAULT_RULES
from ..rules import from_legacy_policy, get as get_rules

# KernelBench's tolerances (atol = rtol) per dtype; overridable per run
DEFAULT_TOLERANCES: dict[str, float] = {
    "float64": 1e-6,
    "float32": 1e-4,
    "float16": 1e-2,
    "bfloat16": 1e-2,
}
# ||out - ref|| / ||ref|| bound per dtype: the scale-aware check an all-zero output cannot pass
DEFAULT_REL_L2: dict[str, float] = {
    "float64": 1e-8,
    "float32": 1e-4,
    "float16": 1e-2,
    "bfloat16": 2e-2,
}


@dataclass
class JudgeConfig:
    # correctness
    trials: int = 5
    seed: int = 42
    tolerances: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    rel_l2: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_REL_L2))
    # the rule set judged by: "kernelbench" (default), "library" or "strict" (kernelwright.rules)
    rules: str = DEFAULT_RULES
    allow_tf32: bool = False  # the reference runs in full fp32; a candidate may not switch it globally
    # sizes
    overrides: dict[str, Any] = field(default_factory=dict)
    shrink: bool | None = None  # None: shrink when no GPU is available
    # process isolation
    timeout_s: float = 300.0
    compile_timeout_s: float = 600.0
    output_limit_bytes: int = 64 * 1024
    no_network: bool = True
    # candidate code may write only its scratch folder (Landlock; see judge/confine.py); False runs
    # it unconfined, and the verdict says so
    confine: bool = True
    device: str = "auto"  # "auto", "cuda", "cpu"
    cpu_memory_limit_mb: int | None = None  # RLIMIT_AS for CPU runs (GPU drivers need huge address space)
    cuda_arch_list: str | None = None  # TORCH_CUDA_ARCH_LIST for precompiling; None: env or nvidia-smi
    # timing
    time: bool = True
    warmup_ms: float = 25.0
    rep_ms: float = 200.0
    min_reps: int = 20
    max_reps: int = 1000
    # wall-clock bound of one repeat's timed calls (ms): each timed call has fresh inputs and a round
    # trip to the candidate's process, so for a short kernel its count is bounded by wall time too
    # (never below min_reps; a tenth of it for the warm-up calls)
    timed_wall_ms: float = 400.0
    flush_l2: bool = True
    cuda_graph: bool = False
    baselines: tuple[str, ...] = ("eager", "compile_default")  # also "compile_max_autotune"
    # energy: joules per call over a window of this many ms after the timing (GPU only; 0: off)
    energy_ms: float = 200.0
    # seconds for the rerun that locates an asynchronous CUDA fault of a failed candidate (CUDA_LAUNCH_BLOCKING=1,
    # compute-sanitizer where installed: judge/locate.py, `Verdict.fault`); 0: no rerun
    locate_fault_s: float = 120.0
    # the evaluation's private MPS server on a GPU (judge/mps.py); the locating rerun runs without one
    mps: bool = True
    # extras: kernelwright.profile's report (timeline, ncu, findings) for a passing candidate
    profile: bool = False
    # the per-kernel shares (`Verdict.kernels`) ncu's kernels are picked from when this evaluation does
    # not time (the batch profile pass judges with time=False and passes the stored verdict's); None:
    # the timing stage's, else the profile's own timeline
    profile_kernels: dict[str, Any] | None = None
    cache_dir: str | None = None  # compile and baseline caches; default ~/.cache/kernelwright
    # the reference store (judge/refstore.py): a problem's reference outputs, computed once per settings;
    # an entry above the first is not stored (0: no store), the store keeps to the second in all
    reference_cache_entry_bytes: int = 4 << 30
    reference_cache_bytes: int = 32 << 30
    # references computed faster than this are stored only once another evaluation computes them
    # again (refstore: a problem judged once does not pay for writing an entry, 1-2 GB: 7-14 s on the
    # H100 machine; one judged by many candidates pays once) (0: store all)
    reference_cache_min_compute_s: float = 1.0
    # share of the GPU's free memory that the reference outputs of all trials may keep on the device,
    # always leaving one trial's room beside them (check.DeviceRoom); the rest stay in host memory and
    # are copied back trial by trial. A higher share makes large problems much faster to judge (H100,
    # 6.4 GB outputs: 7-8 s a call at 0.5 against 16-19 s at 0.25). An OOM beside these copies is the
    # judge's, not the candidate's: the pool judges it again, alone, with the share at 0
    # (admission.OOM_REFERENCE_ON_HOST), before an OOM counts against a candidate (docs/judge.md).
    reference_device_share: float = 0.5

    def __post_init__(self) -> None:
        self.rules = get_rules(self.rules).name  # a clear error for an unknown name; canonical spelling

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["baselines"] = list(self.baselines)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "JudgeConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        data = dict(data)
        if "torch_op_policy" in data:  # settings stored before rule sets: "reject" was today's strict
            policy = data.pop("torch_op_policy")
            data.setdefault("rules", from_legacy_policy(policy))
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown judge settings: {', '.join(sorted(unknown))}")
        if "baselines" in data:
            data["baselines"] = tuple(data["baselines"])
        return cls(**data)

    def tolerance_for(self, dtype_name: str) -> tuple[float, float]:
        """(atol = rtol, rel_l2 bound) for a dtype name such as 'float32'."""
        return self.tolerances.get(dtype_name, 1e-4), self.rel_l2.get(dtype_name, 1e-4)
