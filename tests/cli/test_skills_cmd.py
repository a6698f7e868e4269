"""`kernelwright skills`: listing filters by backend, review flips a candidate to trusted."""
from __future__ import annotations

import typer
from typer.testing import CliRunner

from kernelwright.cli.skills_cmd import register
from kernelwright.memory import write_candidate_skill

runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_list_ranks_and_filters(tmp_path):
    result = runner.invoke(_app(), ["skills", "list", "softmax rows exp max", "--backend", "triton",
                                    "--user-dir", str(tmp_path), "-k", "3"])
    assert result.exit_code == 0, result.output
    assert "online-softmax" in result.output


def test_candidate_then_review(tmp_path):
    path = write_candidate_skill(
        tmp_path, name="fuse-bias-relu", title="Fuse bias and ReLU into the GEMM epilogue",
        applies_when={"op_kinds": ["matmul"], "backend": ["triton"]},
        steps=["Apply bias and ReLU on the accumulator before the store."],
        evidence={"run_id": "r1", "candidate_ids": ["c3"], "speedup_before": 1.0, "speedup_after": 1.4, "device": "test"},
        example_code="acc = tl.maximum(acc + bias[None, :], 0)",
    )
    listed = runner.invoke(_app(), ["skills", "candidates", "--user-dir", str(tmp_path)])
    assert "fuse-bias-relu" in listed.output
    reviewed = runner.invoke(_app(), ["skills", "review", str(path), "--reviewer", "tester"])
    assert reviewed.exit_code == 0, reviewed.output
    listed = runner.invoke(_app(), ["skills", "candidates", "--user-dir", str(tmp_path)])
    assert "fuse-bias-relu" not in listed.output
