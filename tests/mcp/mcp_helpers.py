"""Drive `kernelwright mcp` the way an outside agent does: the MCP SDK's own client, talking to the
server in a real subprocess (stdio), or over streamable HTTP."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CALL_TIMEOUT_S = 280


def server_env(cache: Path | None = None) -> dict[str, str]:
    """This process's environment (so TRITON_INTERPRET and the GPU setting carry over), with the
    worktree on the path and no LLM configured (optimize falls back to the autopilot). With `cache`,
    the judge's caches and its CPU device lock live there: judges of other test runs on the same
    machine then never hold this server's judge waiting for the lock."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWRIGHT_LLM")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    if cache is not None:
        env["KW_CACHE_DIR"] = str(cache)
    return env


def stdio_params(workspace: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "kernelwright", "mcp", "--workspace", str(workspace), *extra],
                                 env=server_env(workspace / ".kw-cache"), cwd=str(workspace))


def client(workspace: Path, *extra: str) -> Client:
    """A client of a fresh server subprocess; `--allow EXAMPLES` lets it read the shipped examples."""
    return Client(stdio_params(workspace, "--allow", str(EXAMPLES), *extra), read_timeout_seconds=CALL_TIMEOUT_S)


async def call(session: Client, name: str, arguments: dict[str, Any], progress: list | None = None):
    """(is_error, structured content) of one tool call; progress notifications go to `progress`."""
    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append((value, message))

    result = await session.call_tool(name, arguments, progress_callback=on_progress)
    return result.is_error, result.structured_content


async def read(session: Client, uri: str) -> str:
    result = await session.read_resource(uri)
    return result.contents[0].text


async def wait_for_exit(session: Client, run: str, timeout_s: float = 240) -> dict:
    """optimize_status, polled until the run's process has exited."""
    deadline = time.monotonic() + timeout_s
    while True:
        error, status = await call(session, "optimize_status", {"run": run})
        assert not error, status
        if status["process"]["state"] != "running" or time.monotonic() > deadline:
            return status
        await anyio.sleep(1.0)


def example(name: str) -> tuple[str, str]:
    """(problem path, candidate source) of a shipped example."""
    return str(EXAMPLES / "problems" / f"{name}.py"), (EXAMPLES / "candidates" / f"{name}.py").read_text()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def http_server(workspace: Path, port: int):
    """`kernelwright mcp --http 127.0.0.1:PORT` in a subprocess, until the block ends."""
    proc = subprocess.Popen([sys.executable, "-m", "kernelwright", "mcp", "--workspace", str(workspace),
                             "--allow", str(EXAMPLES), "--http", f"127.0.0.1:{port}"],
                            env=server_env(workspace / ".kw-cache"), cwd=workspace, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read().decode()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
