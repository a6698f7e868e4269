"""The library against real KernelBench problems (from ../shared): which templates match which
problems, and default instances that match the reference under the Triton interpreter."""
import pytest

from kernelwright.problem import load_problem
from kernelwright.tune.inprocess import InProcessEvaluator
from kernelwright.tune.library import NoTemplate, build_template

EXPECTED = {
    "level1/19_ReLU.py": ["pointwise"],
    "level1/33_BatchNorm.py": ["rowwise"],
    "level1/23_Softmax.py": ["rowwise"],
    "level1/39_L2Norm_.py": ["rowwise"],
    "level1/47_Sum_reduction_over_a_dimension.py": ["rowwise"],
    "level1/1_Square_matrix_multiplication_.py": ["gemm_epilogue"],
    "level1/11_4D_tensor_matrix_multiplication.py": ["gemm_epilogue"],
    "level1/3_Batched_matrix_multiplication.py": ["gemm_epilogue"],
    "level2/9_Matmul_Subtract_Multiply_ReLU.py": ["gemm_epilogue"],
    "level2/99_Matmul_GELU_Softmax.py": ["gemm_epilogue", "rowwise"],
    "level2/45_Gemm_Sigmoid_LogSumExp.py": ["gemm_epilogue", "gemm_epilogue", "rowwise"],
    "level1/41_Max_Pooling_1D.py": ["pool"],
    "level1/45_Average_Pooling_2D.py": ["pool"],
    "level1/55_conv_standard_2D__asymmetric_input__square_kernel.py": ["conv"],
    "level1/73_conv_transposed_3D_asymmetric_input_square_kernel__strided_padded__grouped.py": ["conv"],
    "level2/35_Conv2d_Subtract_HardSwish_MaxPool_Mish.py": ["conv", "pool"],
    "level2/67_Conv2d_GELU_GlobalAvgPool.py": ["conv", "rowwise"],
}
DECLINED = {
    "level1/95_CrossEntropyLoss.py": "cross_entropy_loss",
    "level1/89_cumsum.py": "cumsum",
    "level1/97_ScaledDotProductAttention.py": "scaled_dot_product_attention",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_families_matched(kernelbench, name):
    match = build_template(load_problem(kernelbench / name, shrink=True))
    assert match.families == EXPECTED[name]
    assert len(match.groups) == len(EXPECTED[name])
    # the template's defaults satisfy its own constraints on the reference GPU
    from kernelwright.tune.prune import prune_space

    feasible = prune_space(match.template).feasible if len(match.families) == 1 else None
    if feasible is not None:
        assert match.template.defaults in feasible


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_declined_with_the_reason(kernelbench, name):
    with pytest.raises(NoTemplate, match=DECLINED[name]):
        build_template(load_problem(kernelbench / name, shrink=True))


TINY = {
    "level1/23_Softmax.py": {"batch_size": 8, "dim": 96},
    "level1/47_Sum_reduction_over_a_dimension.py": {"batch_size": 4, "dim1": 48, "dim2": 33},
    "level2/99_Matmul_GELU_Softmax.py": {"batch_size": 16, "in_features": 32, "out_features": 48},
    "level2/37_Matmul_Swish_Sum_GroupNorm.py": {"batch_size": 16, "in_features": 32, "out_features": 64,
                                                "num_groups": 4},
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_default_instances_match_the_reference(kernelbench, name):
    problem = load_problem(kernelbench / name, overrides=TINY[name])
    template = build_template(problem).template
    [m] = InProcessEvaluator(problem, device="cpu", rep_ms=1, warmup_ms=0).evaluate(template, [template.defaults])
    assert m.status == "pass", m.error
