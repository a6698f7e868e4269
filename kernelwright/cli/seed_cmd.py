"""`kernelwright seed PROBLEM [--out FILE]`: torch.compile's own kernels as a standalone ModelNew."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from kernelwright.problem import ProblemError, parse_override
from kernelwright.rules import UnknownRuleSet

from .exits import EXIT_FAILED, EXIT_USAGE


def seed(
    problem: Path = typer.Argument(..., help="KernelBench-format problem file."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where to write the seed (default: "
                                       "PROBLEM's name with _seed.py, in the current folder)."),
    rules: str = typer.Option("kernelbench", help="The rule set the seed must be expected to pass under: "
                              "kernelbench, library or strict."),
    gemm: str = typer.Option("auto", help="Matmuls: extern (inductor's cuBLAS/ATen calls kept, kernelbench only), "
                             "native (written as Triton tl.dot), template (inductor's Triton GEMM templates, GPU), "
                             "auto (extern under kernelbench, else native)."),
    set_: list[str] = typer.Option([], "--set", help="Size override name=value (repeatable)."),
    device: str = typer.Option("auto", help="auto, cuda or cpu (a CPU writes Triton run by the interpreter)."),
    no_check: bool = typer.Option(False, "--no-check", help="Skip loading the file and comparing it with the "
                                  "reference before it is written."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Write inductor's Triton kernels for PROBLEM as a ModelNew the judge verifies like any candidate."""
    from kernelwright.seed import SeedError, SeedOptions, seed_problem  # noqa: PLC0415 -- seed/__init__.py takes 20 ms to import: kept out of the CLI's start

    console = Console(stderr=True, soft_wrap=True)  # paths and reasons stay on one line each
    try:
        overrides = dict(parse_override(s) for s in set_)
        options = SeedOptions(rules=rules, gemm=gemm, overrides=overrides, device=device, check=not no_check)
    except (ProblemError, UnknownRuleSet) as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(EXIT_USAGE) from None
    if not problem.is_file():
        console.print(f"[red]{problem}: no such file[/]")
        raise typer.Exit(EXIT_USAGE)
    _interpret_without_gpu(device)
    target = out or Path(f"{problem.stem}_seed.py")
    try:
        written = seed_problem(problem, target, options)
    except SeedError as exc:
        console.print(f"[red]no seed written for {problem}: {exc}[/]")
        raise typer.Exit(EXIT_FAILED) from None
    if json_out:
        typer.echo(json.dumps({"out": str(target), "kernels": written.kernels, "torch_calls": written.torch_calls,
                               "rule_sets": written.rule_sets, "notes": written.notes}))
        return
    expected = ", ".join(n for n, why in written.rule_sets.items() if not why)
    console.print(f"wrote {target}: {len(written.kernels)} Triton kernel(s), expected to pass under {expected}")
    for name, why in written.rule_sets.items():
        if why:
            console.print(f"  not {name}: {why}")
    for note in written.notes:
        console.print(f"  note: {note}")
    console.print(f"judge it: kernelwright judge {problem} {target} --rules {options.rules}")


def _interpret_without_gpu(device: str) -> None:
    """Triton has no CPU backend: on a CPU its kernels run under the interpreter."""
    if device == "cuda":
        return
    import torch  # noqa: PLC0415 -- the CLI's start stays torch-free (torch takes 1-2 s): loaded when this command runs

    if device == "cpu" or not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def register(app: typer.Typer) -> None:
    app.command("seed")(seed)
