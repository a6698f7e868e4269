"""Seeds (issue 33, point 3): a tuning starts from what an earlier tuning of the same template
family measured on the same device, at the same shape or the nearest one."""
import json
import logging

import pytest

from kernelwright.tune.autopilot import open_seeds
from kernelwright.tune.evaluate import Measurement, TableEvaluator
from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.prune import prune_space
from kernelwright.tune.seeds import SeedCache, family, shape_distance
from kernelwright.tune.template import config_key, parse_template
from kernelwright.tune.tuner import tune, tune_groupwise

SOURCE = '''KW_TUNE = {
    "params": {"BLOCK": {"pow2": [64, 2048]}, "num_warps": [1, 2, 4, 8], "GRID": {"choice": ["oneshot", "persistent"]}},
    "constraints": ["BLOCK >= num_warps * WARP_SIZE"],
    "defaults": {"BLOCK": 256, "num_warps": 4, "GRID": "oneshot"},
    "sizes": {"N": 4096},
}
KW_PARAMS = dict(KW_TUNE["defaults"])


class ModelNew:
    params = KW_PARAMS
'''
BEST = {"BLOCK": 1024, "num_warps": 8, "GRID": "persistent"}  # late in declaration order


def template(n=4096, source=SOURCE):
    return parse_template(source.replace('"N": 4096', f'"N": {n}'), name="demo")


def table(t, best=BEST):
    """Times with one clear optimum: `best` at 1 ms, the others slower the further they are from it."""
    rows = {}
    for c in prune_space(t, H100_SXM).feasible:
        far = sum(c[k] != v for k, v in best.items())
        rows[config_key(c)] = {"status": "pass", "time_ms": 1.0 + far + c["BLOCK"] / 10000}
    return rows


def evaluator(t, device="NVIDIA H100", best=BEST):
    e = TableEvaluator(table(t, best))
    e.device = device
    return e


def first_tuning(seeds, device="NVIDIA H100", n=4096, best=BEST):
    t = template(n)
    full = tune(t, evaluator(t, device, best), strategy="exhaustive", limits=H100_SXM, seeds=seeds)
    assert full.best.params == best
    return full


def test_a_second_tuning_of_the_same_template_and_shape_starts_from_the_firsts_best(tmp_path):
    seeds = SeedCache(tmp_path / "seeds")
    first_tuning(seeds)
    t = template()
    again = tune(t, evaluator(t), strategy="exhaustive", budget=4, limits=H100_SXM, first=[t.defaults], seeds=seeds)
    assert [tr.params for tr in again.trials[:2]] == [t.defaults, BEST]  # the defaults, then the seed
    assert again.best.params == BEST
    blind = tune(t, evaluator(t), strategy="exhaustive", budget=4, limits=H100_SXM, first=[t.defaults])
    assert blind.best.params != BEST  # without seeds four evaluations do not reach it


def test_a_tpe_search_is_seeded_too(tmp_path):
    pytest.importorskip("optuna")
    seeds = SeedCache(tmp_path / "seeds")
    first_tuning(seeds)
    t = template()
    again = tune(t, evaluator(t), strategy="tpe", budget=8, limits=H100_SXM, seeds=seeds, seed=3)
    assert again.trials[0].params == BEST


def test_another_device_does_not_reuse_the_seeds(tmp_path):
    seeds = SeedCache(tmp_path / "seeds")
    first_tuning(seeds, device="NVIDIA H100")
    t = template()
    assert seeds.lookup(t, "NVIDIA H100") and seeds.lookup(t, "NVIDIA A100-SXM4-80GB") == []
    other = tune(t, evaluator(t, "NVIDIA A100-SXM4-80GB"), strategy="exhaustive", budget=3, limits=H100_SXM,
                 first=[t.defaults], seeds=seeds)
    assert BEST not in [tr.params for tr in other.trials]
    # ... and what it measured is recorded for its own device, beside the H100's
    stored = json.loads(seeds.path(t).read_text())["records"]
    assert sorted(r["device"] for r in stored) == ["NVIDIA A100-SXM4-80GB", "NVIDIA H100"]


