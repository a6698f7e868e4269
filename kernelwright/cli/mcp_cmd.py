"""`kernelwright mcp`: serve the judge, profiler, skills and optimize runs to MCP clients.

Exit status: 2 when the MCP SDK is missing or an option is wrong; otherwise the server runs until
its client disconnects (stdio) or it is stopped (HTTP). See docs/mcp.md.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelwright.mcp import INSTALL_HINT, sdk_available
from kernelwright.mcp.workspace import Workspace

from . import exits


def mcp_command(
    workspace: Annotated[Path, typer.Option("--workspace", metavar="DIR", help="folder the server may read and write (problems, "
                                            "runs under kw-runs/); paths from clients are confined to it")] = Path("."),
    allow: Annotated[Optional[list[Path]], typer.Option("--allow", metavar="DIR", help="extra folder problems may be read from "
                                                        "(read-only; repeatable), e.g. ../shared/kernelbench")] = None,
    http: Annotated[Optional[str], typer.Option("--http", metavar="HOST:PORT", help="HOST:PORT: serve streamable HTTP at "
                                                "http://HOST:PORT/mcp instead of stdio")] = None,
) -> None:
    """Run kernelwright as a Model Context Protocol server (stdio by default)."""
    if not sdk_available():
        typer.echo(INSTALL_HINT, err=True)
        raise typer.Exit(exits.EXIT_USAGE)
    from kernelwright.mcp.server import parse_http, serve  # noqa: PLC0415 -- the MCP server loads the mcp SDK (optional) and the judge's api.py (0.9 s): loaded when it is served

    try:
        ws = Workspace.open(workspace, allow or [])
        if http is not None:
            parse_http(http)
    except ValueError as exc:
        typer.echo(f"kernelwright mcp: {exc}", err=True)
        raise typer.Exit(exits.EXIT_USAGE) from None
    serve(ws, http)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_command)
