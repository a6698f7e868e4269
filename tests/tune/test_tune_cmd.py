"""`kernelwright tune` from the command line (its typer command registered on a bare app)."""
import typer
from typer.testing import CliRunner

from kernelwright.cli.tune_cmd import register
from kernelwright.tune.template import parse_template

app = typer.Typer()
register(app)


@app.callback()
def _root():  # a group, so `tune` is invoked by name as in the real app
    pass


runner = CliRunner()


def test_prune_only_on_a_library_template(kernelbench):
    result = runner.invoke(app, ["tune", "library", "--problem", str(kernelbench / "level1/23_Softmax.py"),
                                 "--prune-only"])
    assert result.exit_code == 0, result.output
    assert "feasible" in result.output and "pruned" in result.output


def test_tuning_run_writes_the_best_instance(kernelbench, tmp_path, monkeypatch):
    monkeypatch.setenv("KW_TUNE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "best.py"
    result = runner.invoke(app, ["tune", "library", "--problem", str(kernelbench / "level1/19_ReLU.py"),
                                 "--set", "batch_size=4", "--set", "dim=40", "--budget", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "best" in result.output
    instance = out.read_text()
    assert "class ModelNew" in instance and parse_template(instance).name == "pointwise"


def test_a_sweep_measures_many_configurations_for_two_evaluations(kernelbench, tmp_path, monkeypatch):
    monkeypatch.setenv("KW_TUNE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "best.py"
    result = runner.invoke(app, ["tune", "library", "--problem", str(kernelbench / "level1/19_ReLU.py"),
                                 "--set", "batch_size=4", "--set", "dim=40", "--budget", "2", "--sweep", "4",
                                 "--strategy", "random", "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert '"judge_runs": 2' in result.output and result.output.count('"status": "swept"') >= 2
    assert parse_template(out.read_text()).name == "pointwise"


def test_bad_template_is_a_usage_error(kernelbench, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("class ModelNew:\n    pass\n")
    result = runner.invoke(app, ["tune", str(bad), "--problem", str(kernelbench / "level1/19_ReLU.py")])
    assert result.exit_code == 2 and "KW_TUNE" in result.output


def test_problem_without_template_is_a_usage_error(kernelbench):
    cumsum = kernelbench / "level1/89_cumsum.py"
    result = runner.invoke(app, ["tune", "library", "--problem", str(cumsum)])
    assert result.exit_code == 2 and "cumsum" in result.output


def test_unknown_strategy(kernelbench):
    result = runner.invoke(app, ["tune", "library", "--problem", str(kernelbench / "level1/19_ReLU.py"),
                                 "--strategy", "annealing"])
    assert result.exit_code == 2
