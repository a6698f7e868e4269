"""`kernelwright device-peaks`: measure (or show) this GPU's copy bandwidth and matmul rates.

The speed-of-light floor of every verdict divides by these; until they are measured, the judge
falls back to datasheet values and says so in each verdict.
"""
from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from . import exits


def register(app: typer.Typer) -> None:
    """Add the GPU commands to the kernelwright app."""
    app.command("device-peaks")(device_peaks)


def device_peaks(
    force: bool = typer.Option(False, "--force", help="measure again even when cached"),
    device: str = typer.Option("cuda", help="CUDA device, e.g. cuda:1"),
    as_json: bool = typer.Option(False, "--json", help="print the record as JSON"),
) -> None:
    """Measure copy bandwidth and fp32/tf32/bf16/fp16/fp64 matmul TFLOP/s; cache them per device and driver."""
    import torch  # noqa: PLC0415 -- the CLI's start stays torch-free (torch takes 1-2 s): loaded when this command runs

    from kernelwright.judge.peaks import ensure_peaks, peaks_path  # noqa: PLC0415 -- judge code beyond what judge/__init__.py loads is kept out of the CLI's start: loaded when this command runs

    if not torch.cuda.is_available():
        typer.echo("device-peaks needs a CUDA GPU; none is visible (torch.cuda.is_available() is False).", err=True)
        raise typer.Exit(exits.EXIT_FAILED)
    peaks = ensure_peaks(device, force=force)
    if as_json:
        typer.echo(json.dumps(peaks.to_dict(), indent=2))
        return
    _print_table(peaks, str(peaks_path()))


def _print_table(peaks, where: str) -> None:
    table = Table(title=f"{peaks.device_name} (driver {peaks.driver}), {peaks.source} {peaks.measured_at}")
    table.add_column("ceiling")
    table.add_column("value", justify="right")
    table.add_row("copy bandwidth (read + write)", f"{peaks.copy_gbps:,.0f} GB/s")
    for kind, value in peaks.tflops.items():
        table.add_row(f"{kind} matmul", f"{value:,.1f} TFLOP/s")
    console = Console()
    console.print(table)
    console.print(f"cached in {where}")


if __name__ == "__main__":  # python -m kernelwright.cli.gpu_cmd [--force]: before the app wires it in
    typer.run(device_peaks)
