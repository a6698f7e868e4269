"""The server's resources: what a client can read without running anything.

    kernelwright://problems/{+suite}                    problems of a suite (a folder, or a .txt list)
    kernelwright://runs                                 runs in the workspace's kw-runs folder
    kernelwright://runs/{run}/tree                      a run's search tree (no code)
    kernelwright://runs/{run}/candidates/{candidate}    one candidate's code and verdict summary
    kernelwright://runs/{run}/prompts                   the prompts a run stored (LLM asks)
    kernelwright://runs/{run}/prompts/{ask}             one stored prompt, as Markdown

Paths go through the same workspace confinement as tool arguments; a refused or unknown name is a
resource error with a message, never a crash.
"""
# no `from __future__ import annotations`: the MCP SDK reads these signatures at run time
import functools
import json
from typing import Any, Callable

from mcp.server.mcpserver import ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from kernelwright.store import RunStore

from .runs import read_store
from .summaries import trim, verdict_summary
from .validation import NOT_FOUND, ToolInputError
from .workspace import Workspace

JSON = "application/json"
PLAN_CHARS = 400


def readable(method: Callable) -> Callable:
    """Input errors as resource errors (their message reaches the client)."""
    @functools.wraps(method)
    def resource(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except ToolInputError as exc:
            kind = ResourceNotFoundError if exc.code in (NOT_FOUND, "bad_path") else ResourceError
            raise kind(str(exc)) from None

    return resource


def _json(data: Any) -> str:
    return json.dumps(data, indent=1, default=str)


class Resources:
    def __init__(self, ws: Workspace):
        self.ws = ws

    def problems(self, suite: str) -> str:
        """Problem files of a suite: a folder of problem files, or a .txt list of them."""
        from kernelwright.cli.optimize_cmd import suite_problems  # noqa: PLC0415 -- cli.optimize_cmd pulls the search, agents and jinja2 (0.4 s) into the server's start: loaded when a suite is listed

        target = self.ws.folder(suite, "suite")
        found = suite_problems(target)
        if found is None:
            raise ToolInputError(NOT_FOUND, f"{suite!r} is neither a folder of problems nor a .txt list", "suite")
        problems = []
        for path in found[: self.ws.limits.max_listing]:
            try:
                resolved = self.ws.resolve(str(path), "suite")
            except ToolInputError:
                continue  # a list entry outside the workspace is not shown
            if resolved.is_file():
                problems.append({"name": resolved.stem, "path": self.ws.shown(resolved),
                                 "bytes": resolved.stat().st_size})
        return _json({"suite": self.ws.shown(target), "count": len(problems), "problems": problems,
                      "truncated": len(found) > self.ws.limits.max_listing})

    def runs(self) -> str:
        """The runs in the workspace's kw-runs folder, oldest first."""
        rows = []
        for run_dir in self.ws.run_folders():
            stored = read_store(run_dir)
            if stored is None:
                continue
            run = stored["run"]
            rows.append({"run": run_dir.name, "problem": run["problem_name"], "status": run["status"],
                         "best": run.get("best_candidate"), "best_speedup": run.get("best_speedup"),
                         "updated": run.get("updated")})
        return _json({"runs_dir": self.ws.shown(self.ws.runs_dir), "runs": rows})

    def tree(self, run: str) -> str:
        """A run's search tree: every candidate with its parent links, status, speedup, plan."""
        stored = self._store(run)
        nodes = []
        for row in stored["candidates"][: self.ws.limits.max_listing]:
            nodes.append({k: row.get(k) for k in ("id", "parent_id", "search_parent", "action", "status",
                                                  "speedup", "value", "visits", "depth", "approach_key")}
                         | {"plan": trim(row.get("plan"), PLAN_CHARS), "reason": trim(row.get("reason"), PLAN_CHARS)})
        run_row = stored["run"]
        return _json({"run": run, "status": run_row["status"], "best": run_row.get("best_candidate"),
                      "candidates": nodes})

    def candidate(self, run: str, candidate: str) -> str:
        """One candidate's code and verdict summary."""
        stored = self._store(run)
        row = next((r for r in stored["candidates"] if r["id"] == candidate), None)
        if row is None:
            raise ToolInputError(NOT_FOUND, f"run {run} has no candidate {candidate!r}", "candidate")
        verdict = stored["verdict"](candidate)
        return _json({"run": run, "id": candidate, "action": row["action"], "status": row["status"],
                      "parent_id": row.get("parent_id"), "plan": row.get("plan"), "code": row.get("code"),
                      "verdict": verdict_summary(verdict) if verdict else None})

    def prompts(self, run: str) -> str:
        """The LLM prompts a run stored, answered or not."""
        asks = self._asks(run)
        rows = [{"ask": a["id"], "agent": a["agent"], "answered": a["result"] is not None,
                 "uri": f"kernelwright://runs/{run}/prompts/{a['id']}"} for a in asks if a["kind"] == "completion"]
        return _json({"run": run, "prompts": rows})

    def prompt(self, run: str, ask: str) -> str:
        """One stored prompt as Markdown: each message under its role."""
        found = next((a for a in self._asks(run) if a["id"] == ask and a["kind"] == "completion"), None)
        if found is None:
            raise ToolInputError(NOT_FOUND, f"run {run} stored no prompt {ask!r}", "ask")
        messages = ((found["payload"] or {}).get("request") or {}).get("messages") or []
        state = "answered" if found["result"] is not None else "waiting for an answer"
        parts = [f"# Prompt {ask} of run {run} ({found['agent']}, {state})"]
        parts += [f"## {m.get('role', '?')}\n\n{m.get('content', '')}" for m in messages]
        return "\n\n".join(parts) + "\n"

    def _store(self, run: str) -> dict[str, Any]:
        run_dir = self.ws.run_dir(run)
        stored = read_store(run_dir)
        if stored is None:
            raise ToolInputError(NOT_FOUND, f"run {run!r} has no readable store", "run")
        return stored

    def _asks(self, run: str) -> list[dict[str, Any]]:
        with RunStore.in_dir(self.ws.run_dir(run), create=False) as store:
            return store.asks(store.run()["id"])


def register(server, resources: Resources) -> None:
    """Add every resource above to an MCPServer."""
    own_checks = ResourceSecurity(exempt_params={"suite"})  # workspace confinement applies instead
    entries = [
        ("kernelwright://problems/{+suite}", resources.problems, JSON, own_checks),
        ("kernelwright://runs", resources.runs, JSON, None),
        ("kernelwright://runs/{run}/tree", resources.tree, JSON, None),
        ("kernelwright://runs/{run}/candidates/{candidate}", resources.candidate, JSON, None),
        ("kernelwright://runs/{run}/prompts", resources.prompts, JSON, None),
        ("kernelwright://runs/{run}/prompts/{ask}", resources.prompt, "text/markdown", None),
    ]
    for uri, method, mime, security in entries:
        name = method.__name__
        server.resource(uri, name=name, description=(method.__doc__ or "").strip(), mime_type=mime,
                        security=security)(readable(method))

