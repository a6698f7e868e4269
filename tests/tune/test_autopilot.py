"""The no-LLM path end to end: match the library, judge the default instance, tune, report.

Real judge runs in fresh processes under the Triton interpreter (TRITON_INTERPRET=1 on a machine
without a GPU), on KernelBench problems shrunk to a few hundred elements.
"""
import time

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.tune.autopilot import optimize_without_llm
from kernelwright.tune.cache import TuneCache

FAST = dict(trials=2, baselines=(), warmup_ms=1.0, rep_ms=5.0, min_reps=2, max_reps=3)


@pytest.fixture
def cache(tmp_path):
    return TuneCache(tmp_path / "cache.sqlite")


def test_elementwise_problem_is_tuned_and_cached(kernelbench, tmp_path, cache):
    steps = []
    seen_at_callback = []

    def on_result(step):
        steps.append(step)
        seen_at_callback.append(len(steps))

    problem = kernelbench / "level1/19_ReLU.py"
    result = optimize_without_llm(problem, overrides={"batch_size": 4, "dim": 64}, strategy="random",
                                  budget_evals=2, judge_config=JudgeConfig(**FAST), on_result=on_result,
                                  cache=cache, workers=2, workdir=tmp_path / "run")
    assert result.matched, result.message
    assert result.template_name == "pointwise"
    assert len(steps) == 2 and seen_at_callback == [1, 2]
    assert steps[0].params == result.template.defaults  # the default instance is judged first
    assert all(s.verdict is not None and s.verdict.passed for s in steps)
    assert result.best_verdict.passed and result.default_verdict.passed
    assert result.best_source and "KW_PARAMS = {" in result.best_source
    assert "CPU wall time" in result.message
    assert (tmp_path / "run" / "19_ReLU.template.py").is_file()
    assert result.exit_code == 0 and "best parameters" in result.summary() and "pointwise" in result.summary()

    start = time.monotonic()
    again = optimize_without_llm(problem, overrides={"batch_size": 4, "dim": 64}, strategy="random",
                                 budget_evals=2, judge_config=JudgeConfig(**FAST), cache=cache,
                                 workdir=tmp_path / "run2")
    assert time.monotonic() - start < 5  # nothing judged again
    assert all(t.measurement.cached for t in again.tune.trials)
    assert again.best_params == result.best_params


def test_softmax_problem_passes_the_judge(kernelbench, tmp_path, cache):
    result = optimize_without_llm(kernelbench / "level1/23_Softmax.py", overrides={"batch_size": 4, "dim": 80},
                                  strategy="exhaustive", budget_evals=2, judge_config=JudgeConfig(**FAST),
                                  cache=cache, workers=2, workdir=tmp_path)
    assert result.matched and result.template_name == "rowwise"
    assert len(result.tried) == 2
    assert result.best_verdict is not None and result.best_verdict.passed, result.message
    assert result.best_verdict.flags == [] or all(f.severity != "reject" for f in result.best_verdict.flags)


def test_unmatched_problem_says_so(kernelbench, tmp_path):
    result = optimize_without_llm(kernelbench / "level1/89_cumsum.py", judge_config=JudgeConfig(**FAST),
                                  workdir=tmp_path)
    assert not result.matched
    assert "cumsum" in result.message and "--llm" in result.message
    assert "(the forward does: reduction)" in result.message  # the op kinds hint (a NameError once hid it)
    assert result.best_source is None and result.tried == [] and result.exit_code == 1


def test_missing_problem_file_is_reported(tmp_path):
    result = optimize_without_llm(tmp_path / "nope.py", workdir=tmp_path)
    assert not result.matched and "cannot load" in result.message


def test_with_sweeps_two_evaluations_measure_a_whole_batch_and_judge_its_winner(kernelbench, tmp_path, cache):
    result = optimize_without_llm(kernelbench / "level1/19_ReLU.py", overrides={"batch_size": 4, "dim": 64},
                                  strategy="random", budget_evals=2, sweep=6, judge_config=JudgeConfig(**FAST),
                                  cache=cache, workdir=tmp_path)
    assert result.matched, result.message
    cost = result.tune.cost
    assert cost.judge_runs == 2 and cost.evaluations == len(result.tune.trials) == 6
    best = result.tune.best.measurement
    assert best.status == "pass" and len(best.verdict["trials"]) == FAST["trials"]  # judged in full
    assert [t.measurement.status for t in result.tune.trials].count("pass") == 1
    assert result.best_verdict.passed and result.best_params == best.params
