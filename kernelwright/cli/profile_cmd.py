"""`kernelwright profile PROBLEM CANDIDATE`: bottleneck class and plain-language findings."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markdown import Markdown

from kernelwright.problem import ProblemError, parse_override

from . import exits


def profile(
    problem: Path = typer.Argument(..., help="KernelBench-format problem file."),
    candidate: Path = typer.Argument(..., help="File defining ModelNew."),
    set_: list[str] = typer.Option([], "--set", help="Size override name=value (repeatable)."),
    no_ncu: bool = typer.Option(False, "--no-ncu", help="Timeline, compiler resources and SASS only."),
    max_kernels: Optional[int] = typer.Option(None, help="At most this many kernel launches replayed by ncu "
                                              "(default: the judge's, ProfileConfig.max_kernels)."),
    timeout: float = typer.Option(300.0, help="Seconds per profiling subprocess."),
    artifacts: Path = typer.Option(None, help="Keep raw CSVs, cubins and SASS listings here."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Profile a candidate: classify the bottleneck first, then explain it with numbers."""
    from kernelwright.profile import ProfileConfig, profile_candidate  # noqa: PLC0415 -- it loads profile/ (23 modules, 60 ms): kept out of the CLI's start

    console = Console()
    try:
        overrides = dict(parse_override(s) for s in set_)
    except ProblemError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(exits.EXIT_USAGE) from None
    import torch  # noqa: PLC0415 -- the CLI's start stays torch-free (torch takes 1-2 s): loaded when this command runs

    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = {} if device == "cuda" else {"TRITON_INTERPRET": "1"}  # Triton kernels run interpreted on a CPU
    bound = {} if max_kernels is None else {"max_kernels": max_kernels}  # else the one default the judge uses
    config = ProfileConfig(use_ncu=not no_ncu, timeout_s=timeout, overrides=overrides, device=device, env=env,
                           artifacts_dir=str(artifacts) if artifacts else None, shrink=device == "cpu", **bound)
    report = profile_candidate(problem, candidate, config)
    if json_out:
        typer.echo(report.to_json())
        return
    console.print(Markdown(report.summary_text()))


def register(app: typer.Typer) -> None:
    app.command("profile")(profile)
