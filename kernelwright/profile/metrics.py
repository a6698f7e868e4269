"""Which Nsight Compute sections and metrics each profiling stage collects, and their short names.

Stage 1 is cheap (speed of light, launch statistics, occupancy) and runs on every profiled kernel;
stage 2 collects only what the bottleneck class of a hot kernel needs. Rules and findings never
spell raw metric names: they ask for a short key (`"dram_pct"`), and `ALIASES` lists the raw names
that can answer it. Several names per key because names move between ncu versions and GPU
generations (`dram__throughput` vs `gpu__dram_throughput`, a pipe's cycles vs its instructions); names a
device does not know are dropped before collection (see ncu.filter_metrics); launch and occupancy
values come with the stage-1 sections instead (STAGE1_SECTION_KEYS).
"""
from __future__ import annotations

# short key -> raw ncu names; the value of a key is the largest value among the names present.
ALIASES: dict[str, tuple[str, ...]] = {
    # --- stage 1: speed of light, launch, occupancy
    "duration_ns": ("gpu__time_duration.sum",),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "mem_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_pct": (
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    "l1_pct": ("l1tex__throughput.avg.pct_of_peak_sustained_active",),
    "l2_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
    "tensor_pct": (  # on Hopper the hmma pipe counts HGMMA (wgmma) too: there is no separate gmma pipe metric
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
    ),
    "fma_pct": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",),
    "issue_active_pct": ("sm__inst_issued.avg.pct_of_peak_sustained_active",),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "grid_size": ("launch__grid_size",),
    "block_size": ("launch__block_size",),
    "registers": ("launch__registers_per_thread",),
    "smem_static": ("launch__shared_mem_per_block_static",),
    "smem_dynamic": ("launch__shared_mem_per_block_dynamic",),
    "waves": ("launch__waves_per_multiprocessor",),
    "sm_count": ("device__attribute_multiprocessor_count", "launch__sm_count"),
    "occ_limit_registers": ("launch__occupancy_limit_registers",),
    "occ_limit_smem": ("launch__occupancy_limit_shared_mem",),
    "occ_limit_warps": ("launch__occupancy_limit_warps",),
    "occ_limit_blocks": ("launch__occupancy_limit_blocks",),
    # --- stage 2, memory: traffic, access width, coalescing, caches, shared-memory conflicts
    "dram_read_bytes": ("dram__bytes_read.sum",),
    "dram_write_bytes": ("dram__bytes_write.sum",),
    "gld_bytes": ("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",),
    "gld_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",),
    "gld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "gst_bytes": ("l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",),
    "gst_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",),
    "gld_efficiency_pct": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",),
    "gst_efficiency_pct": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
    "smem_ld_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
    "smem_st_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",),
    "smem_ld_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",),
    "smem_st_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",),
    "local_ld_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",),
    "local_st_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",),
    # --- stage 2, compute: instruction mix
    "inst_executed": ("smsp__inst_executed.sum",),
    "ffma_thread_inst": ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",),
    "fadd_thread_inst": ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",),
    "fmul_thread_inst": ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",),
    "hfma_thread_inst": ("smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",),
    # --- stage 2, latency: warp state (cycles per issued instruction spent in each stall)
    "warp_cycles_per_issue": ("smsp__average_warps_active_per_issue_active.ratio",),
    "issue_active_per_cycle": ("smsp__issue_active.avg.per_cycle_active",),
}

STALL_REASONS = (
    "long_scoreboard", "short_scoreboard", "barrier", "membar", "wait", "math_pipe_throttle",
    "mio_throttle", "lg_throttle", "tex_throttle", "not_selected", "selected", "dispatch_stall",
    "drain", "imc_miss", "branch_resolving", "no_instruction", "sleeping", "misc",
)
for _reason in STALL_REASONS:
    ALIASES[f"stall_{_reason}"] = (f"smsp__average_warps_issue_stalled_{_reason}_per_issue_active.ratio",)

