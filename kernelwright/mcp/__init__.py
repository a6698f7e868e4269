"""kernelwright as a Model Context Protocol server: coding agents use the judge, the profiler, the
skill library and the search through a standard protocol (`kernelwright mcp`, docs/mcp.md).

The server is a thin layer over the Python API. It never imports or runs candidate code in its
own process: every candidate goes through `kernelwright.judge.api.judge`, the sandboxed worker
process the CLI uses; device queries and baselines run in child processes (`jobs`), and optimize
runs are `kernelwright optimize` subprocesses (`runs`), resumable with the CLI's `--resume`.

Modules: `validation` (what inputs are accepted, the one error type), `workspace` (paths confined
to the folders the server was started for), `summaries` (verdicts and profiles trimmed for a
model), `progress` (progress notifications while blocking work runs), `jobs` (child-process
queries), `runs` (background optimize runs), `tools`, `resources`, `server` (wiring, transports).
The MCP SDK (`pip install "kernelwright[mcp]"`) is needed by `tools`, `resources` and `server`
only.
"""

import importlib.util

SDK_REQUIREMENT = "mcp>=2.3,<3"
INSTALL_HINT = ('kernelwright mcp needs the MCP Python SDK (' + SDK_REQUIREMENT + '): '
                'pip install "kernelwright[mcp]"')


def sdk_available() -> bool:
    """Whether an MCP SDK with `MCPServer` (mcp 2.x) is importable, without importing it."""
    try:
        return importlib.util.find_spec("mcp.server.mcpserver") is not None
    except ImportError:  # no `mcp` package at all
        return False
