"""The judge's one-pass comparison kernel (judge/gpucompare.py) against the torch path of
`check._error_stats`: the same statistics, NaN/Inf rules included. On the CPU the kernel runs
under Triton's interpreter (`_launch` directly: `applies` sends CPU outputs to the torch path); on a
GPU, through `check.compare` itself."""
from __future__ import annotations

import dataclasses
from unittest import mock

import pytest
import torch

from kernelwright.judge import JudgeConfig, check, gpucompare

FIELDS = ("max_abs", "max_rel", "max_ratio", "sq_diff", "sq_ref", "violations", "nan_mismatch", "finite")


def pair(n: int, dtype=torch.float32, device="cpu", out_dtype=None) -> tuple[torch.Tensor, torch.Tensor]:
    """A reference and an output close to it, with specials: a NaN where the reference is finite,
    a matching Inf, a NaN reference under a finite output, a far-off element."""
    g = torch.Generator().manual_seed(n)
    ref = torch.randn(n, generator=g, dtype=torch.float64)
    out = ref + 3e-5 * torch.randn(n, generator=g, dtype=torch.float64)
    out[5], ref[7], out[7], ref[9], out[100] = float("nan"), float("inf"), float("inf"), float("nan"), 4.0
    return out.to(out_dtype or dtype).to(device), ref.to(dtype).to(device)


def torch_path(out, ref, atol, rtol) -> dict:
    stats = check._Stats(numel=ref.numel())
    for o, r in check._chunks(out, ref):
        check._accumulate(stats, o, r, atol, rtol)
    return {f: getattr(stats, f) for f in FIELDS}


def kernel_path(out, ref, atol, rtol) -> dict:
    """`error_stats` itself (launch and reduction), with `applies` let through for CPU tensors."""
    with mock.patch.object(gpucompare, "applies", lambda o, r: True):
        sums = gpucompare.error_stats(out, ref, atol, rtol)
    return {f: getattr(sums, f) for f in FIELDS}


def assert_same(found: dict, expected: dict) -> None:
    for name in FIELDS:
        if isinstance(expected[name], int):
            assert found[name] == expected[name], name
        else:
            assert found[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-300), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_under_the_interpreter_the_kernel_computes_the_torch_paths_statistics(dtype):
    out, ref = pair(5000, dtype)
    found, expected = kernel_path(out, ref, 1e-2, 1e-2), torch_path(out, ref, 1e-2, 1e-2)
    assert_same(found, expected)
    assert found["nan_mismatch"] == 2 and found["finite"] == 4997 and found["violations"] >= 1


def test_under_the_interpreter_a_launch_that_did_not_run_is_an_error(monkeypatch):
    out, ref = pair(3000)

    class Skipped:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    monkeypatch.setattr(gpucompare, "_stats_kernel", Skipped())
    with pytest.raises(RuntimeError, match="did not run"):
        kernel_path(out, ref, 1e-2, 1e-2)


def test_the_kernel_reads_an_output_more_precise_than_its_reference():
    out, ref = pair(3000, torch.float16, out_dtype=torch.float32)
    assert_same(kernel_path(out, ref, 1e-2, 1e-2), torch_path(out, ref, 1e-2, 1e-2))


def test_the_tolerances_reach_the_kernel_in_float64():
    """An error exactly at atol: in float32 the bound 1e-4 rounds up and the element would pass."""
    ref = torch.zeros(64, dtype=torch.float64)
    out = ref.clone()
    out[3] = 1e-4 * (1 + 1e-12)
    assert kernel_path(out, ref, 1e-4, 0.0)["violations"] == torch_path(out, ref, 1e-4, 0.0)["violations"] == 1


def test_cpu_outputs_and_integer_outputs_go_to_the_torch_path():
    out, ref = pair(200)
    assert not gpucompare.applies(out, ref) and gpucompare.error_stats(out, ref, 1e-2, 1e-2) is None
    ints = torch.arange(10)
    assert not gpucompare.applies(ints, ints)
    assert gpucompare.wanted([ref], "cpu") == []  # nothing compiled for a CPU run


@pytest.fixture
def small_is_large(monkeypatch):
    """The kernel for outputs of any size (MIN_ELEMENTS keeps small ones on the torch path)."""
    monkeypatch.setattr(gpucompare, "MIN_ELEMENTS", 1)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("ref_on_host", [False, True])
def test_on_the_gpu_compare_gives_the_torch_paths_verdict_and_statistics(dtype, ref_on_host, monkeypatch,
                                                                       small_is_large):
    monkeypatch.setattr(gpucompare, "HOST_CHUNK_ELEMENTS", 1 << 20)  # several chunks from the host
    monkeypatch.setattr(gpucompare, "_WARMED", set())
    out, ref = pair(3_000_001, dtype, device="cuda")
    assert not gpucompare.applies(out, ref)  # not compiled before: the torch path
    gpucompare.warm(gpucompare.wanted([ref], "cuda"), "cuda")
    ref = ref.cpu() if ref_on_host else ref
    config = JudgeConfig()
    fast = check.compare([out], [ref], config, "cuda")
    assert gpucompare.error_stats(out, ref, 1e-2, 1e-2) is not None  # the kernel ran
    assert not gpucompare.applies(out[1:], ref[1:])  # not 16-byte aligned: the torch path
    monkeypatch.setattr(gpucompare, "applies", lambda out, ref: False)
    slow = check.compare([out], [ref], config, "cuda")
    assert dataclasses.asdict(fast).keys() == dataclasses.asdict(slow).keys()
    assert fast.ok == slow.ok and fast.nonfinite == slow.nonfinite and fast.message == slow.message
    for name in ("max_abs_err", "max_rel_err", "rel_l2_err", "atol_scale", "error_ratio"):
        assert getattr(fast, name) == pytest.approx(getattr(slow, name), rel=1e-9), name


@pytest.mark.gpu
def test_on_the_gpu_a_launch_that_did_not_run_is_an_error_not_a_pass(monkeypatch, small_is_large):
    out, ref = pair(10_000, device="cuda")
    gpucompare.warm([torch.float32], "cuda")

    class Skipped:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    monkeypatch.setattr(gpucompare, "_stats_kernel", Skipped())
    with pytest.raises(RuntimeError, match="did not run"):
        gpucompare.error_stats(out, ref, 1e-2, 1e-2)
    assert not check.compare([out], [ref], JudgeConfig(), "cuda").ok  # the torch path judged it instead


@pytest.mark.gpu
def test_on_the_gpu_the_second_evaluation_loads_the_kernel_the_first_one_compiled(tmp_path, kernelbench):
    """Through the real worker and supervisor: the first evaluation compiles the kernel before the
    seal and publishes it; the next one seeds its own Triton cache from the shared folder."""
    from pathlib import Path

    from kernelwright.judge import judge, judgekernels

    root = Path(__file__).resolve().parents[2]
    config = JudgeConfig(trials=2, baselines=(), time=False, overrides={"batch_size": 128},
                         cache_dir=str(tmp_path))  # 50M elements: above MIN_ELEMENTS
    seconds = []
    for _ in range(2):
        verdict = judge(kernelbench / "level1" / "19_ReLU.py", root / "bench" / "candidates" / "19_ReLU__triton.py",
                        config)
        assert verdict.status == "pass", verdict.error
        assert not [f for f in verdict.flags if "judge kernels" in f.message], verdict.flags
        seconds.append(verdict.stage_seconds["judge_kernels"])
        assert judgekernels.entries(judgekernels.shared_folder(tmp_path))
    assert seconds[1] < seconds[0], seconds
