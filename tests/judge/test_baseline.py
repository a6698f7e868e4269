"""baseline.py: baselines timed in their own process, cached by what they depend on."""
from __future__ import annotations

import dataclasses
import shutil
import textwrap

import pytest

from kernelwright.judge import baseline as kwbase
from kernelwright.judge import timed
from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.verdict import Baselines, TimingStats

# hand-written tiny problem in KernelBench format
TINY = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return torch.relu(x) * self.scale

    batch = 8
    dim = 32

    def get_inputs():
        return [torch.randn(batch, dim)]

    def get_init_inputs():
        return [2.0]
    """)

BROKEN = TINY.replace("return torch.relu(x) * self.scale", "raise ValueError('forward is broken on purpose')")


@pytest.fixture
def config(tmp_path):
    return JudgeConfig(warmup_ms=1.0, rep_ms=5.0, min_reps=3, max_reps=20, cache_dir=str(tmp_path / "cache"),
                       timeout_s=120.0)


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny_relu.py"
    path.write_text(TINY)
    return path


def test_cache_key_follows_content_sizes_and_timing(tiny, tmp_path, config):
    key = kwbase.cache_key(tiny, {}, config, "cpu", "eager")
    moved = tmp_path / "elsewhere.py"
    shutil.copy(tiny, moved)
    assert kwbase.cache_key(moved, {}, config, "cpu", "eager") == key  # by content, not path
    different = [
        kwbase.cache_key(tiny, {"dim": 16}, config, "cpu", "eager"),
        kwbase.cache_key(tiny, {}, dataclasses.replace(config, rep_ms=50.0), "cpu", "eager"),
        kwbase.cache_key(tiny, {}, dataclasses.replace(config, allow_tf32=True), "cpu", "eager"),
        kwbase.cache_key(tiny, {}, config, "cpu", "compile_default"),
    ]
    assert all(d != key for d in different)
    # settings that do not change a baseline's time do not change its key
    assert kwbase.cache_key(tiny, {}, dataclasses.replace(config, trials=9), "cpu", "eager") == key


def test_cpu_runs_eager_only_unless_asked(config):
    kinds, skipped = kwbase.wanted_kinds(config, "cpu", allow_cpu_compile=False)
    assert kinds == ["eager"] and "compile_default" in skipped
    kinds, _ = kwbase.wanted_kinds(config, "cpu", allow_cpu_compile=True)
    assert kinds == ["eager", "compile_default"]
    kinds, skipped = kwbase.wanted_kinds(dataclasses.replace(config, baselines=("eager", "bogus")), "cuda", False)
    assert kinds == ["eager"] and "unknown baseline" in skipped["bogus"]


def test_eager_baseline_runs_in_a_subprocess_and_is_cached(tiny, config, monkeypatch):
    first = kwbase.get_baselines(tiny, {}, config, "cpu")
    assert first.eager is not None and first.eager.method == "wall_cpu" and first.eager.median_ms > 0
    assert not first.cached and first.compile_default is None

    def no_subprocess(*args, **kwargs):
        raise AssertionError("a cached baseline must not start a process")

    monkeypatch.setattr(kwbase, "_run_subprocess", no_subprocess)
    second = kwbase.get_baselines(tiny, {}, config, "cpu")
    assert second.cached and second.eager == first.eager
    with pytest.raises(AssertionError):  # other sizes are another baseline
        kwbase.get_baselines(tiny, {"dim": 16}, config, "cpu")


def test_overrides_reach_the_subprocess(tiny, config):
    """A much larger size must take longer: the subprocess really loaded the override."""
    small = kwbase.get_baselines(tiny, {"dim": 8}, config, "cpu").eager
    large = kwbase.get_baselines(tiny, {"dim": 262144, "batch": 16}, config, "cpu").eager
    assert large.median_ms > small.median_ms


def test_a_failing_reference_is_reported_not_raised(tmp_path, config):
    path = tmp_path / "broken.py"
    path.write_text(BROKEN)
    result = kwbase.get_baselines(path, {}, config, "cpu")
    assert result.eager is None
    assert "forward is broken on purpose" in result.errors["eager"]
    assert "skipped on CPU" in result.errors["compile_default"]


def test_speedups():
    def stats(ms):
        return TimingStats(ms, 0.0, ms, ms, ms, 1, "cuda_events")

    baselines = Baselines(eager=stats(2.0), compile_default=stats(1.0))
    assert kwbase.speedups(stats(0.5), baselines) == {"eager": 4.0, "compile_default": 2.0}
    assert kwbase.speedups(stats(0.5), None) == {}


def test_kernelbench_problem_with_small_overrides(kernelbench, config):
    problem = kernelbench / "level1" / "19_ReLU.py"
    result = kwbase.get_baselines(problem, {"batch_size": 4, "dim": 1024}, config, "cpu")
    assert result.eager is not None and result.eager.n >= config.min_reps


# ---------------------------------------------------------------- the repeat rule (noisy baselines)


def timing(median: float, iqr: float) -> TimingStats:
    return TimingStats(median, iqr, median, median, median, 20, "wall_cpu")


def run_rule(medians_iqrs):
    """steady_measure over a scripted sequence of repeats; returns (result, repeats taken, steady)."""
    script = iter([timing(m, i) for m, i in medians_iqrs])
    pauses = []
    picked, repeats, steady = timed.steady_measure(lambda: next(script), sleep=pauses.append)
    return picked, repeats, steady, pauses


def test_two_tight_agreeing_repeats_are_enough():
    picked, repeats, steady, pauses = run_rule([(1.00, 0.05), (1.05, 0.04)])
    assert steady and len(repeats) == 2 and picked.median_ms == 1.00 and not pauses


def test_the_issue_case_a_wide_first_repeat_is_measured_again():
    # 7.95 ms with an IQR of 7.79 ms (the cached baseline of the README example), then fresh ones
    picked, repeats, steady, pauses = run_rule([(7.95, 7.79), (0.080, 0.004), (0.082, 0.003)])
    assert steady and picked.median_ms == 0.080 and len(repeats) == 3 and pauses == [timed.REPEAT_PAUSE_S]
    assert repeats[0] == [7.95, 7.79, 20]


def test_tight_repeats_that_disagree_are_not_steady_until_two_agree():
    picked, _, steady, _ = run_rule([(8.0, 0.1), (0.08, 0.001), (4.0, 0.1), (0.085, 0.002)])
    assert steady and picked.median_ms == 0.08


def test_a_baseline_that_stays_noisy_is_marked_and_the_fastest_kept():
    picked, repeats, steady, pauses = run_rule([(8.0, 7.0), (0.1, 0.09), (3.0, 0.1), (0.5, 0.01)])
    assert not steady and len(repeats) == timed.MAX_REPEATS and len(pauses) == 2
    assert picked.median_ms == 0.1 and "noisy: 4 repeats never agreed" in picked.note


def scripted_subprocess(results, calls):
    def fake(problem_path, overrides, config, device, kind):
        calls.append(kind)
        stats, steady = results[min(len(calls), len(results)) - 1]
        return {"timing": dataclasses.asdict(stats), "repeats": [[stats.median_ms, stats.iqr_ms, stats.n]] * 2,
                "steady": steady}, None
    return fake


def test_force_measures_again_and_the_verdict_says_which_measurement(tiny, config, monkeypatch):
    calls = []
    monkeypatch.setattr(kwbase, "_run_subprocess", scripted_subprocess(
        [(timing(7.95, 7.79), False), (timing(0.08, 0.002), True)], calls))
    first = kwbase.get_baselines(tiny, {}, config, "cpu")
    info = first.measured["eager"]
    assert not info["steady"] and not info["from_cache"] and info["cache_file"].startswith("tiny_relu__eager__")
    assert len(info["key_sha256"]) == 64 and info["measured_at"] and "20%" in info["rule"]
    flags = kwbase.noise_flags(first)
    assert [f.code for f in flags] == ["baseline_noisy"] and flags[0].severity == "warn"
    assert "baseline --force" in flags[0].message

    cached = kwbase.get_baselines(tiny, {}, config, "cpu")
    assert calls == ["eager"] and cached.measured["eager"]["from_cache"] and cached.eager.median_ms == 7.95

    forced = kwbase.get_baselines(tiny, {}, config, "cpu", force=True)
    assert calls == ["eager", "eager"] and forced.eager.median_ms == 0.08
    assert forced.measured["eager"]["steady"] and not kwbase.noise_flags(forced)
    again = kwbase.get_baselines(tiny, {}, config, "cpu")  # the forced measurement replaced the cache
    assert again.eager.median_ms == 0.08 and again.measured["eager"]["from_cache"]


def test_a_baseline_cached_under_an_older_rule_is_measured_again(tiny, config, monkeypatch):
    key = kwbase.cache_key(tiny, {}, config, "cpu", "eager")
    old_key = {k: v for k, v in key.items() if k != "protocol"}  # what kernelwright 0.1.0 wrote
    old_path = kwbase.cache_file(tiny, old_key, config)
    kwbase._write_cached(old_path, old_key, {"timing": dataclasses.asdict(timing(7.95, 7.79))})
    calls = []
    monkeypatch.setattr(kwbase, "_run_subprocess", scripted_subprocess([(timing(0.08, 0.002), True)], calls))
    assert kwbase.get_baselines(tiny, {}, config, "cpu").eager.median_ms == 0.08 and calls == ["eager"]


def test_the_real_subprocess_records_its_repeats(tiny, config):
    result = kwbase.get_baselines(tiny, {}, config, "cpu")
    info = result.measured["eager"]
    medians = [r[0] for r in info["repeats"]]
    assert 2 <= len(medians) <= timed.MAX_REPEATS
    assert result.eager.median_ms in medians  # the baseline is one of the repeats, as recorded
    if info["steady"]:  # and it has a partner within the agreement margin
        others = [m for m in medians if m != result.eager.median_ms] or [result.eager.median_ms]
        assert min(abs(m - result.eager.median_ms) for m in others) <= timed.REPEAT_AGREEMENT * result.eager.median_ms
    else:
        assert result.eager.median_ms == min(medians)


@pytest.mark.gpu
def test_gpu_baselines_are_steady_and_say_so(kernelbench, tmp_path):
    """On a quiet GPU the eager and torch.compile baselines of a KernelBench problem are steady (two
    repeats agree), and the record says which measurement a speedup will use."""
    gpu_config = JudgeConfig(cache_dir=str(tmp_path / "cache"), timeout_s=600.0)
    problem = kernelbench / "level1" / "19_ReLU.py"
    result = kwbase.get_baselines(problem, {"batch_size": 512}, gpu_config, "cuda", force=True)
    assert not result.errors, result.errors
    for kind in ("eager", "compile_default"):
        info = result.measured[kind]
        assert info["steady"] and 2 <= len(info["repeats"]) <= timed.MAX_REPEATS, info
        assert len(info["key_sha256"]) == 64 and not info["from_cache"]
        assert getattr(result, kind).method in ("cuda_events", "cuda_graph")


def test_the_eager_references_kernels_are_kept_with_its_record_and_read_back(tiny, config, monkeypatch):
    """The eager record of a GPU measurement keeps the reference's per-kernel shares; a CPU one has none."""
    cpu = kwbase.get_baselines(tiny, {}, config, "cpu")
    assert cpu.kernels == {}
    shares = {"available": True, "kernels": [{"name": "at::native::vectorized_elementwise_kernel<relu …>",
                                              "share": 1.0, "us_per_call": 3.0, "launches_per_call": 1}]}
    measured = {"timing": dataclasses.asdict(cpu.eager), "repeats": [], "steady": True, "kernels": shares}
    monkeypatch.setattr(kwbase, "_run_subprocess", lambda *args: (measured, None))
    fresh = kwbase.get_baselines(tiny, {"dim": 16}, config, "cpu")  # other sizes: measured (by the stand-in)
    assert fresh.kernels == shares
    monkeypatch.setattr(kwbase, "_run_subprocess", lambda *args: (_ for _ in ()).throw(AssertionError("cached")))
    assert kwbase.get_baselines(tiny, {"dim": 16}, config, "cpu").kernels == shares  # from the cache file


