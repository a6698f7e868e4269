"""Replaying strategies against a recorded sweep (the offline half of the tuning benchmark)."""
import json

from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.prune import prune_space
from kernelwright.tune.replay import load_sweep, markdown_table, replay_once, strategy_shares
from kernelwright.tune.template import config_key, parse_template

from .test_strategies import SOURCE, objective


def write_sweep(path, keep=None):
    """A sweep file as bench/tune_gpu.py writes it, with times from the synthetic objective."""
    template = parse_template(SOURCE)
    table = {}
    for c in prune_space(template, H100_SXM).feasible:
        if keep and not keep(c):
            continue
        value = objective(c)
        table[config_key(c)] = {"params": c, "status": "pass" if value else "fail", "time_ms": value}
    path.write_text(json.dumps({"name": "synthetic", "template_source": SOURCE, "domains": {"Z": ["a", "b"]},
                                "table": table, "truncated": keep is not None}))
    return path


def test_full_budget_reaches_the_optimum(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path / "s.json"))
    assert sweep.optimum_ms == 1.0
    n = len(sweep.configs)
    assert replay_once(sweep, "exhaustive", n, 0) == 1.0
    assert replay_once(sweep, "random", n, 7) == 1.0
    assert 0 < replay_once(sweep, "random", 2, 7) <= 1.0


def test_shares_table(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path / "s.json"))
    stats = strategy_shares(sweep, ["exhaustive", "random", "tpe"], fractions=(0.1, 0.5), seeds=4)
    assert {(s.strategy, s.fraction) for s in stats} == {(a, f) for a in ("exhaustive", "random", "tpe")
                                                         for f in (0.1, 0.5)}
    for s in stats:
        assert 0 < s.minimum <= s.mean <= 1.0 and 0 <= s.reached_97 <= 1
        assert s.seeds == (1 if s.strategy == "exhaustive" else 4)
    by = {(s.strategy, s.fraction): s for s in stats}
    assert by[("random", 0.5)].mean >= by[("random", 0.1)].mean  # more evaluations never hurt on average
    text = markdown_table("synthetic", stats, len(sweep.configs))
    assert "| tpe |" in text and "10%" in text and "50%" in text


def test_truncated_sweep_replays_only_what_was_measured(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path / "s.json", keep=lambda c: c["X"] <= 8))
    assert sweep.truncated and all(c["X"] <= 8 for c in sweep.configs)
    assert replay_once(sweep, "tpe", len(sweep.configs), 0) == 1.0  # the optimum of the sample
