"""The batch profile pass: who is profiled, in which order, within which budget."""
from __future__ import annotations

import json

from kernelwright.judge import JudgeConfig
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling.batch_folder import read_verdicts, verdict_path, write_request
from kernelwright.judge.scheduling.batch_profile import PROFILE_OVERRIDES, profile_pass
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


def write(folder, name, passed: bool, speedup: float, profile: bool, kernels: dict | None = None):
    request = write_request(folder, name, PROBLEM, "code", JudgeConfig(trials=5), profile=profile)
    verdict = Verdict(problem="p", candidate=name, status="pass" if passed else "fail", stage="done",
                      speedup={"eager": speedup}, kernels=kernels)
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


SHARES = {"available": True, "kernels": [{"name": "gemm_kernel", "share": 0.9, "us_per_call": 9.0,
                                          "launches_per_call": 1.0}]}


def test_the_stored_verdicts_kernel_shares_pick_the_profile_jobs_kernels(tmp_path):
    write(tmp_path, "timed", True, 2.0, True, kernels=SHARES)
    write(tmp_path, "untimed", True, 1.0, True)  # a verdict without a split (a CPU verdict): none is made up
    pool = RecordingPool()
    assert profile_pass([tmp_path], pool, None, budget_s=600) == ["timed", "untimed"]
    given = {job.name: job.config.profile_kernels for job in pool.jobs}
    assert given == {"timed": SHARES, "untimed": None}
    assert all(not job.config.time for job in pool.jobs)  # the job does not time: the shares are the stored ones
    assert read_verdicts(tmp_path)["timed"].kernels == SHARES  # the verdict's own split is kept


def test_no_budget_no_profiles(tmp_path):
    write(tmp_path, "c1", True, 1.5, True)
    logged = []
    assert profile_pass([tmp_path], RecordingPool(), None, budget_s=10, log=logged.append) == []
    assert "not profiled" in logged[0] and set(PROFILE_OVERRIDES) >= {"trials", "time", "profile"}


class FailingPool:
    """A profile job that timed out (no report came back), then a pool that breaks."""

    def __init__(self):
        self.calls = 0

    def judge_many(self, jobs):
        self.calls += 1
        if self.calls == 1:
            return [Verdict(problem="p", candidate=jobs[0].name, status="error", stage="profile",
                            error="the evaluation did not finish within 300 s and was stopped")]
        raise RuntimeError("the pool's workers are gone")


def test_a_failed_or_timed_out_profile_leaves_the_verdict_intact_and_says_why(tmp_path):
    write(tmp_path, "t1", True, 3.0, True)
    write(tmp_path, "t2", True, 2.0, True)
    before = {name: v.to_dict() for name, v in read_verdicts(tmp_path).items()}
    logged = []
    assert profile_pass([tmp_path], FailingPool(), None, budget_s=600, log=logged.append) == ["t1", "t2"]
    after = read_verdicts(tmp_path)
    for name in ("t1", "t2"):
        kept = {k: v for k, v in after[name].to_dict().items() if k not in ("profile", "stage_seconds")}
        assert kept == {k: v for k, v in before[name].items() if k not in ("profile", "stage_seconds")}
        assert after[name].status == "pass" and after[name].speedup == before[name]["speedup"]
        assert after[name].profile["status"] == "failed" and after[name].stage_seconds["profile"] >= 0
    timed_out, broken = after["t1"].profile, after["t2"].profile
    assert "did not finish within 300 s" in timed_out["notes"][0]
    assert timed_out["findings"][0]["kind"] == "notice" and "not profiled" in timed_out["findings"][0]["text"]
    assert "RuntimeError: the pool's workers are gone" in broken["notes"][0]
    assert "t1: profiled (failed" in logged[0]
    assert profile_pass([tmp_path], RecordingPool(), None, budget_s=600) == []  # a failed profile is not redone


def test_a_request_that_cannot_be_read_again_is_a_failed_profile_not_a_crash(tmp_path):
    write(tmp_path, "r1", True, 1.0, True)
    request = tmp_path / "r1.request.json"
    data = json.loads(request.read_text())
    data["config"] = {"no_such_setting": 1}
    request.write_text(json.dumps(data))
    assert profile_pass([tmp_path], RecordingPool(), None, budget_s=600) == ["r1"]
    verdict = read_verdicts(tmp_path)["r1"]
    assert verdict.status == "pass" and "bad config" in verdict.profile["notes"][0]


