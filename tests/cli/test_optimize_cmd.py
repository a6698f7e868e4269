"""`kernelwright optimize` as a new user meets it: flags honoured or refused without an LLM, runs
that never start leave nothing behind, one config file, a missing Triton said before any work,
machine errors never reported as done, suites without an LLM, --json, a git-ignored workspace."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelwright.cli import no_llm
from kernelwright.cli.app import app
from kernelwright.cli.optimize_cmd import build_options
from kernelwright.search.drivers.session import RunOptions, prepare_run_dir
from tiny_problem import write_problems

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "problems" / "scale_bias_gelu.py"
runner = CliRunner()
FAST = ["--set", "judge.trials=2", "--set", "judge.baselines=eager", "--set", "judge.warmup_ms=1",
        "--set", "judge.rep_ms=5", "--set", "judge.min_reps=3", "--set", "judge.max_reps=10"]
BLOCK_TRITON = '''"""Written by a test: this interpreter behaves as if Triton were not installed."""
import sys


class _NoTriton:
    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTriton())
'''


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A working folder and an environment without any LLM configured."""
    for name in ("KW_LLM", "KW_CONFIG", "KERNELWRIGHT_LLM", "KERNELWRIGHT_LLM_CONFIG", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_without_an_llm_each_meaningless_flag_is_refused_before_any_work(user):
    result = runner.invoke(app, ["optimize", str(EXAMPLE), "--backend", "cuda", "--strategy", "beam",
                                 "--max-usd", "2", "--max-calls", "9", "--set", "iterations=3", "--eval", "ray",
                                 "--skills", str(user)])
    assert result.exit_code == 2, result.output
    for flag in ("--backend cuda", "--strategy beam", "--max-usd", "--max-calls", "--set iterations",
                 "--eval ray", "--skills"):
        assert flag in result.output
    assert "give --llm SPEC" in result.output
    assert not (user / "kw-runs").exists()


def test_refusals_name_only_what_was_given():
    assert no_llm.refused_flags(backend="triton", strategy=None, limits={"max_evals": 3, "max_minutes": 1.0},
                                search_sets={}, eval_mode="local", skills=[]) == []


@pytest.mark.parametrize("llm, message", [("bogus", "no provider prefix"), ("openai:gpt-5", "OPENAI_API_KEY")])
def test_a_run_that_never_starts_leaves_no_folder(user, llm, message):
    result = runner.invoke(app, ["optimize", str(EXAMPLE), "--llm", llm, "--quiet"])
    assert result.exit_code == 2 and message in result.output
    assert not (user / "kw-runs").exists()


def test_one_config_file_read_the_same_from_the_working_folder_or_config(user):
    text = '[optimize]\nmax_evals = 2\nmax_minutes = 1.5\n[judge]\ntrials = 3\nrep_ms = 7\n'  # no [llm]
    (user / "kernelwright.toml").write_text(text)
    (user / "elsewhere.toml").write_text(text)
    flags = dict(problem="p.py", resume=None, llm=None, llm_roles=[], backend=None, strategy=None, limits={},
                 sets=[], run_dir=None, eval_mode=None, workspace="kw-runs", skill_dirs=[], eval_workers=None,
                 seed=0)
    found = build_options(**flags, config_file=None)
    given = build_options(**flags, config_file=str(user / "elsewhere.toml"))
    for options in (found, given):
        assert (options.limits.max_evals, options.limits.max_minutes) == (2, 1.5)
        assert (options.judge.trials, options.judge.rep_ms) == (3, 7)
    assert found.config_file == str(user / "kernelwright.toml")  # stored absolute, for a resume elsewhere
    assert given.config_file == str(user / "elsewhere.toml")
    from kernelwright.cli.optimize_cmd import llm_configured

    assert not llm_configured(found) and not llm_configured(given)  # no "Extra inputs" error
    from kernelwright.cli.judge_cmd import build_config

    for config_file in (None, str(user / "elsewhere.toml")):  # judge and baseline read [judge] alike
        judge = build_config(["dim=8"], trials=None, timeout=None, no_time=False, rules=None, device="auto",
                             config_file=config_file)
        assert (judge.trials, judge.rep_ms, judge.overrides) == (3, 7, {"dim": 8})
    assert build_config([], trials=5, timeout=None, no_time=False, rules=None, device="cpu").trials == 5


def test_config_file_errors_are_usage_errors(user):
    (user / "kernelwright.toml").write_text("[optimise]\nmax_evals = 2\n")  # a typo in a table name
    result = runner.invoke(app, ["optimize", str(EXAMPLE)])
    assert result.exit_code == 2 and "optimise" in result.output
    (user / "kernelwright.toml").write_text("[judge]\ntrails = 2\n")
    result = runner.invoke(app, ["judge", str(EXAMPLE), str(EXAMPLE)])
    assert result.exit_code == 2 and "trails" in result.output


def test_missing_triton_is_reported_before_any_work(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCK_TRITON)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHONPATH": f"{tmp_path}:{REPO}"}
    done = subprocess.run([sys.executable, "-m", "kernelwright", "optimize", str(EXAMPLE), "--max-evals", "2"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "Triton is not installed" in done.stderr and "pip install 'triton>=3.0'" in done.stderr
    assert "done" not in done.stderr.split()
    assert not (tmp_path / "kw-runs").exists()


def test_a_machine_error_mid_run_ends_failed_not_done(user, monkeypatch):
    """The judge says "No module named 'triton'" for the first instance: the run stops, exit 1."""
    from kernelwright.tune import autopilot
    from kernelwright.tune.evaluate import Measurement

    verdict = {"status": "error", "stage": "compile", "error": "the candidate does not load: running the module "
               "failed with ModuleNotFoundError: No module named 'triton'"}
    judged = []

    def fake_tuner(problem_path, *, on_result, stop, **kwargs):
        while not stop():
            params = {"BLOCK": 64 * (len(judged) + 1)}
            kwargs["cache"].put("hash", params, "cpu", {}, {})
            judged.append(params)
            on_result(autopilot.AutopilotStep(len(judged) - 1, params, "code", Measurement(
                params, "error", error=verdict["error"], verdict=verdict), "pointwise"))
        return autopilot.AutopilotResult("p", True, "template pointwise: nothing passed", "pointwise")

    monkeypatch.setattr(autopilot, "optimize_without_llm", fake_tuner)
    result = runner.invoke(app, ["optimize", str(EXAMPLE), "--max-evals", "5", "--quiet", "--json"])
    assert result.exit_code == 1, result.output
    assert len(judged) == 1  # the tuner was stopped after the first such verdict
    assert "environment error (not the kernel's fault)" in result.output and "pip install triton" in result.output
    outcome = json.loads(result.stdout[result.stdout.index("{"):])
    assert outcome["status"] == "failed" and outcome["resume"].startswith("kernelwright optimize --resume")


@pytest.mark.timeout(1200)  # a suite of two judged in a subprocess (bounded at 600 s) on a loaded machine
def test_a_suite_without_an_llm_runs_each_problem(user):
    suite = user / "suite"
    write_problems(suite)
    done = subprocess.run([sys.executable, "-m", "kernelwright", "optimize", str(suite), "--max-evals", "1",
                           "--json", *FAST], cwd=user, capture_output=True, text=True, timeout=600,
                          env={**_env(), "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["suite"]
    assert [Path(r["problem"]).name for r in results] == ["relu_x2.py", "relu_x3.py"]
    assert all(r["status"] == "done" and r["best_id"] == "t0" for r in results)
    (suite_dir,) = [p.parent for p in (user / "kw-runs").glob("*/suite.json")]  # one suite folder, git-ignored
    assert sorted(p.parent.name for p in suite_dir.glob("*/run.sqlite")) == ["relu_x2", "relu_x3"]
    assert (user / "kw-runs" / ".gitignore").is_file()
    listed = runner.invoke(app, ["runs", "list", "--json"])  # the workspace's listing finds a suite's runs
    assert listed.exit_code == 0 and {r["problem_name"] for r in json.loads(listed.stdout)} == {"relu_x2", "relu_x3"}
    assert "instances (1 / 1 judged)" in done.stderr  # live progress lines on stderr


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("KW_LLM", "KERNELWRIGHT_LLM", "KW_CONFIG"))} \
        | {"PYTHONPATH": f"{REPO}:{os.environ.get('PYTHONPATH', '')}"}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_default_workspace_is_ignored_by_git(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    options = RunOptions(workspace=str(tmp_path / "kw-runs"))
    run_dir = tmp_path / "kw-runs" / "run-1"
    prepare_run_dir(options, run_dir)
    (run_dir / "run.sqlite").write_text("x")
    (tmp_path / "mine.py").write_text("x")
    shown = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout
    assert shown.split() == ["??", "mine.py"]
    explicit = tmp_path / "my-run"  # a folder the user named is left as the user wants it
    prepare_run_dir(RunOptions(run_dir=str(explicit), workspace=str(tmp_path / "ws")), explicit)
    assert explicit.is_dir() and not (tmp_path / "ws").exists()


@pytest.fixture
def fake_tuner(monkeypatch):
    """The template tuner replaced by tests/fake_tuner.py: runs of a few instances, no judge."""
    from fake_tuner import FakeTuner

    from kernelwright.tune import autopilot

    fake = FakeTuner()
    monkeypatch.setattr(autopilot, "optimize_without_llm", fake)
    return fake


def test_max_evals_zero_is_refused_not_ignored(user, fake_tuner):
    result = runner.invoke(app, ["optimize", str(EXAMPLE), "--max-evals", "0"])
    assert result.exit_code == 2 and "--max-evals 0: nothing would be judged" in result.output
    assert fake_tuner.judged == [] and not (user / "kw-runs").exists()


def test_a_problem_given_with_resume_must_be_the_runs_own(user, fake_tuner):
    problem = write_problems(user / "problems", scales=(2, 3))
    run_dir = user / "run"
    first = runner.invoke(app, ["optimize", str(problem[0]), "--run-dir", str(run_dir), "--max-evals", "2", "--quiet"])
    assert first.exit_code == 0, first.output
    other = runner.invoke(app, ["optimize", str(problem[1]), "--resume", str(run_dir), "--max-evals", "3"])
    assert other.exit_code == 2 and "continues the problem(s) it started with" in other.output
    assert str(problem[1]) in other.output and len(fake_tuner.judged) == 2  # nothing ran
    same = runner.invoke(app, ["optimize", str(problem[0]), "--resume", str(run_dir), "--max-evals", "3", "--quiet"])
    assert same.exit_code == 0, same.output
    assert len(fake_tuner.judged) == 3


@pytest.mark.parametrize("where", ["file", "proc"])
def test_a_run_folder_that_cannot_be_made_is_a_usage_error(user, fake_tuner, where):
    (user / "a_file").write_text("x")
    run_dir = {"file": user / "a_file" / "run", "proc": Path("/proc/kw-no-such-run")}[where]
    for target in (EXAMPLE, EXAMPLE.parent):  # one problem, and a suite
        result = runner.invoke(app, ["optimize", str(target), "--run-dir", str(run_dir), "--max-evals", "1"])
        assert result.exit_code == 2, result.output
        assert f"cannot create the run folder {run_dir}" in result.output and "Traceback" not in result.output
    assert fake_tuner.judged == []


def test_quiet_prints_only_the_outcome(user, fake_tuner):
    result = runner.invoke(app, ["optimize", str(EXAMPLE), "--max-evals", "2", "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no "no LLM configured" line, no progress, no panel
    assert result.stdout.startswith("done: ") and "run folder: " in result.stdout
    loud = runner.invoke(app, ["optimize", str(EXAMPLE), "--max-evals", "2"])
    assert "no LLM configured" in loud.stderr and "instances (2 / 2 judged)" in loud.stderr


def test_a_problem_large_for_the_cpu_interpreter_is_warned_about_before_any_work(user, fake_tuner):
    big = user / "big_relu.py"
    big.write_text(TINY_SIZED.format(size=2**20))  # 4 MB in, 4 MB out: fits the CPU shrink budget as it is
    result = runner.invoke(app, ["optimize", str(big), "--max-evals", "1", "--quiet", "--set", "judge.device=cpu"])
    assert result.exit_code == 0, result.output
    warning = result.stderr
    assert warning.startswith("warning: big_relu is large for a CPU: at the sizes judged here, size=1048576, one "
                              "call moves 8.0 MB") and "--set size=32768" in warning
    assert "stops a stage after 300 s" in warning
    small = runner.invoke(app, ["optimize", str(big), "--max-evals", "1", "--quiet", "--set", "size=4096",
                                "--set", "judge.device=cpu"])
    assert small.exit_code == 0 and small.stderr == ""
    elsewhere = runner.invoke(app, ["optimize", str(big), "--max-evals", "1", "--quiet", "--eval", "batch"])
    assert "large for a CPU" not in elsewhere.output  # judged on the GPU side


TINY_SIZED = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


size = {size}


def get_inputs():
    return [torch.rand(size)]


def get_init_inputs():
    return []
"""
