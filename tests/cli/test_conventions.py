"""CLI conventions shared by every command: -h/--help, --version, help texts that render whole,
the same exit codes for the same kind of failure, and their documentation."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kernelwright import __version__
from kernelwright.cli import exits
from kernelwright.cli.app import app

REPO = Path(__file__).resolve().parents[2]
WIDE = {"COLUMNS": "200", "TERMINAL_WIDTH": "200", "NO_COLOR": "1"}
runner = CliRunner()


def commands(command=None, path=()):
    """(path, click command) for the app and every command and sub-command under it."""
    command = command or typer.main.get_command(app)
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from commands(sub, path + (name,))


def flat(text: str) -> str:
    """Rendered help without box drawing, rich escapes or line wrapping."""
    text = re.sub(r"[│╭╮╰╯─]", " ", text).replace("\\[", "[")
    return " ".join(text.split())


ALL = list(commands())


def test_every_command_is_walked():
    names = {" ".join(path) for path, _ in ALL}
    assert {"optimize", "judge", "baseline", "runs list", "runs show", "skills list", "tune"} <= names


@pytest.mark.parametrize("path, command", ALL, ids=[" ".join(p) or "kernelwright" for p, _ in ALL])
def test_help_renders_every_text_whole(path, command):
    for flag in ("--help", "-h"):
        result = runner.invoke(app, [*path, flag], env=WIDE)
        assert result.exit_code == 0, result.output
        shown = flat(result.output)
        assert "Usage:" in shown
        texts = [p.help for p in command.params if getattr(p, "help", None)]
        if command.help:
            texts.append(command.help.split("\n\n")[0])
        for text in texts:
            # rich markup must not eat anything: "[llm]" stays "[llm]"
            assert flat(text) in shown, f"{' '.join(path)}: help text lost or changed: {text!r}"


def test_version():
    for flag in ("--version", "-V"):
        result = runner.invoke(app, [flag])
        assert result.exit_code == 0 and result.output.strip() == f"kernelwright {__version__}"


def test_skills_help_names_only_commands_that_exist():
    result = runner.invoke(app, ["skills", "-h"], env=WIDE)
    group = dict(ALL)[("skills",)]
    words = set(re.findall(r"[a-z]+", flat(result.output).split("Options")[0].lower()))
    assert "search" not in words
    assert set(group.commands) <= words


BAD_INPUT = [
    (["optimize", "missing_problem.py"], "file not found"),
    (["judge", "missing_problem.py", "missing_candidate.py"], "file not found"),
    (["baseline", "missing_problem.py"], "not found"),
    (["seed", "missing_problem.py"], "no such file"),
    (["runs", "show", "no-such-run", "--dir", "."], "no run"),
    (["skills", "show", "no-such-skill"], "no skill"),
    (["optimize", "--resume", "."], "nothing to resume"),
    (["optimize"], "name a problem"),
    (["optimize", "p.py", "--no-such-flag"], "No such option"),
    (["extract", "missing_model.py:build"], "no file"),
    (["apply", "missing_model.py:build", "."], "holds no run"),
    (["optimize", str(REPO / "examples/problems/scale_bias_gelu.py"), "--config", "missing.toml"], "does not exist"),
]


@pytest.mark.parametrize("args, message", BAD_INPUT, ids=[" ".join(a[:2]) for a, _ in BAD_INPUT])
def test_bad_input_is_exit_2_everywhere(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == exits.EXIT_USAGE, result.output
    assert message in result.output
    assert not (tmp_path / "kw-runs").exists()  # nothing started, nothing left behind


def test_exit_codes_are_documented_once_and_the_same():
    assert (exits.EXIT_OK, exits.EXIT_FAILED, exits.EXIT_USAGE, exits.EXIT_PAUSED, exits.EXIT_INTERRUPTED) == \
        (0, 1, 2, 75, 130)
    from kernelwright.exits import EXIT_INTERRUPTED, EXIT_PAUSED

    assert (EXIT_PAUSED, EXIT_INTERRUPTED) == (exits.EXIT_PAUSED, exits.EXIT_INTERRUPTED)
    doc = (REPO / "docs" / "cli.md").read_text()
    for code in ("0", "1", "2", "75", "130"):
        assert re.search(rf"^\| `{code}` \|", doc, re.M), f"exit code {code} missing from docs/cli.md"
    assert "docs/cli.md" in (REPO / "README.md").read_text()


# names that look like variables but are not read from the environment by users: markers in
# template sources, constants a problem file declares (docs/reference_kernels.md), and what the
# judge passes to its own child processes
NOT_USER_VARIABLES = {"KW_TUNE", "KW_PARAMS", "KW_ALIASES", "KW_BACKWARD", "KW_GRAD_INPUTS", "KW_PARENT_PID",
                      "KW_RLIMIT_AS_BYTES", "KW_JUDGE_SERVICE",
                      # the checker's handshake with the runner it starts: set by the judge, never by a user
                      "KW_RUNNER_FD", "KW_RUNNER_PID", "KW_RUNNER_PROBLEM", "KW_RUNNER_CANDIDATE", "KW_MPS_NOTE",
                      "KW_RESULT_TOKEN", "KW_RUNNER_INSTANCES",
                      # constants of the problem files `kernelwright extract` writes (models/problem_file.py)
                      "KW_MODEL_SPEC", "KW_SEARCH_PATH", "KW_REGION_PATH", "KW_REGION_PATHS", "KW_ARGS", "KW_SHARE"}


def test_one_prefix_and_every_variable_documented():
    from kernelwright import envvars

    doc = (REPO / "docs" / "cli.md").read_text()
    table = {m.group(1).rstrip("_") for m in re.finditer(r"^\| `([A-Z_]+)(?:<ROLE>)?`", doc, re.M)}
    assert {v.name.rstrip("_") if v.prefix else v.name for v in envvars.VARIABLES} - {"OPENAI_API_KEY",
                                                                                  "ANTHROPIC_API_KEY"} <= table
    used = set()
    for path in (REPO / "kernelwright").rglob("*.py"):
        text = path.read_text()
        used |= set(re.findall(r"\b(KW_[A-Z_]*[A-Z])\b", text))
        if path.name != "envvars.py":  # the old names are read in one place only
            assert not re.search(r"""["']KERNELWRIGHT_""", text), f"{path} reads an old KERNELWRIGHT_ name"
    prefixes = tuple(v.name for v in envvars.VARIABLES if v.prefix)
    undocumented = {name for name in used - NOT_USER_VARIABLES if name not in doc and not name.startswith(prefixes)}
    assert not undocumented, f"environment variables missing from docs/cli.md: {sorted(undocumented)}"
    for var in envvars.VARIABLES:
        if var.old:
            assert var.old.rstrip("_") in doc
