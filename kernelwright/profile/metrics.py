"""The short names of Nsight Compute metrics, the raw names behind each, and the sections some come with.

What is collected is not listed here: `needs.py` derives it from the keys the classification,
the findings and the parser read, and asks this catalog for their names. Rules and findings never
spell raw metric names: they ask for a short key (`"dram_pct"`), and `ALIASES` lists the raw names
that can answer it. Several names per key because names move between ncu versions and GPU
generations (`dram__throughput` vs `gpu__dram_throughput`, a pipe's cycles vs its instructions); names a
device does not know are dropped before collection (see ncu.filter_metrics); launch and occupancy
values come with their sections instead (SECTION_KEYS).
"""
from __future__ import annotations

# short key -> raw ncu names; the value of a key is the largest value among the names present.
ALIASES: dict[str, tuple[str, ...]] = {
    # --- speed of light, launch, occupancy
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
    # --- memory: traffic, access width, coalescing, caches, shared-memory conflicts
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
    # --- compute: instruction mix
    "inst_executed": ("smsp__inst_executed.sum",),
    "ffma_thread_inst": ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",),
    "fadd_thread_inst": ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",),
    "fmul_thread_inst": ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",),
    "hfma_thread_inst": ("smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",),
    # --- latency: warp state (cycles per issued instruction spent in each stall)
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

# Launch attributes, device attributes and occupancy limits arrive with these sections.
# `ncu --query-metrics` lists only hardware counters, so these names are absent from it (checked
# against ncu 2025.3 on an H100): they are never requested with --metrics, and therefore never
# filtered against that list, which would drop them all. A key read by the findings that is listed
# here brings its section into the collection (needs.py); every other key is a counter.
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "LaunchStats": ("grid_size", "block_size", "registers", "smem_static", "smem_dynamic", "waves", "sm_count"),
    "Occupancy": ("theoretical_occupancy_pct", "occ_limit_registers", "occ_limit_smem", "occ_limit_warps",
                  "occ_limit_blocks"),
}
SECTION_ONLY_KEYS = tuple(key for keys in SECTION_KEYS.values() for key in keys)


def raw_names(keys) -> list[str]:
    """The raw ncu metric names behind `keys`, in a stable order without duplicates."""
    names: list[str] = []
    for key in keys:
        for name in ALIASES[key]:
            if name not in names:
                names.append(name)
    return names


def sections_for(keys) -> list[str]:
    """The sections that bring the section-only keys among `keys`, in SECTION_KEYS order."""
    wanted = set(keys)
    return [section for section, provided in SECTION_KEYS.items() if wanted & set(provided)]


def counters_for(keys) -> list[str]:
    """Raw counter names (for --metrics) behind the keys that are not section-only."""
    return raw_names(k for k in keys if k not in SECTION_ONLY_KEYS)


def lookup(metrics: dict[str, float], key: str) -> float | None:
    """Value of short key `key` in a raw metric dict: the largest among its present names."""
    values = [metrics[name] for name in ALIASES.get(key, (key,)) if name in metrics]
    return max(values) if values else None
