"""What a tuning step costs, and that no configuration is measured twice: within a tuning (one
kernel after another), across runs (the cache), and across an interruption (kill -9 mid-tuning)."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.verdict import ProcessInfo, Verdict
from kernelwright.tune.cache import TuneCache
from kernelwright.tune.cost import step_cost, verdict_seconds
from kernelwright.tune.evaluate import Measurement, TableEvaluator, judge_context
from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.prune import prune_space
from kernelwright.tune.template import config_key, parse_template
from kernelwright.tune.tuner import tune, tune_groupwise

from .test_autopilot import FAST

# hand-written test template with two independently tunable kernels (prefixes g0_, g1_)
TWO_KERNELS = '''
KW_TUNE = {
    "params": {"g0_A": [1, 2, 3, 4], "g1_B": [1, 2, 3]},
    "defaults": {"g0_A": 1, "g1_B": 1},
    "meta": {"groups": ["g0_", "g1_"]},
}
KW_PARAMS = dict(KW_TUNE["defaults"])
def use():
    return KW_PARAMS
'''


def _table(template):
    return {config_key(c): {"status": "pass", "time_ms": 10.0 - c["g0_A"] - c["g1_B"]}
            for c in prune_space(template, H100_SXM).feasible}


def test_step_cost_adds_fresh_measurements_and_counts_cache_hits():
    fresh = Measurement({"B": 1}, "pass", 1.0, device_s=2.0, judge_s=10.0)
    pruned = Measurement({"B": 2}, "pruned", device_s=0.5, judge_s=4.0)
    hit = Measurement({"B": 3}, "pass", 2.0, device_s=3.0, judge_s=12.0, cached=True)
    cost = step_cost([fresh, pruned, hit], device="NVIDIA H100 80GB HBM3", wall_s=9.0, pruned_before=5)
    assert (cost.evaluations, cost.measured, cost.cached, cost.pruned_after, cost.pruned_before) == (3, 2, 1, 1, 5)
    assert cost.device_s == 2.5 and cost.judge_s == 14.0 and cost.saved_s == 12.0
    assert cost.device_label == "GPU-seconds" and "2.5 GPU-seconds" in cost.summary()
    cpu = step_cost([fresh], device="cpu", wall_s=1.0)
    assert cpu.device_label == "CPU-seconds" and cost.add(cpu).evaluations == 4


def test_verdict_seconds_split_device_stages_from_the_rest():
    verdict = Verdict("p", "c", stage_seconds={"imports": 9.0, "compile": 2.0, "check": 1.0, "time": 0.5},
                      process=ProcessInfo(wall_s=13.0))
    assert verdict_seconds(verdict) == (1.5, 13.0)


def test_tune_reports_its_cost():
    template = parse_template(TWO_KERNELS.replace('"meta": {"groups": ["g0_", "g1_"]},', ""))
    result = tune(template, TableEvaluator(_table(template)), strategy="exhaustive", budget=5)
    assert result.cost.evaluations == 5 == result.cost.measured and result.cost.device == "table"
    assert result.cost.wall_s >= 0 and result.to_dict()["cost"]["evaluations"] == 5


def test_kernels_tuned_in_turn_never_measure_a_configuration_twice():
    template = parse_template(TWO_KERNELS)
    evaluator = TableEvaluator(_table(template))
    result = tune_groupwise(template, evaluator, strategy="exhaustive", first=[template.defaults])
    keys = [config_key(t.params) for t in result.trials]
    assert len(keys) == len(set(keys)) == evaluator.lookups == 4 + 3 - 1  # the shared instance once
    assert result.best.params == {"g0_A": 4, "g1_B": 3}
    assert result.cost.evaluations == 6 and result.cost.measured == 6


def test_cache_context_follows_the_problem_text_not_only_its_name(tmp_path):
    a, b = tmp_path / "a" / "p.py", tmp_path / "b" / "p.py"
    for path, text in ((a, "x = 1\n"), (b, "x = 2\n")):
        path.parent.mkdir()
        path.write_text(text)
    config = JudgeConfig()
    assert judge_context(a, config) != judge_context(b, config)
    assert judge_context(a, config) == judge_context(a, JudgeConfig(timeout_s=999))  # not a result setting
    assert judge_context(a, config) != judge_context(a, JudgeConfig(tolerances={"float32": 1e-2}))


CHILD = textwrap.dedent("""
    import sys
    from kernelwright.judge import JudgeConfig
    from kernelwright.tune.autopilot import optimize_without_llm
    from kernelwright.tune.cache import TuneCache
    optimize_without_llm(sys.argv[1], overrides={"batch_size": 4, "dim": 64}, strategy="exhaustive",
                         budget_evals=2, judge_config=JudgeConfig(**eval(sys.argv[3])), cache=TuneCache(sys.argv[2]),
                         workers=1, workdir=sys.argv[4])
""")


def _descendants(pid: int) -> list[int]:
    """Processes started by `pid`, at any depth (the judge's workers run in sessions of their own)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


@pytest.mark.slow
@pytest.mark.timeout(900)  # three real judge runs in the interpreter, slow on a loaded machine
def test_tuning_killed_mid_way_resumes_without_measuring_again(kernelbench, tmp_path):
    from kernelwright.tune.autopilot import optimize_without_llm

    problem, cache_path = kernelbench / "level1/19_ReLU.py", tmp_path / "cache.sqlite"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(problem), str(cache_path), repr(FAST),
                              str(tmp_path / "first")], env=os.environ.copy())
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and child.poll() is None:
        if cache_path.exists() and len(TuneCache(cache_path)) >= 1:
            break
        time.sleep(0.5)
    assert child.poll() is None, "the tuning ended before it could be interrupted"
    for pid in [child.pid] + _descendants(child.pid):  # kill -9 of the whole tree: nothing cleans up
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    child.wait()
    stored = len(TuneCache(cache_path))  # 1, unless the second verdict landed in the last half second
    assert stored in (1, 2)

    steps = []
    result = optimize_without_llm(problem, overrides={"batch_size": 4, "dim": 64}, strategy="exhaustive",
                                  budget_evals=2, judge_config=JudgeConfig(**FAST), cache=TuneCache(cache_path),
                                  workers=1, workdir=tmp_path / "again", on_result=steps.append)
    assert [s.cached for s in steps] == [True] * stored + [False] * (2 - stored)  # stored: not judged again
    assert result.cost.cached == stored and result.cost.measured == 2 - stored
    assert len(TuneCache(cache_path)) == 2 and result.best_verdict.passed
    assert "from the cache" in result.message and "cost:" in result.summary()
