"""`kernelwright skills ...`: browse the skill library and review candidate skills from runs."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from kernelwright import envvars
from kernelwright.memory import Conditions, SkillFormatError, SkillLibrary, review

from . import exits

DEFAULT_USER_DIR = Path(envvars.get("KW_SKILLS") or "~/.kernelwright/skills").expanduser()

skills_app = typer.Typer(help="The skill library: list (ranked by a query), show, candidates and review.",
                         no_args_is_help=True)
console = Console()

UserDir = typer.Option(DEFAULT_USER_DIR, "--user-dir", help="Folder of user and candidate skills.")


def _library(user_dir: Path):
    return SkillLibrary.load([user_dir] if user_dir.is_dir() else [], encoder=None)


@skills_app.command("list")
def list_skills(
    query: str = typer.Argument("", help="Free text to rank by (BM25); empty lists all."),
    backend: str = typer.Option("any", help="triton, cuda or any"),
    op_kind: list[str] = typer.Option([], "--op", help="Op kinds, e.g. softmax, matmul."),
    bottleneck: str = typer.Option("any", help="memory, compute, latency, launch, host or any"),
    k: int = typer.Option(50, "-k", "--k", help="At most this many."),
    user_dir: Path = UserDir,
) -> None:
    """Skills that apply to the given conditions, best match first."""
    library = _library(user_dir)
    conditions = Conditions(op_kinds=op_kind or None, bottleneck=bottleneck, backend=backend)
    table = Table("name", "title", "backend", "op kinds", "trusted")
    for skill in library.retrieve(query, conditions, k=k, include_untrusted=True):
        when = skill.applies_when
        table.add_row(skill.name, skill.title, ",".join(sorted(when.backend)), ",".join(sorted(when.op_kinds)),
                      "yes" if skill.trusted else "[yellow]no[/]")
    console.print(table)


@skills_app.command("show")
def show(name: str, user_dir: Path = UserDir) -> None:
    """Print one skill."""
    skill = _library(user_dir).get(name)
    if skill is None:
        console.print(f"[red]no skill named {name!r}[/]")
        raise typer.Exit(exits.EXIT_USAGE)
    console.print(Markdown(f"# {skill.title}\n\n{skill.body}"))


@skills_app.command("candidates")
def candidates(user_dir: Path = UserDir) -> None:
    """Candidate skills distilled from runs, waiting for review."""
    table = Table("name", "file", "evidence")
    for skill in _library(user_dir).untrusted():
        table.add_row(skill.name, str(skill.path), str(skill.provenance or ""))
    console.print(table)


@skills_app.command("review")
def review_cmd(path: Path, reviewer: str = typer.Option(None, help="Who reviewed it.")) -> None:
    """Mark a candidate skill trusted after reading it."""
    try:
        skill = review(path, reviewer)
    except SkillFormatError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(exits.EXIT_USAGE) from None
    console.print(f"[green]trusted[/] {skill.name}")


def register(app: typer.Typer) -> None:
    app.add_typer(skills_app, name="skills")