@pytest.mark.gpu
def test_a_gpu_eager_baseline_records_the_references_kernels(kernelbench, tmp_path):
    gpu_config = JudgeConfig(cache_dir=str(tmp_path / "cache"), timeout_s=600.0, baselines=("eager",))
    problem = kernelbench / "level2" / "63_Gemm_ReLU_Divide.py"
    result = kwbase.get_baselines(problem, {}, gpu_config, "cuda", force=True)
    assert result.kernels.get("available"), result.kernels
    names = [k["name"] for k in result.kernels["kernels"]]
    assert names and abs(sum(k["share"] for k in result.kernels["kernels"]) - 1.0) < 0.01, names


def test_the_kinds_of_a_problem_are_measured_at_once(tiny, config, monkeypatch):
    """Each kind its own subprocess, started together: a fake subprocess that waits for the other
    kind's to start (a barrier) would time out if they ran one after the other."""
    import threading

    started = threading.Barrier(2, timeout=20)
    threads = set()

    def together(problem_path, overrides, config, device, kind):
        threads.add(threading.get_ident())
        started.wait()  # BrokenBarrierError when the kinds run one after the other
        return {"timing": dataclasses.asdict(timing(1.0 if kind == "eager" else 0.5, 0.01)), "steady": True}, None

    monkeypatch.setattr(kwbase, "_run_subprocess", together)
    both = dataclasses.replace(config, baselines=("eager", "compile_default"))
    result = kwbase.get_baselines(tiny, {}, both, "cpu", allow_cpu_compile=True)
    assert len(threads) == 2 and not result.errors
    assert result.eager.median_ms == 1.0 and result.compile_default.median_ms == 0.5  # each kind its own result
    assert kwbase.missing_kinds(tiny, {}, both, "cpu", kwbase.cache_key(tiny, {}, both, "cpu", "eager")["device"],
                                allow_cpu_compile=True) == []
    assert kwbase.missing_kinds(tiny, {"dim": 16}, both, "cpu", "cpu:x", allow_cpu_compile=True) == [
        "eager", "compile_default"]
