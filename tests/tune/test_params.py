"""Declared parameters beyond block sizes (issue 33, point 2): kinds, categorical choices,
conditional parameters, and clear errors for a space that cannot be searched."""
import pytest

from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.params import PARAM_KINDS, infer_kind
from kernelwright.tune.prune import prune_space
from kernelwright.tune.state import TunerState
from kernelwright.tune.template import TemplateError, parse_template

SOURCE = '''KW_TUNE = {
    "params": {
        "BLOCK_K": {"pow2": [32, 128]},
        "GROUP_M": {"choice": [1, 8], "kind": "order"},
        "SPLIT_K": {"values": [1, 2, 4], "kind": "split", "when": "K >= 16 * BLOCK_K", "off": 1},
        "GRID": {"choice": ["oneshot", "persistent"], "when": "cdiv(M, 64) > NUM_SMS"},
        "num_warps": [4, 8],
    },
    "constraints": ["BLOCK_K <= K"],
    "defaults": {"BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1, "GRID": "oneshot", "num_warps": 4},
    "sizes": {"K": 1024, "M": 4096},
}
KW_PARAMS = dict(KW_TUNE["defaults"])


class ModelNew:
    params = KW_PARAMS
'''


def template(source=SOURCE):
    return parse_template(source, name="space")


def test_kinds_are_declared_or_inferred_and_choices_are_categorical():
    t = template()
    assert t.params["GROUP_M"] == (1, 8) and t.params["BLOCK_K"] == (32, 64, 128)
    assert t.kinds() == {"BLOCK_K": "block", "GROUP_M": "order", "SPLIT_K": "split", "GRID": "grid",
                         "num_warps": "warps"}
    assert t.categorical == {"GROUP_M", "GRID"}  # SPLIT_K's values are ordered
    assert infer_kind("g1_num_stages") == "stages" and infer_kind("VEC") == "vector"
    assert infer_kind("PRECISION") == "precision" and infer_kind("WHATEVER") == "other"
    assert set(PARAM_KINDS) >= {"order", "split", "vector", "grid", "precision", "stages"}


def test_a_conditional_parameter_is_off_where_its_condition_fails():
    report = prune_space(template(), H100_SXM)
    # K = 1024: split-K only for BLOCK_K <= 64 (K >= 16 * BLOCK_K); M = 4096 tiles of 64 rows: 64
    # programs, fewer than the H100's 132 SMs, so the persistent grid is never active
    assert {c["GRID"] for c in report.feasible} == {"oneshot"}
    splits = {(c["BLOCK_K"], c["SPLIT_K"]) for c in report.feasible}
    assert splits == {(32, 1), (32, 2), (32, 4), (64, 1), (64, 2), (64, 4), (128, 1)}
    reasons = [p.reason for p in report.pruned if p.params["SPLIT_K"] == 2 and p.params["BLOCK_K"] == 128
               and p.params["GRID"] == "oneshot"]
    assert reasons and "K >= 16 * BLOCK_K" in reasons[0] and "K = 1024 >= 16 * BLOCK_K = 2048 does not hold" in reasons[0]
    bigger = template(SOURCE.replace('"M": 4096', '"M": 65536'))
    assert {c["GRID"] for c in prune_space(bigger, H100_SXM).feasible} == {"oneshot", "persistent"}


@pytest.mark.parametrize("old, new, message", [
    ('"kind": "split"', '"kind": "splitting"', "kind 'splitting' is not one of"),
    ('{"values": [1, 2, 4],', '{"value": [1, 2, 4],', "unknown key"),
    ('{"pow2": [32, 128]}', '{"pow2": [32, 128], "values": [32]}', "exactly one of"),
    ('"off": 1}', '"off": 3}', "'off' value 3"),
    ('"when": "K >= 16 * BLOCK_K", "off": 1', '"when": "SPLIT_K < K", "off": 1', "names SPLIT_K itself"),
    ('"when": "K >= 16 * BLOCK_K"', '"when": "KK >= 16"', "its 'when' is not usable"),
    ('"choice": [1, 8]', '"choice": [1, "8"]', "mixes number and string"),
    ('"kind": "order"}', '"kind": "order", "off": 1}', "'off' means nothing without 'when'"),
    ('"constraints": ["BLOCK_K <= K"]', '"constraints": ["BLOCK_K <= K", "K > 2048"]', "removes every configuration"),
    ('"num_warps": [4, 8]', '"num_warps": {"pow2": [4, 8], "step": 2}', "'step' belongs to a 'range'"),
])
def test_an_invalid_space_is_refused_with_what_to_fix(old, new, message):
    assert old in SOURCE
    with pytest.raises(TemplateError, match=message):
        template(SOURCE.replace(old, new))


def test_a_space_the_constraints_empty_is_refused_by_the_tuner():
    empty = template(SOURCE.replace('"constraints": ["BLOCK_K <= K"]', '"constraints": ["BLOCK_K * num_warps > K * 8"]'))
    with pytest.raises(TemplateError, match=r"leave none of the \d+ configuration\(s\) on .*BLOCK_K \* num_warps > K \* 8"):
        TunerState(empty, limits=H100_SXM)


def test_restrict_keeps_the_declared_kinds():
    t = template().restrict(fixed={"GRID": "oneshot"})
    assert t.kinds()["SPLIT_K"] == "split" and "GROUP_M" in t.categorical


def test_the_samplers_treat_a_numeric_choice_as_a_category():
    pytest.importorskip("optuna")
    import optuna

    from kernelwright.tune.strategies import make_tune_strategy

    t = template()
    feasible = prune_space(t, H100_SXM).feasible
    search = make_tune_strategy("tpe", feasible, t.params, budget=8, categorical=t.categorical)
    assert isinstance(search.distributions["GROUP_M"], optuna.distributions.CategoricalDistribution)
    assert isinstance(search.distributions["SPLIT_K"], optuna.distributions.IntDistribution)
    asked = search.ask(4)
    assert len(asked) == 4 and all(c in feasible for c in asked)
