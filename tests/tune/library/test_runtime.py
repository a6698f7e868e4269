"""The host helpers every library template carries: broadcast strides and dimension merging."""
import pytest
import torch

from kernelwright.tune.library.runtime import kw_merge, kw_numel, kw_strides


def test_contiguous_operands_merge_into_one_flat_dimension():
    x = torch.empty(4, 6, 5)
    sizes, (sx,) = kw_merge(x.shape, [kw_strides(x, x.shape)], range(3), 3)
    assert sizes == [120, 1, 1] and sx == [1, 0, 0]  # the trailing size-1 dims compile away


def test_broadcast_bias_keeps_its_own_dimension():
    shape = (2, 3, 4, 5)
    x, bias = torch.empty(shape), torch.empty(3, 1, 1)
    sizes, (sx, sb) = kw_merge(shape, [kw_strides(x, shape), kw_strides(bias, shape)], range(4), 3)
    assert sizes == [2, 3, 20]
    assert sx == [60, 20, 1] and sb == [0, 1, 0]


def test_transposed_operand_and_failure():
    shape = (4, 6)
    xt = torch.empty(6, 4).t()
    assert kw_merge(shape, [kw_strides(xt, shape)], range(2), 2) == ([4, 6], [[1, 4]])
    with pytest.raises(ValueError, match="do not merge"):
        kw_merge(shape, [kw_strides(xt, shape)], range(2), 1)


def test_scalars_and_numel():
    shape = (3, 4)
    assert kw_strides(torch.tensor(2.0), shape) == [0, 0]
    assert kw_numel(shape) == 12 and kw_numel(()) == 1