class FeedPool:
    """Stands in for JudgePool.submit_job: futures the test completes, starts or leaves waiting."""

    def __init__(self, fail_submit: bool = False):
        from concurrent.futures import Future

        self.futures: dict[str, Future] = {}
        self.fail_submit = fail_submit
        self._future = Future

    def submit_job(self, job):
        if self.fail_submit:
            raise RuntimeError("the pool is closed")
        self.futures[job.name] = future = self._future()
        return future


def profiled(name: str) -> Verdict:
    return Verdict(problem="p", candidate=name, status="pass", stage="done",
                   profile={"status": "ok", "findings": []}, stage_seconds={"profile": 7.0})


def test_the_feed_starts_each_profile_as_its_verdict_comes_and_writes_it_when_done(tmp_path):
    from kernelwright.judge.scheduling.batch_profile import ProfileFeed

    write(tmp_path, "f1", True, 2.0, True, kernels=SHARES)
    write(tmp_path, "f2", False, 0.0, True)  # failed: nothing to profile
    write(tmp_path, "f3", True, 1.0, False)  # did not ask
    pool, logged = FeedPool(), []
    feed = ProfileFeed(pool, None, budget_s=600, log=logged.append)
    for name, verdict in sorted(read_verdicts(tmp_path).items()):
        feed.offer(tmp_path / f"{name}.request.json", verdict)
    assert list(pool.futures) == ["f1"] and read_verdicts(tmp_path)["f1"].profile is None  # started, not done
    pool.futures["f1"].set_result(profiled("f1"))  # completes while the runner goes on judging
    assert read_verdicts(tmp_path)["f1"].profile["status"] == "ok" and logged == ["f1: profiled (ok, 7 s)"]
    assert read_verdicts(tmp_path)["f1"].kernels == SHARES and feed.finish() == ["f1"]


def test_the_feeds_budget_counts_from_its_first_profile_and_what_it_leaves_is_said(tmp_path, monkeypatch):
    import threading

    from kernelwright.judge.scheduling import batch_profile
    from kernelwright.judge.scheduling.batch_profile import ProfileFeed

    now = [1000.0]
    monkeypatch.setattr(batch_profile.time, "monotonic", lambda: now[0])
    for name in ("g1", "g2", "g3", "g4"):
        write(tmp_path, name, True, 1.0, True)
    verdicts = read_verdicts(tmp_path)
    pool = FeedPool()
    feed = ProfileFeed(pool, None, budget_s=100)
    now[0] += 500  # judging before the first profile does not spend the budget
    feed.offer(tmp_path / "g1.request.json", verdicts["g1"])
    feed.offer(tmp_path / "g2.request.json", verdicts["g2"])
    assert pool.futures["g1"].set_running_or_notify_cancel()  # g1 runs; g2 waits for a lane
    now[0] += 80  # 20 s left: under MIN_SECONDS, no profile is started any more
    feed.offer(tmp_path / "g3.request.json", verdicts["g3"])
    assert list(pool.futures) == ["g1", "g2"]
    threading.Timer(0.2, pool.futures["g1"].set_result, [profiled("g1")]).start()
    now[0] += 30  # the budget is over: the waiting one is cancelled, the running one is waited for
    assert feed.finish() == ["g1"] and pool.futures["g2"].cancelled()
    logged = []
    assert profile_pass([tmp_path], RecordingPool(), None, feed.left(), log=logged.append) == []
    assert logged == ["profile budget spent (0 s were left for this pass): 3 passing candidates not profiled"]
    assert [n for n, v in read_verdicts(tmp_path).items() if v.profile] == ["g1"]


def test_a_feed_whose_pool_fails_leaves_the_verdicts_intact_and_says_why(tmp_path):
    from kernelwright.judge.scheduling.batch_profile import ProfileFeed

    write(tmp_path, "h1", True, 1.0, True)
    write(tmp_path, "h2", True, 1.0, True)
    before = read_verdicts(tmp_path)
    ProfileFeed(FeedPool(fail_submit=True), None, 600).offer(tmp_path / "h1.request.json", before["h1"])
    pool = FeedPool()
    feed = ProfileFeed(pool, None, 600)
    feed.offer(tmp_path / "h2.request.json", before["h2"])
    pool.futures["h2"].set_exception(RuntimeError("the lane's worker died"))
    after = read_verdicts(tmp_path)
    assert "RuntimeError: the pool is closed" in after["h1"].profile["notes"][0]
    assert "RuntimeError: the lane's worker died" in after["h2"].profile["notes"][0]
    for name in ("h1", "h2"):
        assert after[name].status == "pass" and after[name].speedup == before[name].speedup
    assert feed.finish() == ["h2"]
