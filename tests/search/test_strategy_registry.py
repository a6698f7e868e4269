"""The strategy registry (search/strategies/__init__.py) is the one list: the settings, `--strategy`'s
help, `make_strategy` and docs/optimize.md's table follow it, so one entry adds a strategy."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelwright.search.settings import STRATEGIES, Settings, SettingsError
from kernelwright.search.strategies import Greedy, make_strategy

REPO = Path(__file__).resolve().parents[2]


class Cautious(Greedy):
    """A strategy added by the test."""

    name = "cautious"


def test_every_registered_strategy_is_documented_and_offered():
    assert list(STRATEGIES) == ["greedy", "beam", "mcts"]
    doc = (REPO / "docs" / "optimize.md").read_text()
    table = doc[doc.index("| strategy | picks | ends |"):]
    from kernelwright.cli.app import app

    shown = " ".join(re.sub(r"[│╭╮╰╯─]", " ", CliRunner().invoke(app, ["optimize", "--help"],
                                                                  env={"COLUMNS": "300"}).output).split())
    for name, cls in STRATEGIES.items():
        assert cls.name == name and re.search(rf"^\| {name} \|", table, re.M), f"{name}: no row in docs/optimize.md"
        assert isinstance(make_strategy(name, Settings(strategy=name)), cls)
    assert f"--strategy <str> one of {', '.join(STRATEGIES)}" in shown


def test_an_entry_is_enough_for_the_settings_and_make_strategy(monkeypatch):
    with pytest.raises(SettingsError, match="cautious"):
        Settings(strategy="cautious")
    monkeypatch.setitem(STRATEGIES, Cautious.name, Cautious)
    settings = Settings.from_dict({"strategy": "cautious"})
    assert isinstance(make_strategy(settings.strategy, settings), Cautious)


def test_the_registry_is_full_when_only_the_settings_are_imported():
    code = ("from kernelwright.search.settings import Settings, STRATEGIES; "
            "Settings(strategy='beam'); print(sorted(STRATEGIES))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "['beam', 'greedy', 'mcts']", done.stderr
