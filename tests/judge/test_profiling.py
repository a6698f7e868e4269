"""The judge's profile stage helper (judge/profiling.py): what it hands the profiler, and that a
profile which cannot be made leaves a record saying why instead of an exception."""
from __future__ import annotations

from pathlib import Path

from kernelwright.judge import JudgeConfig, profiling
from kernelwright.judge.verdict import Verdict

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

        calls.append({"candidate": str(candidate), "settings": settings, "shares": kernel_shares})
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
