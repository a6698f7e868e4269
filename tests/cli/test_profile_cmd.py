"""`kernelwright profile`: ncu's launch bound is the judge's unless given (one default, one home)."""
from __future__ import annotations

from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.profile import ProfileConfig, ProfileReport
from kernelwright.profile.hot import MAX_LAUNCHES, SelectionLimits

runner = CliRunner()


def _configs(monkeypatch) -> list[ProfileConfig]:
    seen: list[ProfileConfig] = []

    def fake(problem, candidate, config, executor=None, kernel_shares=None):
        seen.append(config)
        return ProfileReport(str(problem), str(candidate), status="ok")

    monkeypatch.setattr("kernelwright.profile.profile_candidate", fake)
    return seen


def test_the_cli_replays_as_many_launches_as_the_judges_profile(monkeypatch):
    seen = _configs(monkeypatch)
    result = runner.invoke(app, ["profile", "p.py", "c.py", "--json"])
    assert result.exit_code == 0, result.output
    assert seen[0].max_kernels == ProfileConfig().max_kernels == SelectionLimits().max_launches == MAX_LAUNCHES
    assert MAX_LAUNCHES < 32  # the old default of the CLI alone


def test_an_explicit_bound_is_kept(monkeypatch):
    seen = _configs(monkeypatch)
    result = runner.invoke(app, ["profile", "p.py", "c.py", "--max-kernels", "2", "--json"])
    assert result.exit_code == 0, result.output
    assert seen[0].max_kernels == 2 and seen[0].limits().max_launches == 2
