"""ProfileReport: what profiling one candidate found, as JSON-ready dataclasses.

Stored with the candidate (Verdict.profile holds `to_dict()`), and rendered for the Planner and
Analyst by `summary_text()`. Bump SCHEMA_VERSION on incompatible changes; `from_dict` refuses
versions it does not know.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .findings import Finding, render

SCHEMA_VERSION = 1

# ProfileReport.status
OK, PARTIAL, UNAVAILABLE, FAILED = "ok", "partial", "unavailable", "failed"


@dataclass
class KernelReport:
    """One hot kernel: its share of GPU time, its class, and the evidence that decided it."""

    name: str
    launches: int  # launches profiled by ncu
    time_us: float  # per launch
    share: float  # of the forward's GPU time (the timing stage's or the timeline's split; hot.py)
    bottleneck: str
    reason: str
    confident: bool = True
    numbers: dict[str, float] = field(default_factory=dict)  # short metric keys (metrics.ALIASES)
    resources: dict | None = None  # ResourceReport.to_dict()
    sass: dict | None = None  # SassSummary.to_dict()
    hotspots: list[dict] = field(default_factory=list)


@dataclass
class ProfileReport:
    problem: str
    candidate: str
    status: str = UNAVAILABLE
    device: str = ""
    bottleneck: str = "unknown"  # whole forward: launch/host from the timeline, else the hottest kernel's
    kernels: list[KernelReport] = field(default_factory=list)
    timeline: dict | None = None  # torchprof.TimelineSummary fields
    energy: dict | None = None  # energy.EnergyReading.to_dict()
    plain_ms_per_call: float | None = None
    findings: list[Finding] = field(default_factory=list)
    overhead_s: dict[str, float] = field(default_factory=dict)  # seconds per profiling step
    dropped_metrics: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    selection: dict | None = None  # hot.KernelSelection.to_dict(): the kernels ncu profiled, those left out, why
    reference: dict | None = None  # reference.summary(): the problem's Model profiled, its hot kernels' roofs
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict) -> "ProfileReport":
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"profile report schema version {version!r} is not {SCHEMA_VERSION}")
        known = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["kernels"] = [KernelReport(**k) for k in data.get("kernels", [])]
        kwargs["findings"] = [Finding.from_dict(f) for f in data.get("findings", [])]
        return cls(**kwargs)

    @classmethod
    def from_json(cls, text: str) -> "ProfileReport":
        return cls.from_dict(json.loads(text))

    def findings_text(self) -> str:
        return render(self.findings)

    def summary_text(self) -> str:
        """A short Markdown block for prompts: the bottleneck, the hot kernels, the findings."""
        lines = [f"Profile ({self.device or 'no device'}): {self.bottleneck}-bound overall."]
        for k in self.kernels:
            lines.append(f"- `{k.name}` {k.share:.0%} of GPU time, {k.time_us:.1f} us x{k.launches}: {k.reason}")
        skipped = [*(self.selection or {}).get("left_out", []), *(self.selection or {}).get("missed", [])]
        if skipped:
            lines.append("- not profiled: " + ", ".join(f"`{k['name']}` {k['share']:.0%} ({k['why']})" for k in skipped))
        if self.reference and self.reference.get("kernels"):
            lines.append("- the reference (the problem's Model) on this GPU: " + ", ".join(
                f"`{k['name']}` {k['share']:.0%} {k['bottleneck']}" + _roofs(k) for k in self.reference["kernels"]))
        if self.energy and self.energy.get("joules_per_call") is not None:
            lines.append(f"- energy {self.energy['joules_per_call'] * 1e3:.3f} mJ per call ({self.energy['method']})")
        if self.findings:
            lines += ["", "Findings:", self.findings_text()]
        return "\n".join(lines)


def _roofs(kernel: dict) -> str:
    """` (DRAM 85%, SM 12%)`: a reference kernel's counters of peak, as the summary shows them."""
    shown = [f"{label} {kernel[key]:.0f}%" for key, label in (("dram_pct", "DRAM"), ("sm_pct", "SM"),
                                                               ("tensor_pct", "tensor")) if kernel.get(key) is not None]
    return f" ({', '.join(shown)})" if shown else ""
