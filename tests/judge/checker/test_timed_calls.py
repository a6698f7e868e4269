"""The timed calls' counts: the timer's, bounded by the wall time a call costs here."""
from dataclasses import replace

from kernelwright.judge import JudgeConfig
from kernelwright.judge import timing
from kernelwright.judge.checker.timed_calls import call_counts


def test_a_short_kernel_whose_calls_cost_milliseconds_gets_fewer_calls_never_below_min_reps():
    config = JudgeConfig()
    warmups, reps = call_counts(0.4, 6.0, config)  # 0.4 ms of kernels, 6 ms a round trip
    assert timing.rep_count(0.4, config) == 500  # what rep_ms alone asks for
    assert reps == 67 and warmups == 7  # 400 ms of wall for the timed calls, 40 for the warm-up
    assert call_counts(0.01, 50.0, config)[1] == config.min_reps


def test_a_long_kernel_keeps_the_timers_counts():
    config = JudgeConfig()
    assert call_counts(20.0, 21.0, config) == (timing.warmup_count(20.0, config), timing.rep_count(20.0, config))


def test_no_wall_bound_gives_the_timers_counts():
    config = replace(JudgeConfig(), timed_wall_ms=0)
    assert call_counts(0.4, 6.0, config) == (timing.warmup_count(0.4, config), timing.rep_count(0.4, config))
