"""The batch profile pass: who is profiled, in which order, within which budget."""
from __future__ import annotations

from kernelwright.judge import JudgeConfig
from kernelwright.judge.api import SourceText
from kernelwright.judge.batch import read_verdicts, verdict_path, write_request
from kernelwright.judge.batch_profile import PROFILE_OVERRIDES, profile_pass
from kernelwright.judge.verdict import Verdict

PROBLEM = SourceText("import torch\n", "p")  # never run: the pool below is a stand-in


class RecordingPool:
    """Stands in for JudgePool: records the configs it was asked to judge with, returns a profile."""

    def __init__(self):
        self.jobs = []

    def judge_many(self, jobs):
        self.jobs += jobs
        return [Verdict(problem="p", candidate=job.name, status="pass", stage="done",
                        profile={"status": "ok", "bottleneck": "memory", "findings": []},
                        stage_seconds={"profile": 12.0}) for job in jobs]


def write(folder, name, passed: bool, speedup: float, profile: bool):
    request = write_request(folder, name, PROBLEM, "code", JudgeConfig(trials=5), profile=profile)
    verdict = Verdict(problem="p", candidate=name, status="pass" if passed else "fail", stage="done",
                      speedup={"eager": speedup})
    verdict_path(request).write_text(verdict.to_json())


def test_passing_candidates_that_asked_are_profiled_best_first_round_robin(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "a1", True, 1.2, True)
    write(a, "a2", True, 2.5, True)
    write(a, "a3", False, 0.0, True)  # failed: nothing to profile
    write(a, "a4", True, 9.0, False)  # did not ask
    write(b, "b1", True, 0.7, True)
    pool = RecordingPool()
    done = profile_pass([a, b], pool, None, budget_s=600, log=None)
    assert done == ["a2", "b1", "a1"]  # each folder's best first, then the next ones
    assert all(job.config.profile and job.config.trials == 1 and not job.config.time for job in pool.jobs)
    assert read_verdicts(a)["a2"].profile["bottleneck"] == "memory" and read_verdicts(a)["a4"].profile is None
    assert read_verdicts(a)["a2"].stage_seconds["profile"] == 12.0
    assert profile_pass([a, b], RecordingPool(), None, budget_s=600) == []  # done once


def test_no_budget_no_profiles(tmp_path):
    write(tmp_path, "c1", True, 1.5, True)
    logged = []
    assert profile_pass([tmp_path], RecordingPool(), None, budget_s=10, log=logged.append) == []
    assert "not profiled" in logged[0] and set(PROFILE_OVERRIDES) >= {"trials", "time", "profile"}