def test_the_nearest_shape_of_the_family_seeds_a_new_shape(tmp_path):
    seeds = SeedCache(tmp_path / "seeds")
    small_best = {"BLOCK": 128, "num_warps": 2, "GRID": "oneshot"}
    first_tuning(seeds, n=4096, best=small_best)
    first_tuning(seeds, n=1 << 20, best=BEST)
    assert family(template(4096)) == family(template(8192)) == family(template(1 << 20))
    assert seeds.lookup(template(8192), "NVIDIA H100")[0] == small_best  # 8192 is nearer 4096
    assert seeds.lookup(template(1 << 19), "NVIDIA H100")[0] == BEST
    other = template(source=SOURCE.replace('"num_warps": [1, 2, 4, 8]', '"num_warps": [1, 2, 4]'))
    assert family(other) != family(template()) and seeds.lookup(other, "NVIDIA H100") == []
    assert shape_distance({"N": 4096}, {"M": 4096}) == float("inf")


def test_a_corrupted_seeds_file_is_ignored_with_a_warning_and_replaced(tmp_path, caplog):
    seeds = SeedCache(tmp_path / "seeds")
    t = template()
    seeds.folder.mkdir(parents=True)
    for junk in ("{not json", json.dumps({"version": 1, "records": [{"device": 3}]}), "\udcff"):
        seeds.path(t).write_text(junk, errors="surrogateescape")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kernelwright.tune"):
            assert seeds.lookup(t, "NVIDIA H100") == []
            result = tune(t, evaluator(t), strategy="exhaustive", budget=3, limits=H100_SXM, seeds=seeds)
        assert len(result.trials) == 3
        assert any("ignoring the unreadable tuning seeds" in r.message for r in caplog.records)
        assert json.loads(seeds.path(t).read_text())["records"]  # the next write replaced it


def test_a_configuration_that_failed_since_leaves_the_seeds(tmp_path):
    seeds = SeedCache(tmp_path / "seeds")
    first_tuning(seeds)
    t = template()
    seeds.record(t, "NVIDIA H100", [Measurement(dict(BEST), "fail", error="wrong output")])
    assert seeds.lookup(t, "NVIDIA H100", limit=1)[0] != BEST


def test_a_kernel_tuned_in_turn_takes_the_seeds_values_of_its_own_parameters(tmp_path):
    seeds = SeedCache(tmp_path / "seeds")
    two = SOURCE.replace('"sizes": {"N": 4096},', '"sizes": {"N": 4096}, "meta": {"groups": ["BLOCK", "num_"]},')
    t = parse_template(two.replace('"GRID": {"choice": ["oneshot", "persistent"]}', '"GRID": ["oneshot"]'), name="demo")
    best = {"BLOCK": 1024, "num_warps": 8, "GRID": "oneshot"}
    tune(t, evaluator(t, best=best), strategy="exhaustive", limits=H100_SXM, seeds=seeds)
    assert family(t.restrict(fixed={"num_warps": 4})) == family(t)
    result = tune_groupwise(t, evaluator(t, best=best), strategy="exhaustive", budget=8, limits=H100_SXM,
                            first=[t.defaults], seeds=seeds)
    assert result.trials[1].params == {**t.defaults, "BLOCK": 1024}  # BLOCK's kernel starts at the seed's BLOCK
    assert result.best.params == best


def test_the_autopilot_seeds_only_with_the_users_cache():
    assert isinstance(open_seeds("default", "default"), SeedCache)
    assert open_seeds("default", None) is None and open_seeds("default", object()) is None
    assert open_seeds(None, "default") is None


def test_a_fully_judged_winner_outranks_faster_sweep_times(tmp_path):
    """A sweep's times (one repeat) and a full judgement's do not compare: the configuration judged
    in full (the tuning's best) seeds first, the swept ones after it by their sweep times."""
    seeds = SeedCache(tmp_path / "seeds")
    t = template()
    winner, rival = dict(BEST), {"BLOCK": 512, "num_warps": 4, "GRID": "oneshot"}
    seeds.record(t, "NVIDIA H100", [Measurement(dict(rival), "swept", time_ms=0.8),
                                    Measurement(dict(winner), "pass", time_ms=1.1)])
    assert seeds.lookup(t, "NVIDIA H100") == [winner, rival]
    seeds.record(t, "NVIDIA H100", [Measurement(dict(winner), "swept", time_ms=0.5)])  # a later sweep time
    assert seeds.lookup(t, "NVIDIA H100")[0] == winner
    stored = json.loads(seeds.path(t).read_text())["records"][0]["configs"]
    assert stored[0]["judged"] and stored[0]["time_ms"] == 1.1  # the full time is kept
