"""The `kernelwright` app registers every command, and `profile` degrades clearly without a GPU."""
from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from kernelwright.cli.app import app

runner = CliRunner()


def test_every_command_is_registered():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("optimize", "judge", "baseline", "device-peaks", "tune", "profile", "extract", "apply", "runs", "skills", "mcp"):
        assert command in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_profile_without_gpu_says_so():
    repo = __import__("pathlib").Path(__file__).resolve().parents[2]
    result = runner.invoke(app, ["profile", str(repo / "examples/problems/row_softmax.py"),
                                 str(repo / "examples/candidates/row_softmax.py")])
    assert result.exit_code == 0, result.output
    assert "No CUDA device" in result.output


def test_profile_rejects_bad_override():
    result = runner.invoke(app, ["profile", "p.py", "c.py", "--set", "nonsense"])
    assert result.exit_code == 2
    assert "name=value" in result.output
