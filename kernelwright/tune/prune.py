"""Which configurations can run at all: pruned before compiling (constraints, device limits) and
after compiling (the registers, spills and shared memory the compiler reports).

Every pruned configuration is kept with the reason, so the report shows why a block size never
appeared among the timings; pruned configurations are never timed.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from .constraints import Constraint, parse_constraint
from .hardware import DeviceLimits, detect_limits
from .template import Template, TemplateError

MAX_ENUMERATED = 1_000_000

# constraints every Triton template gets for its launch parameters (also prefixed: g0_num_warps)
_TRITON_IMPLICIT = {
    "num_warps": "is_pow2({p}) and {p} * WARP_SIZE <= MAX_THREADS",
    "num_stages": "{p} >= 1",
}


@dataclass
class PrunedConfig:
    params: dict[str, Any]
    reason: str
    stage: str = "static"  # "static" (before compiling) or "compiled" (from compiler-reported resources)


@dataclass
class PruneReport:
    feasible: list[dict[str, Any]] = field(default_factory=list)
    pruned: list[PrunedConfig] = field(default_factory=list)
    after_compile: list[PrunedConfig] = field(default_factory=list)  # feasible, but the compiler said no
    implicit: list[str] = field(default_factory=list)  # constraints added by the framework
    limits: DeviceLimits | None = None

    @property
    def total(self) -> int:
        return len(self.feasible) + len(self.pruned)

    def reasons(self) -> dict[str, int]:
        """How many configurations each failing constraint removed (first failure counts)."""
        counts: dict[str, int] = {}
        for item in self.pruned:
            key = item.reason.split(" is false")[0]
            counts[key] = counts.get(key, 0) + 1
        return counts


def implicit_constraints(template: Template) -> list[Constraint]:
    if template.backend != "triton":
        return []
    found = []
    for param in template.params:
        for suffix, text in _TRITON_IMPLICIT.items():
            if param == suffix or param.endswith("_" + suffix):
                found.append(parse_constraint(text.format(p=param)))
    return found


def prune_space(template: Template, limits: DeviceLimits | None = None) -> PruneReport:
    """Split the template's space into feasible configurations and pruned ones with reasons."""
    limits = limits or detect_limits()
    if template.space_size > MAX_ENUMERATED:
        raise TemplateError(f"the space has {template.space_size} configurations, more than "
                            f"{MAX_ENUMERATED}: narrow the parameter domains")
    implicit = implicit_constraints(template)
    checks = implicit + list(template.constraints)
    base_env = {**limits.as_env(), **template.sizes}
    report = PruneReport(implicit=[c.text for c in implicit], limits=limits)
    names = list(template.params)
    for values in itertools.product(*template.params.values()):
        params = dict(zip(names, values, strict=False))
        reason = first_violation(checks, {**base_env, **params})
        if reason:
            report.pruned.append(PrunedConfig(params, reason))
        else:
            report.feasible.append(params)
    return report


def check_space(report: PruneReport) -> None:
    """TemplateError when the constraints leave no configuration: the declared space is unusable,
    and the message names the constraints that removed the most (what to loosen)."""
    if report.feasible:
        return
    where = f" on {report.limits.name}" if report.limits is not None else ""
    top = sorted(report.reasons().items(), key=lambda kv: -kv[1])[:3]
    why = "; ".join(f"{reason} (removed {count})" for reason, count in top)
    raise TemplateError(f"the constraints leave none of the {report.total} configuration(s){where}: {why}")


def first_violation(checks: list[Constraint], env: dict[str, Any]) -> str | None:
    for constraint in checks:
        ok, why = constraint.check(env)
        if not ok:
            return why
    return None


@dataclass
class KernelResources:
    """What the compiler says one kernel uses (Triton: kernel.n_regs/n_spills/metadata.shared;
    CUDA: ptxas -v)."""

    name: str
    registers: int | None = None
    spills: int | None = None  # bytes (ptxas) or count (Triton) of spilled registers; 0 = none
    shared_bytes: int | None = None
    threads: int | None = None  # threads per block (Triton: num_warps * 32)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "registers": self.registers, "spills": self.spills,
                "shared_bytes": self.shared_bytes, "threads": self.threads}


def resource_violation(resources: list[KernelResources], limits: DeviceLimits,
                       allow_spills: bool = False) -> str | None:
    """Why compiled kernels cannot run well on `limits` (spills, shared memory, register file)."""
    for res in resources:
        if res.spills and not allow_spills:
            return f"kernel {res.name} spills registers ({res.spills}) after compiling"
        if res.shared_bytes is not None and res.shared_bytes > limits.smem_per_block_optin:
            return (f"kernel {res.name} needs {res.shared_bytes} bytes of shared memory, more than the "
                    f"{limits.smem_per_block_optin} a block may use on {limits.name}")
        if res.registers and res.threads and res.registers * res.threads > limits.regs_per_block:
            return (f"kernel {res.name} needs {res.registers} registers x {res.threads} threads = "
                    f"{res.registers * res.threads}, more than the {limits.regs_per_block} of a block")
        if res.registers and res.registers > limits.max_regs_per_thread:
            return f"kernel {res.name} uses {res.registers} registers per thread (limit {limits.max_regs_per_thread})"
    return None
