"""The parent side of judging: requests, stage clocks, reading results, explaining a dead worker."""
from __future__ import annotations

import json
import time
from pathlib import Path

from kernelwright.judge import JudgeConfig
from kernelwright.judge.api import StageClock, WorkerResult, assemble, read_result, record_overhead, relevant_lines
from kernelwright.judge.request import JudgeRequest, SourceText, make_request
from kernelwright.judge.verdict import ERROR, FAIL, PASS, ProcessInfo, Verdict


def _request(tmp_path: Path) -> JudgeRequest:
    return make_request(SourceText("x = 1", "prob"), SourceText("y = 2", "cand"), JudgeConfig(), tmp_path)


def test_make_request_round_trips_and_resolves_the_cache_dir(tmp_path):
    request = _request(tmp_path)
    request.save(tmp_path / "request.json")
    loaded = JudgeRequest.load(tmp_path / "request.json")
    assert loaded == request
    assert loaded.problem_label == "prob" and loaded.candidate_label == "cand"
    assert Path(loaded.config["cache_dir"]).is_absolute()  # HOME is the scratch dir inside the sandbox


def test_make_request_with_paths(tmp_path):
    problem = tmp_path / "p.py"
    request = make_request(problem, tmp_path / "c.py", JudgeConfig(), tmp_path)
    assert request.problem_path == str(problem.resolve()) and request.candidate_source is None


def test_stage_clock_gives_each_stage_its_budget(tmp_path):
    progress = tmp_path / "progress"
    config = JudgeConfig(timeout_s=10, compile_timeout_s=100)
    clock = StageClock(progress, config)
    start = time.monotonic()
    assert clock(start) == start + 100  # nothing reported yet: load/compile budget
    progress.write_text("stage load\nstage compile\nstage check\ntrial 2 signed\n")
    deadline = clock(start)
    assert clock.stage == "check" and clock.trial == "2 signed"
    assert abs(deadline - (time.monotonic() + 10)) < 1
    with progress.open("a") as fh:
        fh.write("stage time\nbaseline\n")
    clock(start)
    assert clock.stage == "baseline" and clock.budget() == 100


def test_waiting_for_the_device_does_not_count_against_the_stage(tmp_path):
    progress = tmp_path / "progress"
    clock = StageClock(progress, JudgeConfig(timeout_s=10, compile_timeout_s=100))
    start = time.monotonic()
    progress.write_text("stage load\nstage compile\nstage check\nwait start\n")
    assert clock(start) == float("inf")  # other workers are timing: only the backstop applies
    time.sleep(0.2)
    with progress.open("a") as fh:
        fh.write("wait end\ntrial 0 given")  # a line still being written is not read yet
    deadline = clock(start)
    assert clock.trial == "" and abs(deadline - (time.monotonic() + 10)) < 0.1  # the budget restarts
    with progress.open("a") as fh:
        fh.write("\n")
    clock(start)
    assert clock.trial == "0 given" and clock.stage == "check"


def test_a_stage_that_takes_the_device_per_trial_keeps_one_budget_for_its_own_work(tmp_path):
    """Trials take the device lock one at a time: each wait moves the deadline by the wait only,
    so five trials do not get five fresh budgets."""
    progress = tmp_path / "progress"
    clock = StageClock(progress, JudgeConfig(timeout_s=10, compile_timeout_s=100))
    start = time.monotonic()
    progress.write_text("stage load\nstage compile\nstage check\n")
    first = clock(start)
    time.sleep(0.3)  # the candidate's own work in trial 0
    with progress.open("a") as fh:
        fh.write("wait start\n")
    assert clock(start) == float("inf")
    time.sleep(0.2)  # another worker is timing
    with progress.open("a") as fh:
        fh.write("wait end\ntrial 1 given\n")
    deadline = clock(start)
    assert abs(deadline - (first + 0.2)) < 0.1  # moved by the wait, not restarted after the 0.3 s of work
    assert deadline < time.monotonic() + 10 - 0.2


def test_overhead_is_the_wall_time_no_stage_accounts_for():
    verdict = Verdict("p", "c", stage_seconds={"imports": 2.0, "check": 1.0})
    record_overhead(verdict, ProcessInfo(exit_code=0, wall_s=3.5))
    assert verdict.stage_seconds["overhead"] == 0.5


def _write_result(path: Path, token: str, verdict: Verdict, complete: bool) -> None:
    path.write_text(json.dumps({"token": token, "complete": complete, "verdict": verdict.to_dict()}))


def test_forged_result_is_rejected(tmp_path):
    request = _request(tmp_path)
    _write_result(Path(request.result_path), "not-the-token", Verdict("p", "c", status=PASS, stage="done"), True)
    result = read_result(Path(request.result_path), "the-token")
    assert result.verdict is None and result.problem == "forged"
    verdict = assemble(request, result, ProcessInfo(exit_code=0), StageClock(tmp_path / "none", JudgeConfig()),
                       JudgeConfig())
    assert verdict.status == FAIL and verdict.flags[0].code == "tampering"


