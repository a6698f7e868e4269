"""baseline.py: baselines timed in their own process, cached by what they depend on."""
from __future__ import annotations

import dataclasses
import shutil
import textwrap

import pytest

from kernelwright.judge import baseline as kwbase
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
