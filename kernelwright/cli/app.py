"""The `kernelwright` command: one typer app; each concept folder registers its own commands."""
from __future__ import annotations

import importlib

import typer

from kernelwright import __version__

app = typer.Typer(
    name="kernelwright",
    help="Turn a PyTorch reference program into faster, verified GPU kernels. "
         "Exit codes: 0 done, 1 failed, 2 usage or bad input, 75 paused, 130 interrupted (docs/cli.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kernelwright {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Turn a PyTorch reference program into faster, verified GPU kernels."""

# modules under kernelwright.cli that expose register(app); order is the order of --help
COMMAND_MODULES = ("optimize_cmd", "runs_cmd", "report_cmd", "kernelbench_cmd", "judge_cmd", "seed_cmd", "gpu_cmd", "tune_cmd",
                   "profile_cmd", "models_cmd", "skills_cmd", "mcp_cmd")

for _name in COMMAND_MODULES:
    importlib.import_module(f"kernelwright.cli.{_name}").register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
