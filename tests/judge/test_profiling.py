"""The judge's profile stage helper (judge/profiling.py): what it hands the profiler, and that a
profile which cannot be made leaves a record saying why instead of an exception."""
from __future__ import annotations

from pathlib import Path

from kernelwright.judge import JudgeConfig, profiling
from kernelwright.judge.verdict import Verdict
from tests.tiny_problem import TINY

SHARES = {"available": True, "kernels": [{"name": "add_kernel", "share": 1.0, "us_per_call": 5.0,
                                          "launches_per_call": 1.0}]}


def _verdict() -> Verdict:
    verdict = Verdict(problem="p", candidate="c", status="pass", stage="profile")
    verdict.kernels = dict(SHARES)
    return verdict


def test_the_verdicts_kernel_shares_and_the_judges_cache_reach_the_profiler(tmp_path, monkeypatch):
    calls = []

    def fake_profile(problem, candidate, settings, executor=None, kernel_shares=None):
        from kernelwright.profile import ProfileReport

        calls.append({"candidate": str(candidate), "settings": settings, "shares": kernel_shares,
                      "shim": Path(settings.python).read_text()})
        return ProfileReport(str(problem), str(candidate), status="ok", device="NVIDIA H100 80GB HBM3")

    monkeypatch.setattr("kernelwright.profile.profile_candidate", fake_profile)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.py").write_text("class Model:\n    pass\n")
    config = JudgeConfig(cache_dir=str(tmp_path / "cache"), timeout_s=100)
    record = profiling.profile_report("p.py", "c.py", _verdict(), config, "cuda:0")
    assert record["status"] == "ok" and calls[0]["shares"] == SHARES and calls[0]["candidate"] == "c.py"
    assert calls[0]["settings"].cache_dir == str(tmp_path / "cache" / "profile") and calls[0]["settings"].budget_s == 90
    # a report with counters is compared with the reference's, profiled as a candidate whose ModelNew is Model
    assert calls[1]["candidate"].endswith("p__reference.py") and calls[1]["shares"] is None
    shim = Path(calls[1]["settings"].python)  # the build-cache shim, made in the reference's own fresh folder
    assert shim.name == "kw_python" and shim.parent == Path(calls[1]["candidate"]).parent
    cache = repr(str((tmp_path / "cache").resolve()))  # the shims load builds from the judge's cache, not $HOME's
    assert all(cache in c["shim"] for c in calls)
    assert record["reference"]["origin"].startswith("collected now")
    again = profiling.profile_report("p.py", "c.py", _verdict(), config, "cuda:0")
    assert len(calls) == 3 and again["reference"]["origin"].startswith("cached")  # the next candidate reuses it


def test_an_untimed_evaluation_profiles_from_the_shares_it_was_given(tmp_path, monkeypatch):
    seen = {}

    def fake_profile(problem, candidate, settings, executor=None, kernel_shares=None):
        from kernelwright.profile import ProfileReport

        seen["shares"] = kernel_shares
        return ProfileReport(str(problem), str(candidate), status="ok")

    monkeypatch.setattr("kernelwright.profile.profile_candidate", fake_profile)
    monkeypatch.chdir(tmp_path)
    untimed = Verdict(problem="p", candidate="c", status="pass", stage="profile")  # time=False: no split
    profiling.profile_report("p.py", "c.py", untimed, JudgeConfig(time=False, profile_kernels=SHARES), "cuda:0")
    assert seen["shares"] == SHARES
    profiling.profile_report("p.py", "c.py", untimed, JudgeConfig(time=False), "cuda:0")
    assert seen["shares"] is None  # nothing given: the profile's own timeline
    other = {"available": True, "kernels": []}
    profiling.profile_report("p.py", "c.py", _verdict(), JudgeConfig(profile_kernels=other), "cuda:0")
    assert seen["shares"] == SHARES  # a timed verdict's own split comes first


def test_a_profile_that_raises_becomes_a_record_that_says_why(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr("kernelwright.profile.profile_candidate", broken)
    monkeypatch.chdir(tmp_path)
    record = profiling.profile_report("p.py", "c.py", _verdict(), JudgeConfig(), "cuda:0")
    assert record["status"] == "failed" and "OSError: no space left on device" in record["notes"][0]
    assert record["findings"][0]["kind"] == "notice"


_CPP_RELU = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = """
#include <torch/extension.h>
torch::Tensor relu_cpu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  auto xp = x.data_ptr<float>(); auto yp = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] > 0 ? xp[i] : 0.f;
  return y;
}
"""
ext = load_inline("kw_profile_relu_cpu", cpp_sources=SOURCE, functions=["relu_cpu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cpu(x.contiguous())
'''


def test_a_judged_extension_is_profiled_with_the_build_the_runner_published(tmp_path):
    """The profile's own processes (sandboxed, no $KW_CACHE_DIR, a scratch HOME) load the extension
    the judge built for the verdict; before, they looked in another cache, asked to build and were
    refused ("this process may not ask 'build'"): every CUDA candidate's profile failed on the H200."""
    from kernelwright.judge.api import judge
    from kernelwright.judge.request import SourceText

    config = JudgeConfig(device="cpu", trials=1, time=False, baselines=(), profile=True, cache_dir=str(tmp_path))
    verdict = judge(SourceText(TINY.format(scale=1), "relu"), SourceText(_CPP_RELU, "cpp_relu"), config)
    assert verdict.status == "pass", verdict.error
    notices = [f["text"] for f in verdict.profile["findings"] if f.get("kind") == "notice"]
    assert verdict.profile["status"] == "partial" and verdict.profile["timeline"], notices  # partial: no GPU here
    assert not [n for n in notices if "could not be profiled" in n], notices
