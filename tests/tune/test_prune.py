"""Pruning before compiling (constraints, device limits) and after (compiler-reported resources)."""
import dataclasses

from kernelwright.tune.hardware import H100_SXM, detect_limits, table_limits
from kernelwright.tune.prune import KernelResources, prune_space, resource_violation
from kernelwright.tune.resources import parse_ptxas
from kernelwright.tune.template import parse_template

# hand-written test template
GEMM_LIKE = '''
KW_TUNE = {
    "params": {"BLOCK_M": [64, 128, 256], "BLOCK_K": [32, 64, 128], "num_warps": [4, 8, 64], "num_stages": [2, 4]},
    "constraints": ["(BLOCK_M * BLOCK_K * 2) * 2 * num_stages <= SMEM", "BLOCK_M <= next_pow2(M)"],
    "defaults": {"BLOCK_M": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2},
    "sizes": {"M": 128},
}
KW_PARAMS = dict(KW_TUNE["defaults"])
def launch():
    return KW_PARAMS
'''


def test_static_pruning_gives_every_config_a_place_and_a_reason():
    t = parse_template(GEMM_LIKE)
    report = prune_space(t, H100_SXM)
    assert report.total == t.space_size == 54
    assert report.feasible and report.pruned
    for item in report.pruned:
        assert item.reason and item.stage == "static"
    # num_warps=64 would be 2048 threads: the implicit launch constraint removes it
    assert all(c["num_warps"] != 64 for c in report.feasible)
    assert any("MAX_THREADS" in p.reason for p in report.pruned if p.params["num_warps"] == 64)
    # the size constraint: BLOCK_M=256 is larger than M=128
    assert all(c["BLOCK_M"] <= 128 for c in report.feasible)
    for c in report.feasible:
        assert (c["BLOCK_M"] * c["BLOCK_K"] * 2) * 2 * c["num_stages"] <= H100_SXM.smem_per_block_optin


def test_smaller_device_prunes_more():
    t = parse_template(GEMM_LIKE)
    small = dataclasses.replace(H100_SXM, name="small", smem_per_block_optin=48 * 1024)
    big, little = prune_space(t, H100_SXM), prune_space(t, small)
    assert len(little.feasible) < len(big.feasible)
    reason = next(p.reason for p in little.pruned if p.params == {"BLOCK_M": 128, "BLOCK_K": 128,
                                                                "num_warps": 4, "num_stages": 4})
    assert "SMEM = 49152" in reason and "262144" in reason


def test_limits_table_and_detection_without_gpu():
    assert table_limits("NVIDIA H100 80GB HBM3").sm_count == 132
    env = detect_limits().as_env()  # no GPU here: the H100 table
    assert env["SMEM"] == 232448 and env["MAX_THREADS"] == 1024 and env["CC"] >= 70


def test_resource_violations():
    ok = KernelResources("k", registers=128, spills=0, shared_bytes=65536, threads=256)
    assert resource_violation([ok], H100_SXM) is None
    assert "spills" in resource_violation([dataclasses.replace(ok, spills=24)], H100_SXM)
    assert resource_violation([dataclasses.replace(ok, spills=24)], H100_SXM, allow_spills=True) is None
    assert "shared memory" in resource_violation([dataclasses.replace(ok, shared_bytes=300_000)], H100_SXM)
    assert "registers" in resource_violation([dataclasses.replace(ok, registers=255, threads=1024)], H100_SXM)


# hand-written test data in the form nvcc -Xptxas -v prints
PTXAS_LOG = """
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z10gemm_tiledPKfS0_Pfiii' for 'sm_90'
ptxas info    : Function properties for _Z10gemm_tiledPKfS0_Pfiii
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 64 registers, 16384 bytes smem, 388 bytes cmem[0]
ptxas info    : Compiling entry function '_Z6reducePf' for 'sm_90'
ptxas info    : Function properties for _Z6reducePf
    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, 360 bytes cmem[0]
"""


def test_parse_ptxas():
    kernels = {k.name: k for k in parse_ptxas(PTXAS_LOG)}
    gemm, reduce = kernels["_Z10gemm_tiledPKfS0_Pfiii"], kernels["_Z6reducePf"]
    assert (gemm.registers, gemm.spills, gemm.shared_bytes) == (64, 0, 16384)
    assert (reduce.registers, reduce.spills, reduce.shared_bytes) == (255, 16, 0)
    assert "spills" in resource_violation(list(kernels.values()), H100_SXM)
