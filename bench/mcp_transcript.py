"""`kernelwright mcp` on a GPU, used as an outside coding agent uses it: the MCP SDK's own client
launches the server over stdio and calls device_info, judge, profile and skills_search on a shared
KernelBench problem. Every request and response is written, as it happens, to
$OUT/mcp_transcript.json and $OUT/mcp_transcript.md (the transcript quoted in docs/mcp.md).

    PYTHONPATH=. python bench/mcp_transcript.py                       # 19_ReLU, its Triton candidate
    PYTHONPATH=. python bench/mcp_transcript.py --problem level1/23_Softmax \
        --candidate bench/candidates/23_Softmax__triton.py

Sizes default to the bench sizes (evidence_common.BENCH_OVERRIDES). The server's workspace is the
repository; KernelBench is read where evidence_common finds it (--allow when outside the workspace).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.evidence_common import BENCH_OVERRIDES, kernelbench_root  # noqa: E402

DEFAULT_PROBLEM = "level1/19_ReLU"
DEFAULT_CANDIDATE = "bench/candidates/19_ReLU__triton.py"
CALL_TIMEOUT_S = 300


class Transcript:
    """Calls and answers, rewritten to $OUT after every call (a killed run keeps what it did)."""

    def __init__(self, out: Path, header: dict):
        self.out, self.header, self.calls = out, header, []

    def add(self, tool: str, arguments: dict, shown: dict, result, seconds: float, progress: list) -> None:
        self.calls.append({"tool": tool, "arguments": shown, "is_error": bool(result.is_error),
                           "response": result.structured_content, "seconds": round(seconds, 2),
                           "progress": progress[-8:], "progress_notifications": len(progress)})
        self.write()

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        data = {**self.header, "calls": self.calls}
        (self.out / "mcp_transcript.json").write_text(json.dumps(data, indent=1, default=str))
        (self.out / "mcp_transcript.md").write_text(markdown(data))


def markdown(data: dict) -> str:
    lines = [f"# kernelwright mcp transcript ({data['date']})", "",
             f"Device: {data.get('device', '?')}. Client: the MCP Python SDK {data['sdk']} over stdio; "
             f"server: `{data['server']}`.", ""]
    for i, call in enumerate(data["calls"], 1):
        lines += [f"## {i}. `{call['tool']}` ({call['seconds']} s, {call['progress_notifications']} progress "
                  "notifications)", "", "Request:", "", "```json", json.dumps(call["arguments"], indent=1), "```",
                  "", "Response" + (" (tool error)" if call["is_error"] else "") + ":", "", "```json",
                  json.dumps(call["response"], indent=1, default=str), "```", ""]
    return "\n".join(lines)


async def call(session, transcript: Transcript, tool: str, arguments: dict, shown: dict | None = None) -> dict:
    progress: list = []

    async def on_progress(value, total, message) -> None:
        progress.append([value, message])

    start = time.monotonic()
    result = await session.call_tool(tool, arguments, progress_callback=on_progress)
    transcript.add(tool, arguments, shown or arguments, result, time.monotonic() - start, progress)
    print(f"{tool}: {time.monotonic() - start:.1f} s, error={result.is_error}", flush=True)
    return result.structured_content or {}


async def run(args: argparse.Namespace) -> int:
    from importlib.metadata import version

    from mcp import Client, StdioServerParameters

    kb = kernelbench_root()
    problem = kb / f"{args.problem}.py"
    candidate = (ROOT / args.candidate).read_text()
    sizes = json.loads(args.sizes) if args.sizes else BENCH_OVERRIDES.get(problem.stem, {})
    server = ["-m", "kernelwright", "mcp", "--workspace", str(ROOT)]
    if not problem.resolve().is_relative_to(ROOT):
        server += ["--allow", str(kb)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = Path(os.environ.get("OUT", "out"))
    shown_problem = os.path.relpath(problem, ROOT) if problem.resolve().is_relative_to(ROOT) else str(problem)
    transcript = Transcript(out, {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                  "sdk": version("mcp"), "server": "kernelwright " + " ".join(server[2:]),
                                  "problem": shown_problem, "candidate": args.candidate, "sizes": sizes})
    params = StdioServerParameters(command=sys.executable, args=server, env=env, cwd=str(ROOT))
    code_note = f"<the {len(candidate.splitlines())} lines of {args.candidate}>"
    async with Client(params, read_timeout_seconds=CALL_TIMEOUT_S) as session:
        tools = (await session.list_tools()).tools
        transcript.header["tools"] = [t.name for t in tools]
        device = await call(session, transcript, "device_info", {})
        env_info = device.get("environment") or {}
        transcript.header["device"] = env_info.get("gpu") or device.get("device")
        request = {"problem": shown_problem, "candidate_code": candidate, "sizes": sizes}
        verdict = await call(session, transcript, "judge", request, {**request, "candidate_code": code_note})
        profile = await call(session, transcript, "profile", request, {**request, "candidate_code": code_note})
        report = profile.get("profile") or {}
        actions = [f for f in report.get("findings") or [] if f.get("kind") != "notice"]
        query = (" ".join(actions[0]["tags"]) + " " + actions[0]["text"]) if actions else "elementwise memory-bound"
        bottleneck = report.get("bottleneck") if report.get("bottleneck") in ("memory", "compute", "latency") else None
        await call(session, transcript, "skills_search",
                   {"query": query[:400], "k": 3, **({"bottleneck": bottleneck} if bottleneck else {})})
    print(json.dumps({"verdict": verdict.get("status"), "speedup": verdict.get("speedup"),
                      "profile": report.get("status"), "bottleneck": report.get("bottleneck")}))
    return 0 if verdict.get("status") == "pass" and report else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default=DEFAULT_PROBLEM, help="KernelBench problem, e.g. level1/19_ReLU")
    parser.add_argument("--candidate", default=DEFAULT_CANDIDATE, help="candidate file, relative to the repository")
    parser.add_argument("--sizes", default=None, help="size overrides as JSON (default: the bench sizes)")
    return anyio.run(run, parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
