"""`kernelwright optimize` flags, config file and suites, without judge runs."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

import e2e_scenarios as scenario
from kw_cli import app

from kernelwright.cli.optimize_cmd import UsageError, build_options, split_sets, suite_problems

TINY = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * {scale}

size = 8

def get_inputs():
    return [torch.rand(size)]

def get_init_inputs():
    return []
"""


def options(**kwargs):
    values = dict(problem="p.py", resume=None, llm=None, llm_roles=[], backend=None, strategy=None, limits={},
                  sets=[], run_dir=None, eval_mode=None, config_file=None, workspace="kw-runs", skill_dirs=[],
                  eval_workers=None, seed=0)
    values.update(kwargs)
    return build_options(**values)


def test_set_routes_search_judge_and_size_values():
    search, judge, sizes = split_sets({"iterations": "4", "judge.trials": "3", "judge.baselines": "eager",
                                       "batch_size": "16"})
    assert search == {"iterations": "4"} and judge == {"trials": 3, "baselines": ("eager",)}
    assert sizes == {"batch_size": 16}
    with pytest.raises(UsageError, match="did you mean 'iterations'"):
        split_sets({"iteration": "4"})
    with pytest.raises(UsageError, match="unknown judge setting"):
        split_sets({"judge.trails": "3"})


def test_flags_beat_the_config_file(tmp_path):
    config = tmp_path / "kw.toml"
    config.write_text('[optimize]\nstrategy = "beam"\nbeam_width = 3\nmax_calls = 50\nbackend = "cuda"\n'
                      '[judge]\ntrials = 7\n')
    opts = options(config_file=str(config), strategy="greedy", limits={"max_calls": 9, "max_evals": 4},
                   sets=["drafts=3", "judge.rep_ms=5"], llm_roles=["coder=openai:gpt-5"])
    assert opts.settings.strategy == "greedy" and opts.settings.beam_width == 3 and opts.settings.drafts == 3
    assert (opts.limits.max_calls, opts.limits.max_evals) == (9, 4)
    assert opts.backend == "cuda" and opts.judge.trials == 7 and opts.judge.rep_ms == 5
    assert opts.llm_roles == {"coder": "openai:gpt-5"}


def test_rules_come_from_the_flag_or_the_config_file(tmp_path):
    assert options().judge.rules == "kernelbench"
    config = tmp_path / "kw.toml"
    config.write_text('[optimize]\nrules = "library"\n')
    assert options(config_file=str(config)).judge.rules == "library"
    assert options(config_file=str(config), rules="strict").judge.rules == "strict"
    config.write_text('[judge]\nrules = "strict"\n')
    assert options(config_file=str(config)).judge.rules == "strict"
    with pytest.raises(UsageError, match="unknown rule set"):
        options(rules="lenient")


@pytest.mark.parametrize("kwargs, message", [
    ({"backend": "hip"}, "--backend"), ({"eval_mode": "cloud"}, "--eval"), ({"strategy": "random"}, "strategy"),
    ({"sets": ["drafts=two"]}, "drafts"), ({"sets": ["novalue"]}, "name=value"),
    ({"llm_roles": ["coder"]}, "name=value"), ({"limits": {"max_calls": -1}}, "max_calls"),
])
def test_bad_values_are_usage_errors(kwargs, message):
    with pytest.raises(UsageError, match=message):
        options(**kwargs)


def test_suite_is_a_folder_or_a_list(tmp_path):
    (tmp_path / "b.py").write_text("")
    (tmp_path / "a.py").write_text("")
    (tmp_path / "_skip.py").write_text("")
    assert [p.name for p in suite_problems(tmp_path)] == ["a.py", "b.py"]
    listing = tmp_path / "suite.txt"
    listing.write_text("# my suite\nb.py\n\na.py  # second\n")
    assert suite_problems(listing) == [tmp_path / "b.py", tmp_path / "a.py"]
    assert suite_problems(tmp_path / "a.py") is None


def test_a_suite_runs_every_problem_in_one_suite_folder_with_one_exchange_folder(tmp_path, monkeypatch):
    suite = tmp_path / "suite"
    suite.mkdir()
    for scale in (2, 3):
        (suite / f"p{scale}.py").write_text(TINY.format(scale=scale))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["optimize", str(suite), "--llm", "exchange", "--quiet",
                                      "--workspace", str(tmp_path / "ws"), "--set", "skills_k=0"])
    assert result.exit_code == 75, result.output  # both runs wait for their first prompt
    (suite_dir,) = [p.parent for p in (tmp_path / "ws").glob("*/suite.json")]
    runs = sorted(suite_dir.glob("*/run.sqlite"))
    assert [db.parent.name for db in runs] == ["p2", "p3"]
    prompts = sorted((suite_dir / "exchange").glob("*.prompt.md"))  # one folder for the whole suite
    assert len(prompts) == 2 and not list(suite_dir.glob("p*/exchange"))
    assert sorted(p.read_text().split("| problem | `")[1].split("`")[0] for p in prompts) == ["p2", "p3"]
    assert f"kernelwright optimize --resume {suite_dir}" in result.output
    listed = CliRunner().invoke(app, ["runs", "list", "--dir", str(suite_dir)])
    assert listed.exit_code == 0 and "p2" in listed.output and "p3" in listed.output
    again = CliRunner().invoke(app, ["optimize", "--resume", str(suite_dir), "--quiet"])
    assert again.exit_code == 75, again.output  # the same prompts still wait; nothing new is written
    assert sorted((suite_dir / "exchange").glob("*.prompt.md")) == prompts


SORT = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values

def get_inputs():
    return [torch.rand(4, 8)]

def get_init_inputs():
    return []
"""


def test_without_an_llm_the_template_autotuner_says_what_it_cannot_do(tmp_path, monkeypatch):
    for name in ("KW_LLM", "KW_CONFIG", "KERNELWRIGHT_LLM", "KERNELWRIGHT_LLM_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    problem = tmp_path / "sort.py"
    problem.write_text(SORT)  # no built-in template sorts: the tuner gives up before judging
    result = CliRunner().invoke(app, ["optimize", str(problem), "--quiet", "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "give --llm" in result.stdout  # the outcome says why; --quiet leaves out the no-LLM line
    assert "no LLM configured" not in result.output
    shown = CliRunner().invoke(app, ["runs", "show", str(tmp_path / "run")])
    assert "autotune" in shown.output and "failed" in shown.output


def test_bad_problem_and_missing_resume_are_clear_errors(tmp_path):
    # bad input is exit 2 everywhere (docs/cli.md), as `kernelwright judge` always did
    result = CliRunner().invoke(app, ["optimize", str(tmp_path / "missing.py"), "--llm", "exchange", "--quiet"])
    assert result.exit_code == 2 and "file not found" in result.output
    result = CliRunner().invoke(app, ["optimize", "--resume", str(tmp_path), "--quiet"])
    assert result.exit_code == 2 and "nothing to resume" in result.output
    result = CliRunner().invoke(app, ["optimize"])
    assert result.exit_code == 2
    shown = CliRunner().invoke(app, ["runs", "show", "nope", "--dir", str(tmp_path)])
    assert shown.exit_code == 2 and "no run" in shown.output


def test_the_scenario_problem_exists(kernelbench):
    assert scenario.PROBLEM.is_file()
