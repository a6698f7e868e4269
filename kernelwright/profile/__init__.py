"""Profiler feedback: hardware measurements turned into short, ranked, actionable findings.

`profile_candidate(problem, candidate, ProfileConfig())` runs a torch-profiler timeline pass, an
ncu speed-of-light pass that classifies each hot kernel (memory, compute, latency; launch or host
for the whole forward), and a second ncu pass with only the sections that class needs; compiler
resources and SASS complete the evidence. See docs/profiling.md.
"""
from .api import profile_candidate
from .context import ProfileConfig
from .classify import Bottleneck, Classification, Thresholds, classify_kernel, classify_timeline
from .energy import EnergyMeter, EnergyReading, measure_energy
from .findings import SKILL_TAGS, Finding
from .parse import KernelProfile, NcuParseError, parse_raw_csv
from .report import KernelReport, ProfileReport

__all__ = [
    "Bottleneck", "Classification", "EnergyMeter", "EnergyReading", "Finding", "KernelProfile", "KernelReport",
    "NcuParseError", "ProfileConfig", "ProfileReport", "SKILL_TAGS", "Thresholds", "classify_kernel",
    "classify_timeline", "measure_energy", "parse_raw_csv", "profile_candidate",
]