def test_complete_result_is_used_as_written(tmp_path):
    request = _request(tmp_path)
    _write_result(Path(request.result_path), "t", Verdict("p", "c", status=PASS, stage="done"), True)
    verdict = assemble(request, read_result(Path(request.result_path), "t"), ProcessInfo(exit_code=0),
                       StageClock(tmp_path / "none", JudgeConfig()), JudgeConfig())
    assert verdict.status == PASS and verdict.process.exit_code == 0


def test_crash_in_check_stage_is_a_failure_naming_signal_and_trial(tmp_path):
    request = _request(tmp_path)
    (tmp_path / "progress").write_text("stage check\ntrial 1 signed\n")
    clock = StageClock(tmp_path / "progress", JudgeConfig())
    clock.refresh()
    partial = WorkerResult(Verdict("p", "c", stage="check"), complete=False)
    info = ProcessInfo(exit_code=-11, signal="SIGSEGV", stderr_tail='File "cand.py", line 9 in forward\n')
    verdict = assemble(request, partial, info, clock, JudgeConfig())
    assert verdict.status == FAIL and verdict.stage == "check"
    assert "SIGSEGV" in verdict.error and "trial 1 signed" in verdict.error and "line 9" in verdict.error


def test_crash_before_any_result_is_an_error_in_load(tmp_path):
    request = _request(tmp_path)
    info = ProcessInfo(exit_code=None, stderr_tail="cannot start the judge process: no python")
    verdict = assemble(request, read_result(Path(request.result_path), "t"), info,
                       StageClock(tmp_path / "progress", JudgeConfig()), JudgeConfig())
    assert verdict.status == ERROR and verdict.stage == "load" and "could not start" in verdict.error


def test_timeout_during_baselines_keeps_the_candidates_verdict(tmp_path):
    request = _request(tmp_path)
    (tmp_path / "progress").write_text("stage check\nstage time\nbaseline\n")
    clock = StageClock(tmp_path / "progress", JudgeConfig())
    clock.refresh()
    partial = WorkerResult(Verdict("p", "c", status=PASS, stage="time"), complete=False)
    verdict = assemble(request, partial, ProcessInfo(timed_out=True, signal="SIGKILL"), clock, JudgeConfig())
    assert verdict.status == PASS and verdict.flags[-1].code == "baseline_unavailable"


def test_relevant_lines_prefer_the_candidates_own_frames():
    stderr = "noise\nFile \"/x/cand.py\", line 3 in forward\nFile \"/torch/x.py\", line 9\nSegmentation fault\n"
    assert relevant_lines(stderr, "/x/cand.py") == 'File "/x/cand.py", line 3 in forward'
    assert relevant_lines("a\nb\n", "other.py") == "a | b"


def test_broken_files_are_answered_without_starting_a_worker():
    from kernelwright.judge import judge

    problem = SourceText("import torch\nclass Model: pass\ndef get_inputs(): return []\n"
                         "def get_init_inputs(): return []\n", "prob")
    verdict = judge(problem, SourceText("import torch\nclass ModelNew(:\n", "cand"), JudgeConfig())
    assert verdict.status == ERROR and verdict.stage == "compile" and verdict.process is None
    assert verdict.error == "the candidate does not load: cand.py, line 2: syntax error: invalid syntax"
    broken_problem = judge(SourceText("import torch\n", "prob"), SourceText("class ModelNew: pass", "c"))
    assert broken_problem.stage == "load" and broken_problem.error.startswith("problem/prob.py: a problem file")


def _describe(tmp_path, info) -> str:
    from kernelwright.judge.request import JudgeRequest
    from kernelwright.judge.api import StageClock, describe_death
    from kernelwright.judge.config import JudgeConfig

    clock = StageClock(tmp_path / "progress", JudgeConfig())
    request = JudgeRequest(config={}, result_path=str(tmp_path / "r.json"), progress_path=str(tmp_path / "progress"))
    return describe_death(info, clock, request, "")


def test_exit_code_137_is_a_kill_from_outside_not_the_candidate_exiting(tmp_path):
    """The supervisor passes its worker's SIGKILL on as exit code 137 (the OOM killer, most often):
    an error the system may have caused is not put on the candidate's sys.exit()."""
    text = _describe(tmp_path, _info(exit_code=137))
    assert "SIGKILL" in text and "out-of-memory killer" in text and "sys.exit" not in text


def test_a_plain_exit_code_still_names_the_candidates_exit(tmp_path):
    assert "sys.exit()" in _describe(tmp_path, _info(exit_code=3))


def _info(**fields):
    from kernelwright.judge.verdict import ProcessInfo

    return ProcessInfo(**fields)
