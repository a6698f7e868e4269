"""Batch folders: requests in, verdicts out, atomically, once."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling.batch import pending
from kernelwright.judge.scheduling.batch_folder import VERDICT_SUFFIX, read_request, read_verdicts, write_request

REPO = Path(__file__).resolve().parents[3]
CANDIDATES = Path(__file__).parents[1] / "candidates"


def test_batch_folder_round_trip(tmp_path, kernelbench):
    """Two requests (one with the problem as a path, one as source text) and one broken file."""
    config = JudgeConfig(time=False, trials=2, overrides={"batch_size": 4, "dim": 64})
    relu = kernelbench / "level1" / "19_ReLU.py"
    write_request(tmp_path, "by_path", relu, (CANDIDATES / "relu_correct.py").read_text(), config)
    write_request(tmp_path, "by_source", SourceText(relu.read_text(), "19_ReLU"),
                  (CANDIDATES / "relu_raise.py").read_text(), config)
    (tmp_path / "broken.request.json").write_text("{not json")
    assert [p.name for p in pending(tmp_path)] == ["broken.request.json", "by_path.request.json",
                                                   "by_source.request.json"]
    done = subprocess.run([sys.executable, "-m", "kernelwright.judge.scheduling.batch", str(tmp_path), "--cpu-workers", "2"],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    verdicts = read_verdicts(tmp_path)
    assert verdicts["by_path"].status == "pass", verdicts["by_path"].error
    assert verdicts["by_source"].status == "fail" and "by_source.py, line 7" in verdicts["by_source"].error
    assert verdicts["broken"].status == "error" and "not readable JSON" in verdicts["broken"].error
    assert pending(tmp_path) == []
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))
    before = (tmp_path / f"by_path{VERDICT_SUFFIX}").stat().st_mtime_ns
    again = subprocess.run([sys.executable, "-m", "kernelwright.judge.scheduling.batch", str(tmp_path)],
                           capture_output=True, text=True, cwd=REPO, timeout=120)
    assert "0 verdicts written" in again.stdout
    assert (tmp_path / f"by_path{VERDICT_SUFFIX}").stat().st_mtime_ns == before


def test_read_request_resolves_relative_problem_paths_and_config(tmp_path):
    (tmp_path / "prob.py").write_text("x = 1")
    path = write_request(tmp_path, "job", "prob.py", "class ModelNew: pass", {"trials": 7})
    job = read_request(path, JudgeConfig(timeout_s=9))
    assert job.problem == tmp_path / "prob.py" and job.name == "job"
    assert job.config.trials == 7 and job.config.timeout_s == 9
    assert job.candidate.text == "class ModelNew: pass"


def test_bad_requests_say_what_is_missing(tmp_path):
    import pytest

    from kernelwright.judge.scheduling.batch_folder import BatchError

    cases = {"no_candidate": {"problem_path": "p.py"}, "no_problem": {"candidate_source": "x"},
             "bad_config": {"problem_path": "p.py", "candidate_source": "x", "config": {"nope": 1}}}
    for name, data in cases.items():
        path = tmp_path / f"{name}.request.json"
        path.write_text(json.dumps(data))
        with pytest.raises(BatchError):
            read_request(path)


class _FakePool:
    """Stands in for the judge pool (no sandbox here): every job it is handed passes."""

    def __init__(self):
        self.names: list[str] = []

    def iter_judge(self, jobs):
        from kernelwright.judge.verdict import Verdict

        for index, job in enumerate(jobs):
            self.names.append(job.name)
            yield index, Verdict(problem="p.py", candidate=job.name, status="pass", stage="done")


def _folder_with_verdicts(folder: Path) -> Path:
    """Three requests answered by hand-written verdict files: a system error (OOM on a shared GPU,
    the H100 suite run's shape), the candidate's own failure, and a pass; plus one with none."""
    from kernelwright.judge.verdict import Verdict

    (folder / "prob.py").write_text("x = 1")
    verdicts = {"oom": Verdict(problem="p", candidate="oom", status="error", stage="check",
                               error="internal judge error: Traceback (most recent call last):\n"
                                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB."),
                "wrong": Verdict(problem="p", candidate="wrong", status="fail", stage="check", error="max abs err 3"),
                "good": Verdict(problem="p", candidate="good", status="pass", stage="done")}
    for name in [*verdicts, "new"]:
        write_request(folder, name, "prob.py", "class ModelNew: pass")
    for name, verdict in verdicts.items():
        (folder / f"{name}{VERDICT_SUFFIX}").write_text(verdict.to_json())
    return folder


def test_retry_errors_rejudges_only_system_errors_and_keeps_every_other_verdict(tmp_path):
    from kernelwright.judge.scheduling.batch import REJUDGED, run_batch

    folder = _folder_with_verdicts(tmp_path)
    kept = {name: (folder / f"{name}{VERDICT_SUFFIX}").read_bytes() for name in ("wrong", "good")}
    assert [p.name for p in pending(folder)] == ["new.request.json"]
    assert [p.name for p in pending(folder, retry_errors=True)] == ["new.request.json", "oom.request.json"]
    pool = _FakePool()
    judged = run_batch(folder, pool, retry_errors=True)
    assert sorted(judged) == sorted(pool.names) == ["new", "oom"]
    for name, data in kept.items():
        assert (folder / f"{name}{VERDICT_SUFFIX}").read_bytes() == data
    verdicts = read_verdicts(folder)
    assert verdicts["oom"].status == "pass"
    flag = next(f for f in verdicts["oom"].flags if f.code == REJUDGED)
    assert "out of GPU memory" in flag.message and "12.00 GiB" in flag.message
    assert not any(f.code == REJUDGED for f in verdicts["new"].flags)
    assert run_batch(folder, _FakePool(), retry_errors=True) == []  # nothing is a system error any more


def test_a_pass_whose_baseline_ran_out_of_memory_is_judged_again_but_other_baseline_errors_are_not(tmp_path):
    """The H100 suite's shape: a correct candidate whose eager baseline ran out of memory beside a
    64 GB evaluation has no speedup; --retry-errors judges it again. A baseline error of another
    kind (the reference cannot be compiled) is the problem's, and stays."""
    from kernelwright.judge.scheduling.batch import system_error
    from kernelwright.judge.verdict import Baselines, Verdict

    (tmp_path / "prob.py").write_text("x = 1")
    errors = {"untimed": {"eager": "eager baseline failed: OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB."},
              "nocompile": {"compile_default": "compile_default baseline failed: InductorError: unsupported op"}}
    for name, errs in errors.items():
        write_request(tmp_path, name, "prob.py", "class ModelNew: pass")
        verdict = Verdict(problem="p", candidate=name, status="pass", stage="done", baselines=Baselines(errors=errs))
        (tmp_path / f"{name}{VERDICT_SUFFIX}").write_text(verdict.to_json())
    assert pending(tmp_path) == []
    assert [p.name for p in pending(tmp_path, retry_errors=True)] == ["untimed.request.json"]
    assert "eager baseline(s) ran out of GPU memory" in system_error(tmp_path / f"untimed{VERDICT_SUFFIX}")


def test_cli_judge_batch_retry_errors(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from kernelwright.cli.app import app
    from kernelwright.judge.scheduling import pool as pool_module
    from kernelwright.judge.target import DEVICE_FILE

    folder = _folder_with_verdicts(tmp_path)
    (folder / DEVICE_FILE).write_text("{}")  # recorded already: no device probe here
    fakes: list[_FakePool] = []
    monkeypatch.setattr(pool_module, "JudgePool", lambda *a, **k: fakes.append(_FakePool()) or fakes[-1])
    done = CliRunner().invoke(app, ["judge", "--batch", str(folder), "--retry-errors", "--profile-budget", "0"])
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())  # rich wraps lines
    assert "1 pending requests" in said and "1 whose verdict is a system error judged again" in said
    assert sorted(fakes[0].names) == ["new", "oom"]
    refused = CliRunner().invoke(app, ["judge", "--retry-errors"])
    assert refused.exit_code == 2 and "--batch" in refused.output


def test_a_runner_starts_knowing_the_peaks_its_folder_already_measured(tmp_path):
    from kernelwright.judge.scheduling.admission import GIB, PEAK_KEY, memory_key
    from kernelwright.judge.scheduling.batch import measured_peaks

    problem = SourceText("class Model: pass", "p")
    config = JudgeConfig(overrides={"n": 4})
    for name, peak in (("c1", 3 * GIB), ("c2", 5 * GIB), ("c3", None)):
        write_request(tmp_path, name, problem, "x = 1", config)
        if peak is not None:
            (tmp_path / f"{name}{VERDICT_SUFFIX}").write_text(json.dumps({"environment": {PEAK_KEY: peak}}))
    write_request(tmp_path, "other", SourceText("class Model: pass  # another", "q"), "x = 1", config)
    (tmp_path / f"other{VERDICT_SUFFIX}").write_text("{not json")
    key = memory_key(problem.text, {"n": 4}, config.device)  # as the pool keys the job of c1
    assert measured_peaks([tmp_path]) == {key: 5 * GIB}


class _OneQueuePool(_FakePool):
    """Records each pass it is handed (the names of one `iter_judge` call) and each profile job."""

    def __init__(self):
        super().__init__()
        self.passes: list[list[str]] = []
        self.profiled: list[tuple[str, dict | None]] = []
        self.events: list[str] = []

    def iter_judge(self, jobs):
        from kernelwright.judge.verdict import Verdict

        jobs = list(jobs)
        self.passes.append([job.name for job in jobs])
        for index, job in enumerate(jobs):
            self.events.append(f"verdict {job.name}")
            yield index, Verdict(problem="p.py", candidate=job.name, status="pass", stage="done",
                                 speedup={"eager": 1.0 + index}, kernels={"available": True, "kernels": [
                                     {"name": f"{job.name}_kernel", "share": 1.0, "us_per_call": 3.0,
                                      "launches_per_call": 1.0}]})

    def judge_many(self, jobs):
        from kernelwright.judge.verdict import Verdict

        self.profiled += [(job.name, job.config.profile_kernels) for job in jobs]
        return [Verdict(problem="p.py", candidate=job.name, status="pass", stage="done",
                        profile={"status": "ok", "findings": []}, stage_seconds={"profile": 5.0}) for job in jobs]

    def submit_job(self, job):
        from concurrent.futures import Future

        self.events.append(f"profile {job.name}")
        future = Future()
        future.set_result(self.judge_many([job])[0])
        return future


def test_two_suites_folders_are_one_queue_for_one_runner_with_their_profiles(tmp_path, monkeypatch):
    """Issue 32, point 1: `kernelwright judge --batch A --batch B` (two suites' evals folders) makes one
    runner: one pool, every request of both folders in one pass by priority (each suite's first
    candidates first), each passing candidate's profile submitted to the same pool as its verdict is
    written (interleaved with the judging), from its verdict's split."""
    from typer.testing import CliRunner

    from kernelwright.cli.app import app
    from kernelwright.judge.scheduling import pool as pool_module
    from kernelwright.judge.target import DEVICE_FILE

    suites = {"suite_a": {"gemm_r0": 0, "gemm_r1": 1, "relu_r0": 0}, "suite_b": {"conv_r0": 0, "conv_r1": 1}}
    for suite, requests in suites.items():
        folder = tmp_path / suite / "evals"
        folder.mkdir(parents=True)
        (folder / DEVICE_FILE).write_text("{}")  # recorded already: no device probe here
        (folder / "prob.py").write_text("x = 1")
        for name, priority in requests.items():
            write_request(folder, name, "prob.py", "class ModelNew: pass", profile=True, priority=priority)
    pools: list[_OneQueuePool] = []
    monkeypatch.setattr(pool_module, "JudgePool", lambda *a, **k: pools.append(_OneQueuePool()) or pools[-1])
    done = CliRunner().invoke(app, ["judge", "--batch", str(tmp_path / "suite_a" / "evals"), "--batch",
                                    str(tmp_path / "suite_b" / "evals"), "--profile-budget", "600",
                                    "--baseline-lanes", "0"])
    assert done.exit_code == 0, done.output
    (pool,) = pools  # one runner, one pool
    (one_pass,) = pool.passes  # both suites' requests in one queue
    assert one_pass == ["conv_r0", "gemm_r0", "relu_r0", "conv_r1", "gemm_r1"]  # by priority across the suites
    assert sorted(name for name, _ in pool.profiled) == sorted(one_pass)  # every passing candidate profiled
    assert all(shares["kernels"][0]["name"] == f"{name}_kernel" for name, shares in pool.profiled)
    # interleaved: each profile starts as soon as its verdict is written, not after the last verdict
    assert pool.events[:4] == ["verdict conv_r0", "profile conv_r0", "verdict gemm_r0", "profile gemm_r0"]
    for suite in suites:
        verdicts = read_verdicts(tmp_path / suite / "evals")
        assert set(verdicts) == set(suites[suite]) and all(v.profile["status"] == "ok" for v in verdicts.values())
    assert "5 verdicts written" in " ".join(done.output.split())
    missing = CliRunner().invoke(app, ["judge", "--batch", str(tmp_path / "suite_a" / "evals"), "--batch",
                                       str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "not a folder" in " ".join(missing.output.split())


@pytest.mark.slow
def test_one_runner_judges_and_profiles_two_suites_folders_on_the_cpu(tmp_path, kernelbench):
    """The real pool, sandbox and profile on the CPU: two suites' folders, one runner, one call; each
    passing candidate comes back with its profile (on a CPU: the timeline and a notice saying why
    there are no counters), the profiles started by the feed as the verdicts were written."""
    from kernelwright.judge.target import DEVICE_FILE

    config = JudgeConfig(time=False, trials=1, overrides={"batch_size": 4, "dim": 64})
    relu = kernelbench / "level1" / "19_ReLU.py"
    folders = [tmp_path / "suite_a" / "evals", tmp_path / "suite_b" / "evals"]
    for index, folder in enumerate(folders):
        write_request(folder, f"relu_{index}", relu, (CANDIDATES / "relu_correct.py").read_text(), config,
                      profile=True)
        (folder / DEVICE_FILE).write_text("{}")  # recorded already: no device probe here
    done = subprocess.run([sys.executable, "-m", "kernelwright.judge.scheduling.batch", *map(str, folders),
                           "--cpu-workers", "2", "--baseline-lanes", "0", "--profile-budget", "300"],
                          capture_output=True, text=True, cwd=REPO, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    for index, folder in enumerate(folders):
        verdict = read_verdicts(folder)[f"relu_{index}"]
        assert verdict.status == "pass", verdict.error
        assert verdict.profile["status"] == "partial" and verdict.stage_seconds["profile"] > 0
        assert any("No CUDA device" in f["text"] for f in verdict.profile["findings"])
        assert f"relu_{index}: profiled (partial" in done.stdout
    assert "2 verdicts written" in done.stdout and "not profiled" not in done.stdout
