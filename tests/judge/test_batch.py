"""Batch folders: requests in, verdicts out, atomically, once."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kernelwright.judge import JudgeConfig
from kernelwright.judge.api import SourceText
from kernelwright.judge.batch import VERDICT_SUFFIX, pending, read_request, read_verdicts, write_request

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = Path(__file__).parent / "candidates"


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
    done = subprocess.run([sys.executable, "-m", "kernelwright.judge.batch", str(tmp_path), "--cpu-workers", "2"],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    verdicts = read_verdicts(tmp_path)
    assert verdicts["by_path"].status == "pass", verdicts["by_path"].error
    assert verdicts["by_source"].status == "fail" and "by_source.py, line 7" in verdicts["by_source"].error
    assert verdicts["broken"].status == "error" and "not readable JSON" in verdicts["broken"].error
    assert pending(tmp_path) == []
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))
    before = (tmp_path / f"by_path{VERDICT_SUFFIX}").stat().st_mtime_ns
    again = subprocess.run([sys.executable, "-m", "kernelwright.judge.batch", str(tmp_path)],
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

    from kernelwright.judge.batch import BatchError

    cases = {"no_candidate": {"problem_path": "p.py"}, "no_problem": {"candidate_source": "x"},
             "bad_config": {"problem_path": "p.py", "candidate_source": "x", "config": {"nope": 1}}}
    for name, data in cases.items():
        path = tmp_path / f"{name}.request.json"
        path.write_text(json.dumps(data))
        with pytest.raises(BatchError):
            read_request(path)
