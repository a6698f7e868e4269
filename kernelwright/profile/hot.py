"""Which kernels ncu profiles: those that take most of the GPU time, and how many launches of them.

The shares come from the timing stage's per-kernel split that a GPU verdict already carries
(`verdict.kernels`, written by judge/kernel_times.py and the checker's timing stage: per kernel its
share of the timed calls' kernel time, µs and launches per call, names shortened to
`at::native::vectorized_elementwise_kernel<FillFunctor …>`), else from the profile's own timeline
pass (the torch profiler's full kernel names). Kernels are picked hottest first while each holds
at least `min_share` of the time (the hottest always), at most `hot_kernels` of them, until they
cover `cover` of it.

ncu selects kernels by function name (`--kernel-name-base function`: `vectorized_elementwise_kernel`,
no namespace, no template arguments), which is what `ncu_function` makes of either kind of name. A
name that does not yield one (verdicts written before 2026-11-28 have `at::native::` for kernels
in an anonymous namespace; a function name cut at 120 characters) cannot be selected: when a kernel the rule would
pick has such a name, the timeline's full names are used instead, and failing those it is left out.
Template instances share a function name (PyTorch's elementwise kernels), so their launches are
counted in the launch budget of a picked one and profiled with it. `--launch-count` is the launches
per forward of the picked functions times the forwards run under ncu, capped at `max_launches`.

Every kernel not picked is listed with the reason, and the report says both (`KernelSelection`).
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

from .parse import function_base

_AGGREGATE = re.compile(r"^(\d+ )?other kernels$")  # a remainder (kernel_times.TOP): no names, only a sum
_FUNCTION = re.compile(r"^[A-Za-z_]\w*$")
# ncu replays at most this many launches (`--launch-count`) unless told otherwise: the one default of
# the judge's profile (ProfileConfig.max_kernels) and of `kernelwright profile --max-kernels`
MAX_LAUNCHES = 6
VERDICT, TIMELINE, NONE = "verdict", "timeline", "none"


@dataclass(frozen=True)
class KernelShare:
    """One kernel of a forward as the timing stage or the timeline saw it."""

    name: str
    share: float  # of the forward's kernel time
    us_per_call: float = 0.0
    launches_per_call: float = 0.0

    @property
    def aggregate(self) -> bool:
        return bool(_AGGREGATE.match(self.name))


@dataclass(frozen=True)
class SelectionLimits:
    """How much ncu may profile (ProfileConfig's fields of the same names)."""

    hot_kernels: int = 3
    min_share: float = 0.05
    cover: float = 0.8
    max_launches: int = MAX_LAUNCHES
    calls: int = 1  # forwards run under ncu


@dataclass
class PickedKernel:
    name: str
    function: str  # what --kernel-name matches
    share: float
    launches_per_call: float
    note: str = ""  # e.g. other template instances of its function, profiled with it


@dataclass
class LeftOut:
    name: str
    share: float
    why: str


@dataclass
class KernelSelection:
    """What ncu is asked to profile, what is left out and why; after `settle`, what it did profile."""

    source: str  # VERDICT, TIMELINE or NONE (no shares: the first launches of the forward)
    note: str = ""  # why this source
    picked: list[PickedKernel] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)  # not asked for
    missed: list[LeftOut] = field(default_factory=list)  # asked for, not in ncu's output (`settle`)
    launch_count: int = 0
    capped: bool = False  # the picked functions launch more often than the bound per profiled run

    @property
    def functions(self) -> list[str]:
        return list(dict.fromkeys(p.function for p in self.picked))

    @property
    def covered(self) -> float:
        return sum(p.share for p in self.picked)

    def settle(self, found: list[str]) -> None:
        """Compare with the function names ncu returned (`found`, hottest first): picked kernels it did
        not profile move to `missed`; without shares (NONE), what it profiled is what was picked."""
        if self.source == NONE:
            self.picked = [PickedKernel(name, name, 0.0, 0.0) for name in dict.fromkeys(found)]
            return
        for kernel in [k for k in self.picked if k.function not in found]:
            self.picked.remove(kernel)
            why = (f"ncu reached its bound of {self.launch_count} launches before this kernel ran" if self.capped
                   else "ncu profiled no launch of it in the profiled forward")
            self.missed.append(LeftOut(kernel.name, kernel.share, why))

    def to_dict(self) -> dict:
        return {**asdict(self), "functions": self.functions, "covered": round(self.covered, 4)}

    def summary(self) -> str:
        """One paragraph for the report's notes: which kernels ncu profiled, which not, and why."""
        launches = f"{self.launch_count} launch{'es' if self.launch_count != 1 else ''}"
        if self.source == NONE:
            names = ", ".join(f"`{k.name}`" for k in self.picked) or "no kernel"
            return f"ncu profiled the first {launches} of the forward ({self.note}): {names}."
        picked = ", ".join(f"`{p.name}` ({p.share:.0%}{'; ' + p.note if p.note else ''})" for p in self.picked)
        text = (f"ncu profiled {picked or 'none of the kernels asked for'}: {self.covered:.0%} of the GPU time, "
                f"at most {launches} (hot kernels from the {self.source}{'; ' + self.note if self.note else ''}).")
        for label, kernels in (("Asked for but not profiled", self.missed), ("Left out", self.left_out)):
            if kernels:
                text += f" {label}: " + "; ".join(f"`{k.name}` ({k.share:.0%}): {k.why}" for k in kernels) + "."
        return text


