"""Wiring: one MCPServer with kernelwright's tools and resources, served over stdio or HTTP.

    kernelwright mcp                                  stdio (what MCP clients launch)
    kernelwright mcp --http 127.0.0.1:8765            streamable HTTP at http://127.0.0.1:8765/mcp
    kernelwright mcp --workspace DIR --allow ../shared/kernelbench

Nothing may be written to stdout but the protocol: the server logs to stderr, and every child
process (judge workers, jobs, optimize runs) has its output captured or redirected to a file.
"""
from __future__ import annotations

import ipaddress
import logging
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from kernelwright import __version__

from . import resources as resource_module
from .tools import READ_ONLY, TOOL_NAMES, Tools, answers, refused
from .validation import BAD_VALUE, NOT_FOUND, ToolInputError
from .workspace import Workspace

INSTRUCTIONS = """\
kernelwright checks and speeds up GPU kernels. A problem is a PyTorch file in KernelBench format
(Model, get_inputs, get_init_inputs); a candidate is Python source defining ModelNew with Triton or
CUDA C++ kernels. `judge` runs a candidate in a sandbox and returns a verdict (pass/fail, errors with
the candidate's line, guard flags, speedups vs eager and torch.compile, % of the speed-of-light
floor). `profile` explains a passing candidate's bottleneck. `skills_search`/`skill` give optimisation
techniques. `optimize_start` runs kernelwright's own search in the background. Paths are relative to
the workspace the server was started in."""


class KernelwrightServer(MCPServer):
    """MCPServer whose refusals of malformed calls (unknown tool, arguments of the wrong type or
    missing) are structured tool errors like every other refusal."""

    async def call_tool(self, name, arguments, context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if name not in TOOL_NAMES:
                return refused(ToolInputError(NOT_FOUND, f"no tool named {name!r}; tools: {', '.join(TOOL_NAMES)}"))
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in cause.errors()]
                first = str(cause.errors()[0]["loc"][0]) if cause.errors() else None
                return refused(ToolInputError(BAD_VALUE, "invalid arguments: " + "; ".join(problems), first))
            return refused(ToolInputError(BAD_VALUE, str(exc)))


def build_server(ws: Workspace) -> MCPServer:
    """An MCPServer whose tools and resources work on `ws`."""
    server = KernelwrightServer("kernelwright", title="kernelwright", version=__version__,
                                instructions=INSTRUCTIONS, log_level="WARNING")
    tools = Tools(ws)
    for name in TOOL_NAMES:
        read_only = name in READ_ONLY
        hints = ToolAnnotations(read_only_hint=read_only, destructive_hint=None if read_only else False,
                                open_world_hint=False)
        method = getattr(tools, name)
        server.add_tool(answers(method), name=name, description=_description(method), annotations=hints)
    resource_module.register(server, resource_module.Resources(ws))
    return server


def _description(method) -> str:
    return " ".join((method.__doc__ or "").split())


def parse_http(value: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 as [::1]:PORT) -> (host, port); ValueError with the accepted form."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--http {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(ws: Workspace, http: str | None = None) -> None:
    """Serve until the client disconnects (stdio) or the process is stopped (HTTP)."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="kernelwright mcp: %(message)s")
    server = build_server(ws)
    if http is None:
        server.run("stdio")
        return
    host, port = parse_http(http)
    if not is_loopback(host):
        logging.getLogger(__name__).warning(
            "serving on %s without authentication: anyone who reaches this port can run candidates in the "
            "judge's sandbox and start optimize runs in %s", host, ws.root)
    sys.stderr.write(f"kernelwright mcp: streamable HTTP at http://{http}/mcp (workspace {ws.root})\n")
    server.run("streamable-http", host=host, port=port)
