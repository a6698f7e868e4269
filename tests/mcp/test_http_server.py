"""`kernelwright mcp --http 127.0.0.1:PORT`: the same server over streamable HTTP, on loopback only."""
from __future__ import annotations

import anyio
import pytest
from mcp import Client

from mcp_helpers import CALL_TIMEOUT_S, call, example, free_port, http_server

pytest.importorskip("mcp.server.mcpserver")
pytestmark = pytest.mark.timeout(300)


def test_streamable_http_judges_searches_and_refuses(tmp_path):
    problem, code = example("scale_bias_gelu")

    async def scenario(url: str):
        async with Client(url, read_timeout_seconds=CALL_TIMEOUT_S) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            verdict = await call(session, "judge", {"problem": problem, "candidate_code": code, "trials": 2,
                                                    "time": False})
            skills = await call(session, "skills_search", {"query": "fuse elementwise epilogue", "k": 2})
            refused = await call(session, "judge", {"problem": "/etc/hostname", "candidate_code": code})
        return names, verdict, skills, refused

    with http_server(tmp_path, free_port()) as url:
        names, (v_error, verdict), (s_error, skills), (r_error, refused) = anyio.run(scenario, url)
    assert {"judge", "profile", "optimize_start", "skills_search"} <= names
    assert not v_error and verdict["status"] == "pass" and verdict["trials"]["passed"] == 2, verdict
    assert not s_error and len(skills["skills"]) == 2
    assert r_error and refused["error"]["code"] == "bad_path"


def test_http_needs_host_and_port(tmp_path):
    import subprocess
    import sys

    from mcp_helpers import server_env

    done = subprocess.run([sys.executable, "-m", "kernelwright", "mcp", "--http", "8765"], env=server_env(),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "HOST:PORT" in done.stderr
