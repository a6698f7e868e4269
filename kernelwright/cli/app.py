"""The `kernelwright` command: one typer app; each concept folder registers its own commands."""
from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="kernelwright",
    help="Turn a PyTorch reference program into faster, verified GPU kernels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# modules under kernelwright.cli that expose register(app); order is the order of --help
COMMAND_MODULES = ("optimize_cmd", "runs_cmd", "judge_cmd", "gpu_cmd", "tune_cmd", "profile_cmd", "skills_cmd",
                   "mcp_cmd")

for _name in COMMAND_MODULES:
    importlib.import_module(f"kernelwright.cli.{_name}").register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