def ncu_function(name: str) -> str | None:
    """The function name ncu selects `name` by, or None when the name does not give one whole."""
    if _AGGREGATE.match(name):
        return None
    function = function_base(name.replace("…", "<"))  # a cut name loses what follows the cut
    cut = "…" in name and "<" not in name.split("…")[0]  # cut before the template: the name itself is cut
    return function if function and not cut and _FUNCTION.match(function) else None


def shares_from_verdict(record: dict | None) -> list[KernelShare] | None:
    """The timing stage's per-kernel split (`verdict.kernels`), or None where it has none."""
    if not isinstance(record, dict) or not record.get("available") or not record.get("kernels"):
        return None
    found = []
    for item in record["kernels"]:
        if isinstance(item, dict) and item.get("name") and isinstance(item.get("share"), (int, float)):
            found.append(KernelShare(str(item["name"]), float(item["share"]), float(item.get("us_per_call") or 0.0),
                                     float(item.get("launches_per_call") or 0.0)))
    return sorted(found, key=lambda k: -k.share) or None


def shares_from_timeline(summary) -> list[KernelShare] | None:
    """The profile's own timeline (`torchprof.TimelineSummary`): its top kernels with full names."""
    total = getattr(summary, "kernel_us_per_call", 0.0) or 0.0
    top = getattr(summary, "top_kernels", None) or []
    if total <= 0 or not top:
        return None
    found = [KernelShare(str(k["name"]), k["total_us"] / total, k["total_us"], k["count"]) for k in top]
    rest = 1.0 - sum(k.share for k in found)
    if rest > 0.001:
        found.append(KernelShare("other kernels", rest))
    return sorted(found, key=lambda k: -k.share)


def pick(shares: list[KernelShare], limits: SelectionLimits, source: str, note: str = "") -> KernelSelection:
    """Hottest first: see the module docstring. `shares` hottest first."""
    chosen = KernelSelection(source, note)
    for kernel in shares:
        why = _why_not(kernel, chosen, limits)
        if why:
            chosen.left_out.append(LeftOut(kernel.name, round(kernel.share, 4), why))
        else:
            function = ncu_function(kernel.name) or ""
            chosen.picked.append(PickedKernel(kernel.name, function, round(kernel.share, 4), kernel.launches_per_call,
                                              _siblings(shares, kernel, function)))
    launches = sum(_launches(shares, f) for f in chosen.functions) * max(1, limits.calls)
    chosen.capped = launches > limits.max_launches
    chosen.launch_count = max(1, min(launches, limits.max_launches))
    return chosen


def _why_not(kernel: KernelShare, chosen: KernelSelection, limits: SelectionLimits) -> str:
    """Why `kernel` is not profiled ("" when it is), given the kernels picked before it."""
    if kernel.aggregate:
        return "kernels without names in the record (a sum beyond its listed ones): ncu cannot be told to select them"
    if kernel.share < limits.min_share and chosen.picked:  # the hottest is profiled whatever its share
        return f"under the {limits.min_share:.0%} of GPU time worth profiling"
    if chosen.covered >= limits.cover:
        return f"the kernels picked already cover {chosen.covered:.0%} of the GPU time (enough from {limits.cover:.0%})"
    if len(chosen.picked) >= limits.hot_kernels:
        return f"beyond the {limits.hot_kernels} hottest kernels"
    if ncu_function(kernel.name) is None:
        return "its recorded name does not give the whole function name ncu selects by"
    return ""


def _siblings(shares: list[KernelShare], kernel: KernelShare, function: str) -> str:
    others = [k for k in shares if k is not kernel and ncu_function(k.name) == function]
    if not others:
        return ""
    return (f"ncu selects by function name: profiled with {len(others)} other instance{'s' if len(others) > 1 else ''} "
            f"of `{function}`, its numbers merged with theirs")


def _launches(shares: list[KernelShare], function: str) -> int:
    """Launches per forward of `function`, template instances of the same function name included."""
    return max(1, math.ceil(sum(k.launches_per_call for k in shares if ncu_function(k.name) == function) - 1e-6))


def select_hot(verdict_kernels: dict | None, timeline, limits: SelectionLimits) -> KernelSelection:
    """Pick from the verdict's shares; from the timeline's when the verdict has none or names a kernel
    it would pick in a way ncu cannot select; with neither, no filter (the first launches)."""
    from_verdict, from_timeline = shares_from_verdict(verdict_kernels), shares_from_timeline(timeline)
    if from_verdict is not None:
        chosen = pick(from_verdict, limits, VERDICT)
        unnamed = [k.name for k in chosen.left_out if k.why.startswith("its recorded name")]
        if not unnamed or from_timeline is None:
            return chosen
        note = f"the verdict's names {', '.join(f'`{n}`' for n in unnamed)} do not give ncu's function names"
        return pick(from_timeline, limits, TIMELINE, note)
    if from_timeline is not None:
        why = (verdict_kernels or {}).get("reason") or "the verdict carries no per-kernel shares"
        return pick(from_timeline, limits, TIMELINE, why)
    return KernelSelection(NONE, "neither the verdict nor the timeline named the forward's kernels",
                           launch_count=max(1, limits.max_launches))
