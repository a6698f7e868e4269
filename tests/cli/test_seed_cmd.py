"""`kernelwright seed`: writes the file and says under which rule sets it should pass; a problem it
cannot export exits 1 with the reason and writes nothing."""
from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.cli.exits import EXIT_FAILED

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_seed_writes_the_file_and_reports_it(tmp_path):
    out = tmp_path / "gelu_seed.py"
    result = runner.invoke(app, ["seed", str(REPO / "examples/problems/scale_bias_gelu.py"), "--out", str(out),
                                 "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout.strip().splitlines()[-1])
    assert shown["out"] == str(out) and shown["kernels"] and shown["rule_sets"]["strict"] == ""
    assert "# origin: inductor seed" in out.read_text()


def test_a_problem_it_cannot_export_exits_1_with_the_reason(tmp_path):
    problem = tmp_path / "bare_mm.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                       "    def forward(self, a, b):\n        return a @ b\n\n\n"
                       "def get_inputs():\n    return [torch.randn(8, 16), torch.randn(16, 4)]\n\n\n"
                       "def get_init_inputs():\n    return []\n")
    out = tmp_path / "seed.py"
    result = runner.invoke(app, ["seed", str(problem), "--out", str(out)])
    assert result.exit_code == EXIT_FAILED, result.output
    assert "no seed written" in result.output and "launches no Triton kernel" in result.output
    assert not out.exists()
