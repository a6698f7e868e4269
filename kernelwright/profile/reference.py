"""The reference's own kernels beside the candidate's: how close to the roof the same work runs in PyTorch.

A candidate's counters say how far its kernels run from the roof; the reference's (the problem's
`Model`: PyTorch's cuBLAS, cuDNN and ATen kernels) say what the same work reaches on the same GPU. The
reference is profiled like a candidate (`profile_candidate` on `reference_source`: the problem with
`ModelNew = Model`), once per problem, target and software versions: the judge keeps it in its cache
folder and every candidate of the problem that needs it reuses it (judge/refprofile.py). This module
turns the two reports into what the candidate's report keeps of the reference (`ProfileReport.reference`)
and the findings that compare them: a hot compute-bound kernel of the candidate that leaves the
tensor pipe idle where the reference's keeps it busy, or a hot kernel bound by the same side (memory
or compute) as a reference kernel but running at least MIN_GAP points of peak further from that roof.
"""
from __future__ import annotations

from .findings import Finding, rank_findings
from .report import KernelReport, ProfileReport

MIN_SHARE = 0.3  # a candidate kernel compared holds at least this share of its forward's GPU time
MIN_GAP = 20.0  # points of peak by which the reference's kernel runs closer to the roof
MIN_TENSOR = 40.0  # a reference kernel's tensor pipe this busy (% of peak) uses tensor cores...
IDLE_TENSOR = 5.0  # ...where a candidate kernel under this leaves them idle
SIDES = {"memory": ("dram_pct", "mem_pct"), "compute": ("tensor_pct", "sm_pct")}  # per class, its roof's counters
LABELS = {"dram_pct": "DRAM", "mem_pct": "memory", "tensor_pct": "tensor pipe", "sm_pct": "SM"}
KEPT = 3  # reference kernels kept in a candidate's report


def reference_source(problem_source: str) -> str:
    """A candidate file whose `ModelNew` is the problem's `Model`: the reference, profiled as a candidate."""
    return problem_source + "\n\nModelNew = Model  # kernelwright: the reference, profiled as a candidate\n"


def summary(reference: ProfileReport, origin: str = "") -> dict:
    """What a candidate's report keeps of the reference's profile: its class, time and hot kernels' roofs."""
    keys = [key for side in SIDES.values() for key in side]
    return {"origin": origin, "bottleneck": reference.bottleneck, "plain_ms_per_call": reference.plain_ms_per_call,
            "kernels": [{"name": k.name, "share": k.share, "bottleneck": k.bottleneck, "time_us": k.time_us,
                         **{key: k.numbers[key] for key in keys if key in k.numbers}}
                        for k in reference.kernels[:KEPT]]}


def _roof(numbers: dict, side: str) -> tuple[str, float]:
    """(the counter, its % of peak) closest to the roof on `side`."""
    found = [(key, float(numbers[key])) for key in SIDES[side] if numbers.get(key) is not None]
    return max(found, key=lambda item: item[1], default=("", 0.0))


def compare(report: ProfileReport, reference: ProfileReport) -> list[Finding]:
    """Findings for the candidate's hot kernels that run further from their roof than the reference's."""
    found = []
    for kernel in report.kernels:
        if kernel.share < MIN_SHARE or kernel.bottleneck not in SIDES:
            continue
        peers = sorted((r for r in reference.kernels if r.bottleneck == kernel.bottleneck), key=lambda r: -r.share)
        if peers:
            finding = _tensor_gap(kernel, peers[0]) or _roof_gap(kernel, peers[0])
            found += [finding] if finding else []
    return found


def _tensor_gap(kernel: KernelReport, peer: KernelReport) -> Finding | None:
    """A compute-bound kernel that leaves the tensor pipe idle where the reference's keeps it busy."""
    mine, theirs = kernel.numbers.get("tensor_pct"), peer.numbers.get("tensor_pct")
    if kernel.bottleneck != "compute" or theirs is None or theirs < MIN_TENSOR or (mine or 0.0) >= IDLE_TENSOR:
        return None
    sm = kernel.numbers.get("sm_pct")
    return Finding(
        f"`{kernel.name}` ({kernel.share:.0%} of GPU time) is compute-bound with its tensor pipe at "
        f"{mine or 0.0:.0f}% of peak" + (f" (SM {sm:.0f}%)" if sm is not None else "") + f"; the reference's own "
        f"`{peer.name}` ({peer.share:.0%} of its time) keeps the tensor pipe {theirs:.0f}% busy on this GPU — "
        f"the same work maps to tensor cores.", ["tensor-cores", "roofline-speed-of-light"],
        {"candidate_pct": round(mine or 0.0, 1), "reference_pct": round(theirs, 1)},
        kernel.share * (theirs - (mine or 0.0)) / 100.0, kernel.name)


def _roof_gap(kernel: KernelReport, peer: KernelReport) -> Finding | None:
    """A kernel bound by the same side as the reference's, at least MIN_GAP points further from that roof."""
    mine, theirs = _roof(kernel.numbers, kernel.bottleneck), _roof(peer.numbers, kernel.bottleneck)
    gap = theirs[1] - mine[1]
    if not mine[0] or not theirs[0] or gap < MIN_GAP:
        return None
    tags = (["vectorized-access"] if kernel.bottleneck == "memory" else []) + ["roofline-speed-of-light"]
    return Finding(
        f"`{kernel.name}` ({kernel.share:.0%} of GPU time) is {kernel.bottleneck}-bound at {mine[1]:.0f}% of "
        f"peak ({LABELS[mine[0]]}); the reference's own `{peer.name}` ({peer.share:.0%} of its time) reaches "
        f"{theirs[1]:.0f}% ({LABELS[theirs[0]]}) on this GPU — the same kind of work runs closer to the roof "
        f"there.", tags, {"candidate_pct": round(mine[1], 1), "reference_pct": round(theirs[1], 1)},
        kernel.share * gap / 100.0, kernel.name)


def apply(report: ProfileReport, reference: ProfileReport, origin: str, limit: int = 6) -> None:
    """Add the reference's summary and the comparing findings to `report` (ranked again, `limit` kept)."""
    report.reference = summary(reference, origin)
    report.findings = rank_findings(report.findings + compare(report, reference), limit)
