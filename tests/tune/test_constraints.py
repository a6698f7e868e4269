"""Constraint strings: evaluated by an AST walker, explained when false, never executed as code."""
import pytest

from kernelwright.tune.constraints import ConstraintError, parse_constraint


def test_arithmetic_comparison_and_functions():
    c = parse_constraint("BLOCK_M * BLOCK_K * 2 * num_stages <= SMEM and is_pow2(BLOCK_M)")
    assert c.check({"BLOCK_M": 128, "BLOCK_K": 64, "num_stages": 3, "SMEM": 232448}) == (True, "")
    ok, why = c.check({"BLOCK_M": 256, "BLOCK_K": 128, "num_stages": 4, "SMEM": 232448})
    assert not ok
    # the explanation names the failing side with its value
    assert "BLOCK_M * BLOCK_K * 2 * num_stages = 262144" in why and "SMEM = 232448" in why


def test_helpers_and_conditional():
    c = parse_constraint("BLOCK <= max(16, next_pow2(N)) if N > 0 else BLOCK == 16")
    assert c.check({"BLOCK": 64, "N": 40})[0]
    assert not c.check({"BLOCK": 128, "N": 40})[0]
    assert parse_constraint("cdiv(N, BLOCK) >= SM_COUNT").check({"N": 4096, "BLOCK": 16, "SM_COUNT": 132})[1] == ""
    assert parse_constraint("PRECISION in ('ieee', 'tf32x3')").check({"PRECISION": "tf32"})[0] is False


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')",
    "BLOCK.bit_length() > 2",
    "(lambda: 1)() == 1",
    "[x for x in range(3)]",
    "open('/etc/passwd')",
    "BLOCK[0] == 1",
])
def test_forbidden_constructs_are_refused(text):
    with pytest.raises(ConstraintError):
        parse_constraint(text)


def test_unknown_names_are_reported():
    with pytest.raises(ConstraintError, match="BLOK"):
        parse_constraint("BLOK <= 4", known_names={"BLOCK", "SMEM"})


def test_huge_exponent_is_an_explained_failure():
    ok, why = parse_constraint("2 ** BLOCK > 0").check({"BLOCK": 10_000})
    assert not ok and "exponent" in why


def test_missing_value_is_an_explained_failure():
    ok, why = parse_constraint("N >= 1").check({})
    assert not ok and "N" in why