STAGE1_SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy")
# Launch attributes, device attributes and occupancy limits arrive with the LaunchStats and
# Occupancy sections. `ncu --query-metrics` lists only hardware counters, so these names are absent
# from it (checked against ncu 2025.3 on an H100): they are never requested with --metrics, and
# therefore never filtered against that list, which would drop them all.
STAGE1_SECTION_KEYS = (
    "theoretical_occupancy_pct", "grid_size", "block_size", "registers", "smem_static", "smem_dynamic",
    "waves", "sm_count", "occ_limit_registers", "occ_limit_smem", "occ_limit_warps", "occ_limit_blocks",
)
STAGE1_COUNTER_KEYS = (
    "duration_ns", "sm_pct", "mem_pct", "dram_pct", "l1_pct", "l2_pct", "tensor_pct", "fma_pct",
    "issue_active_pct", "achieved_occupancy_pct",
)
STAGE1_KEYS = STAGE1_COUNTER_KEYS + STAGE1_SECTION_KEYS

# stage 2 by bottleneck class (the values of classify.Bottleneck)
STAGE2_SECTIONS: dict[str, tuple[str, ...]] = {
    "memory": ("MemoryWorkloadAnalysis",),
    "compute": ("ComputeWorkloadAnalysis", "InstructionStats"),
    "latency": ("WarpStateStats", "SchedulerStats", "SourceCounters"),
}
_MEMORY_KEYS = (
    "dram_read_bytes", "dram_write_bytes", "gld_bytes", "gld_requests", "gld_sectors", "gst_bytes",
    "gst_requests", "gld_efficiency_pct", "gst_efficiency_pct", "l1_hit_pct", "l2_hit_pct",
    "smem_ld_conflicts", "smem_st_conflicts", "smem_ld_wavefronts", "smem_st_wavefronts",
    "local_ld_bytes", "local_st_bytes",
)
_COMPUTE_KEYS = (
    "inst_executed", "ffma_thread_inst", "fadd_thread_inst", "fmul_thread_inst", "hfma_thread_inst",
    "local_ld_bytes", "local_st_bytes", "l2_hit_pct", "dram_read_bytes", "dram_write_bytes",
)
_LATENCY_KEYS = ("warp_cycles_per_issue", "issue_active_per_cycle", "local_ld_bytes", "local_st_bytes") + tuple(
    f"stall_{r}" for r in STALL_REASONS
)
STAGE2_KEYS: dict[str, tuple[str, ...]] = {
    "memory": _MEMORY_KEYS,
    "compute": _COMPUTE_KEYS,
    "latency": _LATENCY_KEYS,
}


def raw_names(keys) -> list[str]:
    """The raw ncu metric names behind `keys`, in a stable order without duplicates."""
    names: list[str] = []
    for key in keys:
        for name in ALIASES[key]:
            if name not in names:
                names.append(name)
    return names


def stage1_metrics() -> list[str]:
    """Counters requested explicitly in stage 1 (the section-provided keys come with the sections)."""
    return raw_names(STAGE1_COUNTER_KEYS)


def stage2_plan(classes) -> tuple[list[str], list[str]]:
    """Sections and metrics for the union of bottleneck classes (strings); unknown classes add nothing."""
    sections: list[str] = []
    keys: list[str] = []
    for cls in classes:
        for section in STAGE2_SECTIONS.get(str(cls), ()):
            if section not in sections:
                sections.append(section)
        for key in STAGE2_KEYS.get(str(cls), ()):
            if key not in keys:
                keys.append(key)
    return sections, raw_names(keys)


def lookup(metrics: dict[str, float], key: str) -> float | None:
    """Value of short key `key` in a raw metric dict: the largest among its present names."""
    values = [metrics[name] for name in ALIASES.get(key, (key,)) if name in metrics]
    return max(values) if values else None
