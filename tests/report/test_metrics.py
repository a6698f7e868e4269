"""The leaderboard numbers: fast_p over all problems, geomeans with a failed problem at 1.0x (and
over correct problems only), untimed baselines left out and said, median % of floor, spend."""
from __future__ import annotations

import math

import pytest

from kernelwright.report.metrics import Score, fast_p, geomean, summarize


def ok(eager: float | None, compiled: float | None = None, floor: float | None = None, **spend) -> Score:
    return Score(True, {"eager": eager, "compile_default": compiled}, floor, **spend)


FAILED = Score(False, {}, None, calls=4, tokens=1000, usd=0.5, judge_s=30.0)


def test_fast_p_counts_correct_problems_strictly_faster_over_all_problems():
    scores = [ok(2.0), ok(1.0), ok(1.5), ok(0.5), FAILED]
    assert fast_p(scores, 0.0) == pytest.approx(4 / 5)  # every timed correct one; the failed one is not
    assert fast_p(scores, 1.0) == pytest.approx(2 / 5)  # 1.0x exactly is not faster
    assert fast_p(scores, 1.5) == pytest.approx(1 / 5)
    assert fast_p(scores, 2.0) == 0.0
    assert fast_p([], 1.0) is None


def test_geomeans_count_a_failed_problem_as_the_reference_kept():
    summary = summarize([ok(2.0, 1.0), ok(8.0, 4.0), FAILED])
    eager = summary.by_baseline["eager"]
    assert eager.geomean_all == pytest.approx((2.0 * 8.0 * 1.0) ** (1 / 3))
    assert eager.geomean_correct == pytest.approx(4.0)
    assert eager.mean_all == pytest.approx((2.0 + 8.0 + 1.0) / 3)
    assert eager.mean_correct == pytest.approx(5.0)
    compiled = summary.by_baseline["compile_default"]
    assert compiled.geomean_all == pytest.approx((1.0 * 4.0 * 1.0) ** (1 / 3))
    assert (summary.n, summary.correct, summary.correct_rate) == (3, 2, pytest.approx(2 / 3))


def test_a_correct_but_slower_candidate_counts_at_its_measured_speedup():
    eager = summarize([ok(0.25), FAILED]).by_baseline["eager"]
    assert eager.geomean_all == pytest.approx(0.5)  # sqrt(0.25 * 1.0): not lifted to 1.0x
    assert eager.fast["0"] == pytest.approx(0.5) and eager.fast["1"] == 0.0


def test_untimed_baselines_are_left_out_and_counted():
    summary = summarize([ok(2.0, 3.0), ok(4.0, None), FAILED])
    compiled = summary.by_baseline["compile_default"]
    assert compiled.untimed == 1
    assert compiled.geomean_correct == pytest.approx(3.0)
    assert compiled.geomean_all == pytest.approx(math.sqrt(3.0 * 1.0))
    assert compiled.fast["0"] == pytest.approx(1 / 3)  # the untimed one is not fast against it
    nothing_timed = summarize([ok(2.0, None), FAILED]).by_baseline["compile_default"]
    assert nothing_timed.geomean_all is None and nothing_timed.mean_all is None  # not "1.0x" from the failure
    assert set(nothing_timed.fast.values()) == {None}  # not "fast_0 0%": never measured (a CPU report)
    only_failures = summarize([FAILED]).by_baseline["compile_default"]
    assert only_failures.fast["0"] == 0.0  # nothing correct: 0% fast is a result


def test_floor_median_and_spend_per_problem():
    summary = summarize([ok(2.0, floor=40.0, calls=10, tokens=5000, usd=1.0, judge_s=60.0),
                         ok(3.0, floor=80.0, calls=6, tokens=3000, usd=0.5, judge_s=120.0),
                         ok(1.2, floor=None), FAILED])
    assert summary.median_pct_of_floor == pytest.approx(60.0) and summary.floors == 2
    assert (summary.calls, summary.tokens) == (20, 9000)
    assert summary.usd == pytest.approx(2.0) and summary.judge_minutes == pytest.approx(3.5)
    assert summary.per_problem(summary.calls) == pytest.approx(5.0)
    empty = summarize([])
    assert empty.correct_rate is None and empty.by_baseline["eager"].geomean_all is None


def test_geomean_ignores_missing_values():
    assert geomean([2.0, None, 8.0]) == pytest.approx(4.0)
    assert geomean([]) is None
