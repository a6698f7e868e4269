"""Long work is never silent (cli/heartbeat.py): after `every` seconds without a line, a line says
what the command does and for how long; a command that prints often never hears it. And through
`kernelwright optimize`: while an instance is being judged, the heartbeat names it.

The clock-driven parts run on a fake clock; the threads are waited for on events, with bounds
sized for a loaded machine, never on sleeps.
"""
from __future__ import annotations

import threading

import pytest
from typer.testing import CliRunner

from kernelwright.cli import heartbeat, optimize_cmd
from kernelwright.cli.app import app
from kernelwright.cli.heartbeat import Heartbeat, run_activity

EXAMPLE = optimize_cmd.Path(__file__).resolve().parents[2] / "examples" / "problems" / "scale_bias_gelu.py"


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_line_is_due_after_the_silence_and_says_what_and_how_long():
    clock, said = FakeClock(), []
    beat = Heartbeat(said.append, every=30, clock=clock)
    beat.doing("judging instance 1 of 6")
    clock.now += 29
    assert beat.due() == pytest.approx(1)
    beat.printed()  # a progress line: the silence starts again
    clock.now += 29
    assert beat.due() == pytest.approx(1)
    clock.now += 1
    beat.seen(90.0)  # the run's active time, as its last snapshot said
    clock.now += 5
    assert beat.due() <= 0
    beat.beat()
    assert said == ["[1:35] still judging instance 1 of 6: 1:04 so far"]
    assert beat.due() == pytest.approx(30)
    beat.doing("judging instance 2 of 6")  # a new activity: its own clock
    clock.now += 30
    beat.beat()
    assert said[-1] == "[2:05] still judging instance 2 of 6: 0:30 so far"


def test_the_thread_beats_and_stops():
    arrived = threading.Event()
    said = []

    def say(text: str) -> None:
        said.append(text)
        arrived.set()

    with Heartbeat(say, every=0.05) as beat:
        beat.doing("measuring the baselines of p.py")
        assert arrived.wait(60), "no heartbeat within 60 s"
    thread = beat.thread
    assert not thread.is_alive()
    assert said[0].startswith("[0:0") and "still measuring the baselines of p.py" in said[0]


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("KW_HEARTBEAT_S", "2.5")
    assert heartbeat.interval() == 2.5
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv("KW_HEARTBEAT_S", bad)
        assert heartbeat.interval() == heartbeat.DEFAULT_EVERY_S


def test_a_run_says_what_it_waits_for():
    assert run_activity({"activity": "judging instance 3 of 6"}) == "judging instance 3 of 6"
    assert run_activity({"waiting_on": {"llm": 1, "judge": 2}}) == \
        "waiting for 1 LLM answer(s) and 2 evaluation(s) by the judge"
    assert run_activity({}) == "working"


def test_optimize_names_the_instance_being_judged_while_it_is_judged(tmp_path, monkeypatch):
    """The stand-in tuner judges its first instance until a heartbeat was printed (bounded)."""
    from fake_tuner import FakeTuner

    from kernelwright.tune import autopilot

    for name in ("KW_LLM", "KW_CONFIG", "KERNELWRIGHT_LLM", "KERNELWRIGHT_LLM_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KW_HEARTBEAT_S", "0.1")
    tuner = FakeTuner()
    tuner.hold = threading.Event()
    monkeypatch.setattr(autopilot, "optimize_without_llm", tuner)
    said = optimize_cmd._say

    def say(text: str) -> None:
        said(text)
        if "still judging" in text:
            tuner.hold.set()

    monkeypatch.setattr(optimize_cmd, "_say", say)
    result = CliRunner().invoke(app, ["optimize", str(EXAMPLE), "--max-evals", "2"])
    assert result.exit_code == 0, result.output
    assert tuner.hold.is_set(), "the first instance was judged without a heartbeat:\n" + result.stderr
    assert "still judging instance 1 of 2 (the first also measures the baselines): 0:0" in result.stderr
    quiet = CliRunner().invoke(app, ["optimize", str(EXAMPLE), "--max-evals", "2", "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
