"""Findings: a handful of ranked sentences, each with the numbers behind it and the skills it points to.

Every rule reads evidence (ncu metrics by short key, compiler resources, SASS mix, stall hot
spots, the timeline) and either stays silent or returns one `Finding`. A finding's `impact` is a
rough share of the forward's time the advice could recover (kernel time share x headroom); it only
orders findings, it is not a promise. Tags are skill names of kernelwright/memory/skills.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable

from .classify import Bottleneck, Classification
from .hotspots import HotSpot
from .metrics import STALL_REASONS
from .parse import KernelProfile
from .resources import ResourceReport
from .sass import SassSummary

SKILL_TAGS = (
    "vectorized-access", "coalescing", "smem-tiling", "bank-conflict-padding", "warp-shuffle-reduction",
    "online-softmax", "operator-fusion", "epilogue-fusion", "persistent-kernel", "tensor-cores",
    "tf32-precision-policy", "tf32x3-split-gemm", "split-k", "occupancy-register-pressure", "launch-overhead-cuda-graphs",
    "async-copy-pipelining", "loop-unrolling-ilp", "avoid-host-sync", "memory-bound-elementwise-fusion",
    "swizzled-program-order-l2", "roofline-speed-of-light",
)

ACTION, NOTICE = "action", "notice"
ALONE_SHARE = 0.99  # a kernel with this share of the GPU time is the forward's only one
PRODUCT_INTENSITY = 8.0  # FMA FLOPs per DRAM byte from which a kernel reuses its operands like a matrix product
SHORT_KERNEL_NS = 5000.0  # below this a kernel's grid hardly matters: its launch costs as much


@dataclass
class Finding:
    text: str  # one or two sentences with the numbers; tags are not repeated in it
    tags: list[str] = field(default_factory=list)
    numbers: dict[str, float] = field(default_factory=dict)
    impact: float = 0.0  # ranking weight in [0, 1]
    kernel: str = ""  # "" for findings about the whole forward
    kind: str = ACTION  # ACTION (advice) or NOTICE (what could not be measured, and why)
    rank: int = 0

    def line(self) -> str:
        tags = "".join(f"[{t}]" for t in self.tags)
        return f"{self.text} {tags}".strip()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Finding":
        return cls(**{k: data[k] for k in data if k in cls.__dataclass_fields__})


def notice(text: str) -> Finding:
    """A finding that explains missing evidence (no ncu, no permission, candidate failed)."""
    return Finding(text, kind=NOTICE)


@dataclass
class KernelEvidence:
    profile: KernelProfile
    classification: Classification
    share: float  # of the profiled GPU kernel time; 0 when not measured
    resources: ResourceReport | None = None
    sass: SassSummary | None = None
    hotspots: list[HotSpot] = field(default_factory=list)


def _short(name: str, limit: int = 48) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."


def _head(ev: KernelEvidence) -> str:
    if ev.share <= 0:  # not measured (no ncu): the compiler's evidence only
        return f"`{_short(ev.profile.name)}`:"
    return f"`{_short(ev.profile.name)}` ({ev.share:.0%} of GPU time):"


def _finding(ev: KernelEvidence, text: str, tags: list[str], numbers: dict, headroom: float) -> Finding:
    impact = max(0.0, min(1.0, ev.share * headroom))
    clean = {k: round(float(v), 4) for k, v in numbers.items() if v is not None}
    return Finding(f"{_head(ev)} {text}", tags, clean, impact, ev.profile.name)


def _load_bytes_per_thread(ev: KernelEvidence) -> tuple[float | None, str]:
    """Average bytes one thread asks for per global-load instruction, and where the number came from.

    From ncu: useful bytes (sector bytes x sector efficiency) / requests / 32 threads; this is the
    access width when warps are full. Without stage-2 counters, the dominant SASS LDG width.
    """
    p = ev.profile
    loaded, requests, efficiency = p.get("gld_bytes"), p.get("gld_requests"), p.get("gld_efficiency_pct")
    if loaded and requests:
        useful = loaded * (efficiency / 100.0 if efficiency else 1.0)
        return useful / requests / 32.0, "ncu"
    if ev.sass and ev.sass.dominant_load_bits:
        return ev.sass.dominant_load_bits / 8.0, "sass"
    return None, ""


def narrow_loads(ev: KernelEvidence) -> Finding | None:
    if ev.classification.bottleneck != Bottleneck.memory:
        return None
    width, source = _load_bytes_per_thread(ev)
    if width is None or width >= 15.5:
        return None
    dram = ev.profile.get("dram_pct") or 0.0
    text = f"DRAM throughput {dram:.0f}% of peak with {width:.0f}-byte global loads per thread"
    if ev.sass and ev.sass.global_loads:
        total = sum(ev.sass.global_loads.values())
        wide = sum(n for bits, n in ev.sass.global_loads.items() if bits >= 128)
        text += f" ({wide} of {total} load instructions in the SASS are 128-bit)"
    text += " — vectorise to 16-byte accesses."
    numbers = {"dram_pct": dram, "load_bytes_per_thread": width}
    return _finding(ev, text, ["vectorized-access"], numbers, max(0.1, 1.0 - dram / 100.0))


LSU_SHARE_MIN = 0.25  # ordinary loads must carry this share of the DRAM reads for their sector use to describe the kernel


def uncoalesced(ev: KernelEvidence) -> Finding | None:
    p = ev.profile
    efficiency = p.get("gld_efficiency_pct")
    if efficiency is None or efficiency >= 60.0 or not p.get("gld_requests"):
        return None
    loaded, read = p.get("gld_bytes"), p.get("dram_read_bytes")
    lsu_share = loaded / read if loaded is not None and read else None
    if efficiency <= 0.0 or (lsu_share is not None and lsu_share < LSU_SHARE_MIN):
        # TMA (cp.async.bulk) and library kernels read through paths the LSU counters do not see
        seen = f"ordinary loads carry {lsu_share:.0%} of the bytes read from DRAM" if lsu_share is not None \
            else "the counter reads exactly 0%"
        return Finding(f"{_head(ev)} global-load sector use reads {efficiency:.0f}%, but {seen}: the rest goes "
                       f"through TMA or other copy paths the counter does not see. A metric artifact, not "
                       f"uncoalesced access.", kind=NOTICE, kernel=ev.profile.name,
                       numbers={"gld_efficiency_pct": efficiency, **({"lsu_share": round(lsu_share, 4)} if lsu_share is not None else {})})
    text = (f"global loads use {efficiency:.0f}% of each 32-byte sector they fetch — make consecutive "
            f"threads read consecutive addresses.")
    return _finding(ev, text, ["coalescing"], {"gld_efficiency_pct": efficiency}, 1.0 - efficiency / 100.0)


def at_memory_roof(ev: KernelEvidence) -> Finding | None:
    dram = ev.profile.get("dram_pct")
    if ev.classification.bottleneck != Bottleneck.memory or dram is None or dram < 75.0:
        return None
    moved = sum(v for v in (ev.profile.get("dram_read_bytes"), ev.profile.get("dram_write_bytes")) if v)
    amount = f" moving {moved / 1e6:.1f} MB per launch" if moved else ""
    numbers = {"dram_pct": dram, "dram_bytes": moved or None}
    if ev.share >= ALONE_SHARE:  # the forward's only kernel: there is nothing beside it to fuse
        text = (f"DRAM at {dram:.0f}% of peak{amount}: the kernel is at the memory roof and does all of the "
                f"forward's work — it gets faster only by moving fewer bytes (each input read once, each output "
                f"written once, no second pass).")
        return _finding(ev, text, ["roofline-speed-of-light"], numbers, 0.5)
    text = (f"DRAM at {dram:.0f}% of peak{amount}: the kernel is at the memory roof, only fewer bytes help — "
            f"fuse it with the other kernels of the forward so intermediates never reach DRAM.")
    tags = ["memory-bound-elementwise-fusion", "operator-fusion", "roofline-speed-of-light"]
    return _finding(ev, text, tags, numbers, 0.5)


def cache_rereads(ev: KernelEvidence) -> Finding | None:
    p = ev.profile
    dram, l2, l1 = p.get("dram_pct") or 0.0, p.get("l2_pct") or 0.0, p.get("l1_pct") or 0.0
    if ev.classification.bottleneck != Bottleneck.memory or dram >= 40.0 or max(l1, l2) < 60.0:
        return None
    unit, pct = ("L2", l2) if l2 >= l1 else ("L1", l1)
    text = (f"{unit} throughput {pct:.0f}% of peak while DRAM is at {dram:.0f}%: the same data is re-read "
            f"from cache many times — stage reused tiles in shared memory.")
    return _finding(ev, text, ["smem-tiling"], {"l2_pct": l2, "l1_pct": l1, "dram_pct": dram}, 0.5)


def bank_conflicts(ev: KernelEvidence) -> Finding | None:
    p = ev.profile
    conflicts = (p.get("smem_ld_conflicts") or 0.0) + (p.get("smem_st_conflicts") or 0.0)
    wavefronts = (p.get("smem_ld_wavefronts") or 0.0) + (p.get("smem_st_wavefronts") or 0.0)
    if wavefronts <= 0 or conflicts / wavefronts < 0.1:
        return None
    ratio = conflicts / wavefronts
    text = (f"{ratio:.0%} of shared-memory wavefronts are bank-conflict replays ({conflicts:,.0f} conflicts) "
            f"— pad or swizzle the shared tile.")
    return _finding(ev, text, ["bank-conflict-padding"], {"conflict_ratio": ratio}, min(0.5, ratio))


def spills(ev: KernelEvidence) -> Finding | None:
    r, p = ev.resources, ev.profile
    spilled = (r.spill_store_bytes or 0) + (r.spill_load_bytes or 0) if r else 0
    local_traffic = (p.get("local_ld_bytes") or 0.0) + (p.get("local_st_bytes") or 0.0)
    local_ops = ev.sass.local_ops if ev.sass else 0
    if not spilled and not local_traffic and not local_ops:
        return None
    parts = []
    if spilled:
        parts.append(f"{spilled} bytes of register spills per thread ({r.registers} registers, {r.source})")
    if local_ops:
        parts.append(f"{local_ops} local-memory instructions in the SASS")
    if local_traffic:
        parts.append(f"{local_traffic / 1e6:.1f} MB of local-memory traffic per launch")
    text = "; ".join(parts) + " — cut live registers (smaller tiles, fewer stages, less unrolling)."
    numbers = {"spill_bytes": spilled or None, "local_traffic_bytes": local_traffic or None,
               "local_ops": local_ops or None}
    return _finding(ev, text, ["occupancy-register-pressure"], numbers, 0.3)


def no_tensor_cores(ev: KernelEvidence) -> Finding | None:
    p = ev.profile
    if ev.classification.bottleneck != Bottleneck.compute:
        return None
    tensor, fma, sm = p.get("tensor_pct") or 0.0, p.get("fma_pct"), p.get("sm_pct") or 0.0
    sass_fp32 = ev.sass is not None and ev.sass.tensor_ops == 0 and ev.sass.fp32_ops > 0
    if tensor >= 5.0 or not ((fma is not None and fma >= 40.0) or sass_fp32) or not _does_products(ev):
        return None
    pipe = f"FMA pipe {fma:.0f}%" if fma is not None else "FP32 FMAs in the SASS"
    text = (f"SM busy {sm:.0f}% on FP32 arithmetic ({pipe}) while the tensor pipes are idle ({tensor:.0f}%) "
            f"— run the matrix products on tensor cores (3xTF32 keeps float32 accuracy; bf16/fp16 where the "
            f"reference computes in them; the judge measures the error).")
    numbers = {"sm_pct": sm, "fma_pct": fma, "tensor_pct": tensor}
    return _finding(ev, text, ["tensor-cores", "tf32-precision-policy", "tf32x3-split-gemm"], numbers, 0.8)


def _fma_intensity(ev: KernelEvidence) -> float | None:
    """FMA FLOPs per byte moved to or from DRAM (2 per FFMA thread instruction); None unmeasured."""
    p = ev.profile
    ffma, moved = p.get("ffma_thread_inst"), (p.get("dram_read_bytes") or 0.0) + (p.get("dram_write_bytes") or 0.0)
    return 2.0 * ffma / moved if ffma is not None and moved > 0 else None


def _does_products(ev: KernelEvidence) -> bool:
    """Whether the kernel's own evidence shows matrix-product work that tensor cores could take: FMAs
    reusing each DRAM byte many times, or (without those counters) FP32 math on shared-memory tiles.
    A streaming kernel (elementwise, softmax, norms) reads each byte for a few FLOPs and has none."""
    intensity = _fma_intensity(ev)
    if intensity is not None:
        return intensity >= PRODUCT_INTENSITY
    return bool(ev.sass and ev.sass.shared_ops > 0 and ev.sass.fp32_ops > 0)


def _uses_mma(ev: KernelEvidence) -> bool:
    return (ev.profile.get("tensor_pct") or 0.0) >= 10.0 or bool(ev.sass and ev.sass.tensor_ops)


def at_compute_roof(ev: KernelEvidence) -> Finding | None:
    tensor = ev.profile.get("tensor_pct") or 0.0
    if ev.classification.bottleneck != Bottleneck.compute or tensor < 60.0:
        return None
    text = (f"tensor pipes {tensor:.0f}% busy: near the compute roof — what is left is fusing the epilogue "
            f"(bias, activation, cast) into this kernel instead of separate passes.")
    return _finding(ev, text, ["epilogue-fusion", "roofline-speed-of-light"], {"tensor_pct": tensor}, 0.2)


def poor_l2_reuse(ev: KernelEvidence) -> Finding | None:
    """A tiled matrix product whose concurrent tiles do not share operands in L2 re-reads them from DRAM."""
    p = ev.profile
    hit, dram, tensor = p.get("l2_hit_pct"), p.get("dram_pct") or 0.0, p.get("tensor_pct") or 0.0
    uses_mma = tensor >= 10.0 or bool(ev.sass and ev.sass.tensor_ops)
    if hit is None or hit >= 50.0 or dram < 50.0 or not uses_mma:
        return None
    text = (f"L2 hit rate {hit:.0f}% with DRAM at {dram:.0f}% in a tensor-core kernel: blocks running together "
            f"do not share operand tiles — launch tiles in grouped (swizzled) order.")
    return _finding(ev, text, ["swizzled-program-order-l2"], {"l2_hit_pct": hit, "dram_pct": dram}, 0.3)


def tail_wave(ev: KernelEvidence) -> Finding | None:
    waves = ev.profile.get("waves")
    if waves is None or waves < 1.0 or waves >= 4.0 or ev.classification.bottleneck == Bottleneck.latency:
        return None
    full = math.ceil(waves)
    idle = (full - waves) / full
    if idle < 0.2:
        return None
    text = (f"the grid fills {waves:.2f} waves, so the last wave leaves about {idle:.0%} of the SM time idle "
            f"— balance the work with a persistent grid or split-K.")
    return _finding(ev, text, ["persistent-kernel", "split-k"], {"waves": waves, "tail_idle": idle}, idle)


def small_grid(ev: KernelEvidence) -> Finding | None:
    p = ev.profile
    waves, sms, blocks = p.get("waves"), p.get("sm_count"), p.blocks
    if ev.classification.bottleneck != Bottleneck.latency or waves is None or waves >= 1.0:
        return None
    if p.duration_ns is not None and p.duration_ns < SHORT_KERNEL_NS:
        return None  # a kernel of a few microseconds: its launch, not its grid, is the cost
    grid = f"grid of {blocks} block{'s' if blocks != 1 else ''}" if blocks else "the grid"
    on = f" on {sms:.0f} SMs" if sms else ""
    numbers = {"waves": waves, "blocks": blocks, "sm_count": sms}
    if _uses_mma(ev):
        text = (f"{grid}{on} fills {waves:.0%} of one wave — give the product more output tiles to run at once: "
                f"smaller tiles, or split K across programs.")
        return _finding(ev, text, ["split-k"], numbers, 1.0 - waves)
    text = (f"{grid}{on} fills {waves:.0%} of one wave: most SMs idle — give the grid more programs (fewer "
            f"elements or rows per program, or split the work each program loops over).")
    return _finding(ev, text, [], numbers, 1.0 - waves)


_OCCUPANCY_LIMITS = {
    "occ_limit_registers": ("registers per thread", "occupancy-register-pressure"),
    "occ_limit_smem": ("shared memory per block", "smem-tiling"),
}


def low_occupancy(ev: KernelEvidence) -> Finding | None:
    p = ev.profile
    achieved = p.get("achieved_occupancy_pct")
    if achieved is None or achieved >= 25.0 or ev.classification.bottleneck != Bottleneck.latency:
        return None
    if (p.get("waves") or 0.0) < 1.0:
        return None  # the grid is the limit, not the per-SM resources (see small_grid)
    limits = {k: p.get(k) for k in ("occ_limit_registers", "occ_limit_smem", "occ_limit_warps", "occ_limit_blocks")}
    present = {k: v for k, v in limits.items() if v is not None}
    if not present:
        return None
    key = min(present, key=present.get)
    if key not in _OCCUPANCY_LIMITS:
        return None
    what, tag = _OCCUPANCY_LIMITS[key]
    detail = f"{p.regs} registers/thread" if key == "occ_limit_registers" and p.regs else (
        f"{p.smem} bytes of shared memory/block" if p.smem else what)
    text = (f"achieved occupancy {achieved:.0f}%, limited by {what} ({detail}: {present[key]:.0f} blocks per SM) "
            f"— fewer warps are available to hide latency.")
    return _finding(ev, text, [tag], {"achieved_occupancy_pct": achieved, key: present[key]}, 0.4)


_STALL_ADVICE = {
    "long_scoreboard": ("waiting on global/local memory loads", "keep more loads in flight (async copies, "
                        "software pipelining, more independent work per thread)",
                        ["async-copy-pipelining", "loop-unrolling-ilp"]),
    "barrier": ("waiting at block-wide barriers", "reduce within warps with shuffles and synchronise less",
                ["warp-shuffle-reduction"]),
    "wait": ("waiting on fixed-latency dependencies", "interleave independent instructions (unroll)",
             ["loop-unrolling-ilp"]),
    "short_scoreboard": ("waiting on shared-memory or special-function results",
                         "interleave independent work and avoid conflicted shared accesses",
                         ["loop-unrolling-ilp", "bank-conflict-padding"]),
    "mio_throttle": ("throttled by the shared-memory/MIO queue", "issue fewer, wider shared accesses without conflicts",
                     ["bank-conflict-padding", "vectorized-access"]),
    "lg_throttle": ("throttled by the global/local memory queue", "issue fewer, wider memory instructions",
                    ["vectorized-access"]),
    "math_pipe_throttle": ("throttled by a busy math pipe", "move the arithmetic to tensor cores where it is a matmul",
                           ["tensor-cores"]),
}


# SASS opcodes by which a warp waits for its warpgroup's asynchronous MMAs (Hopper wgmma)
_MMA_WAIT_OPS = ("WARPGROUP.DEPBAR", "WARPGROUP.ARRIVE", "WARPGROUP.WAIT")
_MMA_WAIT = ("waiting for their warpgroup's asynchronous tensor-core MMAs to complete",
             "keep more MMAs in flight behind the loads: more pipeline stages or a larger K tile, so the wait "
             "overlaps the next tile's copies", ["async-copy-pipelining"])
_MMA_BARRIER = ("waiting at block-wide barriers between the stages of a tiled product",
                "synchronise less per K step: deeper multi-stage buffers (fewer barriers per tile) or larger K tiles",
                ["async-copy-pipelining"])


def dominant_stall(ev: KernelEvidence) -> Finding | None:
    p = ev.profile
    per_issue = p.get("warp_cycles_per_issue")
    stalls = {r: p.get(f"stall_{r}") for r in STALL_REASONS}
    stalls = {r: v for r, v in stalls.items() if v}
    if not per_issue or not stalls or ev.classification.bottleneck != Bottleneck.latency:
        return None
    reason = max(stalls, key=stalls.get)
    share = stalls[reason] / per_issue
    if share < 0.3 or reason not in _STALL_ADVICE:
        return None
    what, advice, tags = _STALL_ADVICE[reason]
    top_op = ev.hotspots[0].source.split()[0] if ev.hotspots and ev.hotspots[0].source.split() else ""
    if top_op.startswith(_MMA_WAIT_OPS):  # the wait for asynchronous warpgroup MMAs, not a block barrier
        what, advice, tags = _MMA_WAIT
    elif reason == "barrier" and _uses_mma(ev):
        what, advice, tags = _MMA_BARRIER
    text = (f"warps spend {share:.0%} of their {per_issue:.1f} cycles between instructions {what} "
            f"({reason.replace('_', ' ')}) — {advice}.")
    if ev.hotspots:
        top = ev.hotspots[0]
        text += f" Hottest instruction: `{top.source}` with {top.share:.0%} of the stall samples"
        # samples land on the instruction that waits, so name the load it waits for
        text += f", waiting for `{top.waits_on}`." if top.waits_on else "."
    return _finding(ev, text, tags, {"stall_share": share, "warp_cycles_per_issue": per_issue}, share)


KERNEL_RULES: tuple[Callable[[KernelEvidence], Finding | None], ...] = (
    narrow_loads, uncoalesced, at_memory_roof, cache_rereads, bank_conflicts, spills, no_tensor_cores,
    at_compute_roof, poor_l2_reuse, tail_wave, small_grid, low_occupancy, dominant_stall,
)


def kernel_findings(ev: KernelEvidence) -> list[Finding]:
    findings = [rule(ev) for rule in KERNEL_RULES]
    return [f for f in findings if f is not None]


def timeline_findings(classification: Classification | None) -> list[Finding]:
    """The launch- or host-bound finding for the whole forward, if the timeline classified one."""
    if classification is None:
        return []
    n = classification.numbers
    idle = n.get("idle_fraction", 0.0)
    if classification.bottleneck == Bottleneck.launch:
        text = (f"Whole forward: {n['kernels_per_call']:g} kernel launches per call, median kernel "
                f"{n['median_kernel_us']:.1f} us, GPU idle {idle:.0%} of the {n['wall_us_per_call']:.0f} us forward "
                f"— fuse kernels or replay the forward as a CUDA graph.")
        return [Finding(text, ["operator-fusion", "launch-overhead-cuda-graphs"], n, idle)]
    if classification.bottleneck == Bottleneck.host:
        syncs = n.get("syncs_per_call", 0.0)
        text = f"Whole forward: {classification.reason[len('host-bound: '):]}"
        tags = ["avoid-host-sync"] if syncs else ["launch-overhead-cuda-graphs"]
        text += " — keep control flow and scalars on the device." if syncs else " — remove host work between kernels."
        return [Finding(text, tags, n, idle)]
    return []


def rank_findings(findings: list[Finding], limit: int = 6) -> list[Finding]:
    """Advice by impact (highest first, one per kernel and tag set), capped at `limit`; notices after."""
    actions = sorted((f for f in findings if f.kind == ACTION), key=lambda f: -f.impact)
    seen, kept = set(), []
    for finding in actions:
        key = (finding.kernel, tuple(finding.tags))
        if key in seen:
            continue
        seen.add(key)
        kept.append(finding)
    ranked = kept[:limit] + [f for f in findings if f.kind == NOTICE]
    for rank, finding in enumerate(ranked, 1):
        finding.rank = rank
    return ranked


def render(findings: list[Finding]) -> str:
    """Numbered lines for a prompt (Planner, Analyst)."""
    return "\n".join(f"{f.rank or i}. {f.line()}" for i, f in enumerate(findings, 1))
