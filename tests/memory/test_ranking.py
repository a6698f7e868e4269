"""Skill ranking for prompts, checked on real shared problems (op kinds and footprints measured)."""
from __future__ import annotations

import pytest

from kernelwright.judge.target import known_target
from kernelwright.memory.ranking import SkillQuery, rank_skills
from kernelwright.memory.skills import builtin_library
from kernelwright.search.context import ContextBuilder
from kernelwright.search.problem_info import describe_problem
from kernelwright.search.settings import Settings

LIBRARY = builtin_library()


def ranked(kernelbench, relative: str, backend: str = "triton", limit: int = 5, **query) -> list[str]:
    path = kernelbench / relative
    if not path.is_file():
        pytest.skip(f"{path} is not in the shared KernelBench copy")
    info = describe_problem(path, backend, {}, "cpu")
    target = known_target("h100")
    builder = ContextBuilder(info, Settings(skills_k=limit), lambda q, k: rank_skills(LIBRARY, q, k), target=target)
    skills = builder.rank_skills(None)
    return [s.name for s in skills]


def test_pooling_gets_pooling_and_bandwidth_skills_not_graphs_or_atomics(kernelbench):
    names = ranked(kernelbench, "level1/45_Average_Pooling_2D.py")
    assert names[0] == "pooling-windows" and "vectorized-access" in names
    assert not {"launch-overhead-cuda-graphs", "atomic-reduction", "judge-rules"} & set(names)


def test_an_fp32_gemm_gets_no_half_precision_tile_advice(kernelbench):
    names = ranked(kernelbench, "level2/63_Gemm_ReLU_Divide.py", limit=8)
    assert not {"tensor-cores", "fp16-bf16-accumulation"} & set(names)
    assert "epilogue-fusion" in names[:3]


def test_elementwise_reaches_vectorisation_and_autotuning(kernelbench):
    names = ranked(kernelbench, "level1/19_ReLU.py", limit=5)
    assert names[:2] == ["memory-bound-elementwise-fusion", "vectorized-access"]
    assert "triton-autotune-configs" in names
    assert "epilogue-fusion" not in names[:4]  # no GEMM to fuse into


def test_cited_skills_come_first_and_must_fit_the_run():
    query = SkillQuery(op_kinds=("elementwise",), backend="triton", dtypes=("float32",),
                       cited=("bank-conflict-padding", "coalescing", "no-such-skill", "tensor-cores"))
    names = [s.name for s in rank_skills(LIBRARY, query, 4)]
    assert names[0] == "coalescing"  # bank-conflict-padding is CUDA-only, tensor-cores fp16/bf16-only
    assert not {"bank-conflict-padding", "tensor-cores"} & set(names)


def test_a_measured_bottleneck_filters_and_an_expected_one_only_weighs():
    measured = [s.name for s in rank_skills(LIBRARY, SkillQuery(op_kinds=("elementwise",), bottleneck="launch",
                                                                backend="triton"), 40)]
    assert measured[0] in ("launch-overhead-cuda-graphs", "operator-fusion", "memory-bound-elementwise-fusion")
    assert "vectorized-access" not in measured  # memory-only skill
    expected = [s.name for s in rank_skills(LIBRARY, SkillQuery(op_kinds=("elementwise",), backend="triton",
                                                                expected_bottleneck="launch"), 40)]
    assert "vectorized-access" in expected


def test_attention_spelled_out_as_matmuls_and_softmax_gets_flash_attention_first(kernelbench):
    for problem in ("level3/43_MinGPTCausalAttention.py", "level3/31_VisionAttention.py"):
        names = ranked(kernelbench, problem, limit=5)
        assert "flash-attention" in names[:2], (problem, names)


def test_a_norm_next_to_a_product_gets_the_fusion_of_both(kernelbench):
    for problem in ("level2/33_Gemm_Scale_BatchNorm.py", "level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py"):
        names = ranked(kernelbench, problem, limit=5)
        assert "gemm-norm-fusion" in names[:3], (problem, names)
    conv = ranked(kernelbench, "level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py", limit=5)
    assert "im2col-implicit-gemm-conv" in conv[:3]


def test_a_norm_alone_gets_no_advice_about_the_product_it_lacks(kernelbench):
    """gemm-norm-fusion says `with_kinds: [matmul, conv, conv_transpose]`: a GroupNorm by itself
    was offered it (a model answering an H200 exchange run called it noise)."""
    for problem in ("level1/35_GroupNorm_.py", "level1/40_LayerNorm.py"):
        names = ranked(kernelbench, problem, limit=40)
        assert "gemm-norm-fusion" not in names and "welford-norm" in names[:3], (problem, names)


def test_split_k_and_persistent_grids_only_where_the_product_has_few_tiles(kernelbench):
    many = ranked(kernelbench, "level1/1_Square_matrix_multiplication_.py", limit=40)  # 1024 tiles on 132 SMs
    assert not {"split-k", "persistent-kernel"} & set(many)
    waves = ranked(kernelbench, "level1/17_Matmul_with_transposed_B.py", limit=40)  # 512 tiles: under 4 waves
    assert "persistent-kernel" in waves and "split-k" not in waves


def test_product_tiles_count_the_heaviest_product(kernelbench):
    from kernelwright.search.problem_info import product_tiles

    for relative, tiles in (("level1/1_Square_matrix_multiplication_.py", 1024),
                            ("level1/19_ReLU.py", None)):
        path = kernelbench / relative
        if not path.is_file():
            pytest.skip(f"{path} is not in the shared KernelBench copy")
        assert product_tiles(path, {}) == tiles
