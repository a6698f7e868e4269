"""`kernelwright extract MODEL_SPEC` and `kernelwright apply MODEL_SPEC RUN_OR_SUITE`: a user's model
in, its hottest submodules out as problems; the optimized ones back in, verified and timed
(docs/models.md).

    kernelwright extract examples/models/transformer_block.py:build --top 3 --out kw-regions/block
    kernelwright optimize kw-regions/block --llm exchange:prompts/        # a suite, as any folder of problems
    kernelwright apply examples/models/transformer_block.py:build kw-runs/<suite-id>

Exit codes: extract 0 written, 2 a spec that does not load or breaks the contract (nothing
written); apply 0 the patched model matches the original, 1 it does not (or no region could be put
back), 2 bad input.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelwright.files import atomic_write
from kernelwright.store import StoreError
from kernelwright.store.suite import SuiteError

from . import exits

console = Console(stderr=True)

SPEC_HELP = "path/to/file.py:build or package.module:build, a callable returning (model, example_inputs)"
INPUTS_HELP = "a second callable (same forms) returning the example inputs; then MODEL_SPEC may return the model alone"


def _spec_stem(spec: str) -> str:
    where, _, name = spec.rpartition(":")
    return f"{Path(where).stem if where.endswith('.py') else where.rsplit('.', 1)[-1]}-{name}"


def extract(
    spec: str = typer.Argument(..., metavar="MODEL_SPEC", help=SPEC_HELP),
    inputs: Optional[str] = typer.Option(None, "--inputs", help=INPUTS_HELP),
    top: int = typer.Option(5, "--top", min=1, help="write the K regions that take the most time"),
    backward: bool = typer.Option(False, "--backward", help="profile forward and backward; the problems "
                                  "declare KW_BACKWARD (gradients are checked and timed)"),
    out: Optional[Path] = typer.Option(None, "--out", help="folder for the problems and regions.json "
                                       "(default kw-regions/<file>-<callable>)"),
    leaves: bool = typer.Option(False, "--leaves", help="only submodules without children (single layers)"),
    device: str = typer.Option("auto", "--device", help="auto (cuda when available), cuda, cuda:N or cpu"),
    json_out: bool = typer.Option(False, "--json", help="print the manifest as JSON on stdout"),
) -> None:
    """Profile a model, rank its submodules by time, write the top K as KernelBench problems."""
    from kernelwright.models import ModelSpecError  # noqa: PLC0415 -- models/ imports torch at its top (1-2 s): kept out of the CLI's start
    from kernelwright.models.attribution import BackwardSetupError  # noqa: PLC0415 -- models/ imports torch at its top (1-2 s): kept out of the CLI's start
    from kernelwright.models.extract import extract as run_extract  # noqa: PLC0415 -- models/ imports torch at its top (1-2 s): kept out of the CLI's start

    folder = out or Path("kw-regions") / _spec_stem(spec)
    try:
        result = run_extract(spec, folder, inputs, top, backward, device, leaves)
    except (ModelSpecError, BackwardSetupError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(exits.EXIT_USAGE) from None
    manifest = result.manifest
    if json_out:
        typer.echo(json.dumps(manifest, indent=2))
    clock = "GPU kernel time" if manifest["clock"] == "cuda" else "CPU time"
    lines = [f"step: {manifest['step_us'] / 1e3:.4g} ms of {clock}; {len(manifest['regions'])} region(s) "
             f"cover {manifest['covered_share']:.1%}"]
    for region in manifest["regions"]:
        more = f" (+{len(region['paths']) - 1} identical)" if len(region["paths"]) > 1 else ""
        lines.append(f"  {region['share']:6.1%}  {region['path']}{more}  {region['class']} -> {region['file']}")
    for skipped in manifest["skipped"]:
        lines.append(f"  skipped {skipped['paths'][0]} ({skipped['share']:.1%}): {skipped['reason']}")
    lines.append(f"written: {result.out_dir}  (optimize it as a suite: kernelwright optimize {result.out_dir})")
    (console if json_out else Console()).print(escape("\n".join(lines)))


def _interpret_triton_without_gpu(device: str) -> None:
    """Candidates' Triton kernels run here, in this process: without a GPU, under Triton's
    interpreter (as the judge runs them on a CPU), set before Triton is first imported."""
    import torch  # noqa: PLC0415 -- the CLI's start stays torch-free (torch takes 1-2 s): loaded when this command runs

    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        os.environ.setdefault("TRITON_INTERPRET", "1")


def apply(
    spec: str = typer.Argument(..., metavar="MODEL_SPEC", help=SPEC_HELP),
    target: Path = typer.Argument(..., metavar="RUN_OR_SUITE", help="the run or suite that optimized the extracted problems"),
    inputs: Optional[str] = typer.Option(None, "--inputs", help=INPUTS_HELP),
    backward: bool = typer.Option(False, "--backward", help="verify gradients too and time forward+backward"),
    out: Optional[Path] = typer.Option(None, "--out", help="the report as JSON (default RUN_OR_SUITE/apply.json)"),
    trials: int = typer.Option(3, "--trials", min=1, help="fresh inputs the patched model is verified on"),
    no_time: bool = typer.Option(False, "--no-time", help="verify only"),
    device: str = typer.Option("auto", "--device", help="auto (cuda when available), cuda, cuda:N or cpu"),
    json_out: bool = typer.Option(False, "--json", help="print the report as JSON on stdout"),
) -> None:
    """Put each region's best correct candidate back into the model, verify it, time it end to end."""
    _interpret_triton_without_gpu(device)
    from kernelwright.models import ModelSpecError  # noqa: PLC0415 -- models/ imports torch at its top (1-2 s): kept out of the CLI's start
    from kernelwright.models.apply import apply_candidates, summary_text  # noqa: PLC0415 -- models/ imports torch at its top (1-2 s): kept out of the CLI's start

    try:
        report, _ = apply_candidates(spec, target, inputs, backward, device, trials, not no_time)
    except (ModelSpecError, SuiteError, StoreError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(exits.EXIT_USAGE) from None
    path = out or target / "apply.json"
    atomic_write(path, json.dumps(report.to_dict(), indent=2) + "\n")
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    (console if json_out else Console()).print(escape(summary_text(report) + f"\nreport: {path}"))
    if not report.correct or not any(r.applied for r in report.regions):
        raise typer.Exit(exits.EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.command("extract")(extract)
    app.command("apply")(apply)
