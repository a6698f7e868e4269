"""The optimize and runs commands as a stand-alone CLI, for tests that run them in a subprocess
(kernelwright/cli/app.py, which assembles the full `kernelwright` app, belongs to another owner)."""
from __future__ import annotations

import typer

from kernelwright.cli import optimize_cmd, runs_cmd

app = typer.Typer(add_completion=False)
optimize_cmd.register(app)
runs_cmd.register(app)

if __name__ == "__main__":
    app()
