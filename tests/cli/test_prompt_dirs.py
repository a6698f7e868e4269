"""`[optimize] prompts` in the config file: prompt folders that override the built-in prompt files
by name reach the agents of a run (and are checked before any run folder exists)."""
from __future__ import annotations

import pytest

from kernelwright.cli.optimize_cmd import UsageError, build_options
from kernelwright.search.drivers.modes import run_optimization
from kernelwright.search.drivers.session import RunOptions
from kernelwright.search.settings import Settings

FLAGS = dict(problem="p.py", resume=None, llm=None, llm_roles=[], backend=None, strategy=None, limits={},
             sets=[], run_dir=None, eval_mode=None, workspace="kw-runs", skill_dirs=[], eval_workers=None, seed=0)
PROBLEM = ("import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n"
           "        return torch.relu(x)\nn = 8\ndef get_inputs():\n    return [torch.rand(n)]\n"
           "def get_init_inputs():\n    return []\n")


def test_the_config_names_prompt_folders_relative_to_itself(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "my_prompts").mkdir()
    (tmp_path / "cfg" / "kw.toml").write_text('[optimize]\nprompts = ["my_prompts"]\n')
    options = build_options(**FLAGS, config_file=str(tmp_path / "cfg" / "kw.toml"))
    assert options.prompt_dirs == [str(tmp_path / "cfg" / "my_prompts")]
    (tmp_path / "cfg" / "kw.toml").write_text('[optimize]\nprompts = "missing"\n')
    with pytest.raises(UsageError, match="prompts: prompt folder .*missing does not exist"):
        build_options(**FLAGS, config_file=str(tmp_path / "cfg" / "kw.toml"))


def test_a_run_asks_with_the_users_prompt_files(tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "planner.md.j2").write_text(
        "CUSTOM PLANNER for {{ ctx.problem_name }}\n{{ s.task }}\n{% include 'format_planner.md.j2' %}\n")
    problem = tmp_path / "p.py"
    problem.write_text(PROBLEM)
    run_dir = tmp_path / "run"
    options = RunOptions(problem=str(problem), llm="exchange", run_dir=str(run_dir), prompt_dirs=[str(prompts)],
                         settings=Settings(strategy="greedy", drafts=1, iterations=1, skills_k=0))
    assert run_optimization(options).status == "paused"
    written = [p.read_text() for p in (run_dir / "exchange").rglob("*") if p.is_file()]
    assert any("CUSTOM PLANNER for p" in text for text in written)
