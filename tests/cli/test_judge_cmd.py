"""`kernelwright judge` and `kernelwright baseline` as a new user meets them (cli/judge_cmd.py): a
missing file under --json is still JSON, a verdict without trials says why instead of "0/0", and a
judge that takes long says so on stderr while it works. No judge runs here: the call into it is
replaced by a stand-in.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from kernelwright.cli import judge_cmd, judge_daemon
from kernelwright.cli.app import app
from kernelwright.judge.verdict import Verdict

REPO = Path(__file__).resolve().parents[2]
PROBLEM = REPO / "examples" / "problems" / "scale_bias_gelu.py"
CANDIDATE = REPO / "examples" / "candidates" / "scale_bias_gelu.py"
runner = CliRunner()


def test_a_missing_file_under_json_is_a_json_verdict(tmp_path):
    result = runner.invoke(app, ["judge", str(tmp_path / "p.py"), str(CANDIDATE), "--json"])
    assert result.exit_code == 2
    verdict = json.loads(result.stdout)  # stdout holds JSON only
    assert verdict["status"] == "error" and verdict["stage"] == "load"
    assert verdict["error"] == f"{tmp_path / 'p.py'}: file not found"
    assert "file not found" in result.stderr
    plain = runner.invoke(app, ["judge", str(PROBLEM), str(tmp_path)])  # a folder is not a candidate file
    assert plain.exit_code == 2 and plain.stdout == "" and f"{tmp_path}: not a file" in plain.stderr


def test_a_verdict_without_trials_says_where_the_judge_stopped():
    timed_out = Verdict(problem="p.py", candidate="c.py", status="fail", stage="check",
                        error="the candidate timed out after 300 s in stage check")
    console = Console(width=200, record=True)
    console.print(judge_cmd.verdict_table(timed_out))
    text = console.export_text()
    assert "0/0" not in text and "none run (the judge stopped at stage check" in text


def test_a_long_judgement_prints_a_heartbeat(monkeypatch):
    monkeypatch.setenv("KW_HEARTBEAT_S", "0.1")
    beat_seen = threading.Event()
    said = judge_cmd._say

    def say(text: str) -> None:
        said(text)
        if "still judging" in text:
            beat_seen.set()

    def slow_judge(problem, candidate, config, use_daemon, idle_s, say):
        assert beat_seen.wait(60), "no heartbeat while judging"
        return Verdict(problem=str(problem), candidate=str(candidate), status="pass", stage="done")

    monkeypatch.setattr(judge_cmd, "_say", say)
    monkeypatch.setattr(judge_daemon, "judge", slow_judge)
    result = runner.invoke(app, ["judge", str(PROBLEM), str(CANDIDATE), "--json", "--timeout", "120"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "pass"
    assert ("still judging scale_bias_gelu.py against scale_bias_gelu.py (the judge allows each stage 120 s): 0:0"
            in result.stderr)


TORCH_PROBLEM = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * {scale}


def get_inputs():
    return [torch.rand(16)]


def get_init_inputs():
    return []
"""
LONG_ERROR = ("eager baseline failed: RuntimeError: the reference kernel could not be launched on this device "
              "because no active driver was found, and this sentence goes on past one hundred and twenty characters")


def test_baselines_of_a_folder_show_every_problem_and_fail_when_one_fails(tmp_path, monkeypatch):
    from kernelwright.judge import baseline
    from kernelwright.judge.verdict import Baselines, TimingStats

    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "good.py").write_text(TORCH_PROBLEM.format(scale=2))
    (folder / "bad.py").write_text(TORCH_PROBLEM.format(scale=3))
    (folder / "broken.py").write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")  # no get_inputs
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    seen_env = []

    def stand_in(path, overrides, config, device, force=False):
        import os

        seen_env.append(os.environ.get("TRITON_INTERPRET"))
        skipped = {"compile_default": "skipped on CPU: torch.compile there needs a C++ toolchain"}
        if Path(path).name == "bad.py":
            return Baselines(errors={"eager": LONG_ERROR, **skipped})
        stats = TimingStats(median_ms=0.02, iqr_ms=0.001, mean_ms=0.02, min_ms=0.02, max_ms=0.03, n=100,
                            method="wall_cpu")
        return Baselines(eager=stats, errors=skipped, measured={"eager": {"repeats": [0.02], "steady": True}})

    monkeypatch.setattr(baseline, "get_baselines", stand_in)
    wide = {"COLUMNS": "400"}  # rich reads the width of a pipe from COLUMNS: rows stay on one line
    result = runner.invoke(app, ["baseline", str(folder), "--device", "cpu"], env=wide)
    assert result.exit_code == 1, result.output  # a baseline failed and a problem did not load
    assert seen_env == ["1", "1"]  # on a CPU a Triton reference runs interpreted, as in the judge
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    assert set(rows) == {"bad.py", "broken.py", "good.py"}  # none left out
    assert "failed" in rows["bad.py"] and LONG_ERROR in rows["bad.py"]  # the whole error, not cut mid-word
    assert "load: the problem did not load" in rows["broken.py"] and "get_inputs" in rows["broken.py"]
    assert "0.02 ms" in rows["good.py"] and "failed" not in rows["good.py"] and "n/a" in rows["good.py"]
    assert "n/a compile_default: skipped on CPU" in result.stdout and "2 of 3 problem(s)" in result.stdout
    data = json.loads(runner.invoke(app, ["baseline", str(folder), "--device", "cpu", "--json"]).stdout)
    assert set(data) == {str(folder / n) for n in ("bad.py", "broken.py", "good.py")}
    assert data[str(folder / "good.py")]["eager"]["median_ms"] == 0.02

    (folder / "bad.py").unlink()
    (folder / "broken.py").unlink()
    assert runner.invoke(app, ["baseline", str(folder), "--device", "cpu"]).exit_code == 0
