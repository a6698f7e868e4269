"""Optimize runs in the background: `kernelwright optimize` subprocesses, read through their store.

A run started here is exactly the CLI's: `python -m kernelwright optimize PROBLEM --run-dir DIR
--max-evals N [--llm SPEC]`, in its own process session (it outlives the server, and Ctrl-C on the
server does not reach it), output appended to `DIR/optimize.log`, its pid in `DIR/mcp-process.json`.
With no LLM configured it is the template autopilot. Status and best candidate come from the
run's SQLite store, which the run commits as it goes; a run stopped or killed at any point
continues with `optimize_resume` or `kernelwright optimize --resume DIR`, the same command.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelwright.exits import MEANING
from kernelwright.judge.api import PACKAGE_ROOT
from kernelwright.llm.errors import ConfigError
from kernelwright.llm.spec import parse_spec
from kernelwright.store import RunStore, StoreError

from .summaries import trim, verdict_summary
from .validation import BAD_VALUE, CONFLICT, Limits, ToolInputError, choice, integer, text
from .workspace import RUN_DB, Workspace

PROCESS_FILE = "mcp-process.json"
LOG_FILE = "optimize.log"
BEST_FILE = "best_model_new.py"
BACKENDS = ("triton", "cuda")
LOG_TAIL = 1500
STOP_GRACE_S = 10.0


def llm_spec(ws: Workspace, value: str | None) -> str | None:
    """An LLM spec as `--llm` takes it; files it names (cassettes, exchange folders) must be in the
    workspace. "exchange" alone means prompt files in the run folder."""
    if value is None:
        return None
    spec = text(value, "llm", ws.limits.spec_chars).strip()
    if spec == "exchange":
        return spec

    try:
        parsed = parse_spec(spec)
    except ConfigError as exc:
        raise ToolInputError(BAD_VALUE, str(exc), "llm") from None
    while parsed is not None:
        if parsed.path:
            ws.resolve(parsed.path, "llm", write=parsed.kind in ("record", "exchange"))
        parsed = parsed.inner
    return spec


def size_settings(sizes: dict[str, Any]) -> list[str]:
    """`--set NAME=VALUE` for problem sizes; names of search settings are refused (they would
    change the search, not the problem)."""
    from kernelwright.search.settings import names  # noqa: PLC0415 -- search/ (agents, jinja2: 0.25 s) stays out of the server's start: optimize runs are CLI subprocesses

    taken = set(names())
    args = []
    for name, value in sizes.items():
        if name in taken or name.startswith("judge."):
            raise ToolInputError(BAD_VALUE, f"size {name!r} is a search setting, not a problem size", "sizes")
        args += ["--set", f"{name}={value!r}"]
    return args


class RunManager:
    """The optimize runs of one server: launch, look at, stop."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def limits(self) -> Limits:
        return self.ws.limits

    # ---- start and resume --------------------------------------------------------------------

    def start(self, problem: Path, budget: int, llm: str | None, backend: str, sizes: dict[str, Any]) -> dict:
        from kernelwright.search.drivers.session import new_run_id  # noqa: PLC0415 -- search/ (agents, jinja2: 0.25 s) stays out of the server's start: optimize runs are CLI subprocesses

        integer(budget, "budget", 1, self.limits.max_budget)
        choice(backend, "backend", BACKENDS)
        spec = llm_spec(self.ws, llm)
        run_dir = self.ws.new_run_dir(new_run_id(problem.stem))
        argv = ["optimize", str(problem), "--run-dir", str(run_dir), "--max-evals", str(budget),
                "--backend", backend, *size_settings(sizes), *(["--llm", spec] if spec else [])]
        self._launch(run_dir, argv)
        return {**self.status(run_dir), "started": True,
                "mode": "search" if spec else "autopilot (no LLM given: the built-in template tuner)"}

    def resume(self, run_dir: Path, budget: int | None, llm: str | None) -> dict:
        if self._process(run_dir)["state"] == "running":
            raise ToolInputError(CONFLICT, f"run {run_dir.name} is still running; stop it first", "run")
        spec = llm_spec(self.ws, llm)
        argv = ["optimize", "--resume", str(run_dir)]
        if budget is not None:
            argv += ["--max-evals", str(integer(budget, "budget", 1, self.limits.max_budget))]
        argv += ["--llm", spec] if spec else []
        self._launch(run_dir, argv)
        return {**self.status(run_dir), "resumed": True}

    def _launch(self, run_dir: Path, argv: list[str]) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "kernelwright", *argv, "--quiet"]
        with open(run_dir / LOG_FILE, "ab") as log:
            log.write(f"\n$ kernelwright {' '.join(argv)}  # {_now()}\n".encode())
            log.flush()
            proc = subprocess.Popen(command, cwd=self.ws.root, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[str(run_dir)] = proc
        record = {"pid": proc.pid, "argv": ["kernelwright", *argv], "started": _now(), "server_pid": os.getpid()}
        (run_dir / PROCESS_FILE).write_text(json.dumps(record, indent=1))

    # ---- looking at a run ----------------------------------------------------------------------

    def locate(self, run: str) -> Path:
        return self.ws.run_dir(run, markers=(RUN_DB, PROCESS_FILE))

    def status(self, run_dir: Path) -> dict[str, Any]:
        process = self._process(run_dir)
        out: dict[str, Any] = {"run": run_dir.name, "run_dir": self.ws.shown(run_dir), "process": process}
        stored = read_store(run_dir)
        if stored is None:
            out["status"] = "starting" if process["state"] == "running" else "not started"
        else:
            out.update(_run_status(stored))
            if out["status"] == "running" and process["state"] != "running":
                out["note"] = ("the store says running but no optimize process is alive: it was stopped or "
                               "killed; everything it stored is kept, resume it to go on")
        if process["state"] != "running" and (stored is None or process.get("exit_code") not in (None, 0)):
            out["log_tail"] = _tail(run_dir / LOG_FILE)
        if stored is not None:
            out["resume"] = {"tool": f"optimize_resume(run={run_dir.name!r})",
                             "cli": f"kernelwright optimize --resume {self.ws.shown(run_dir)}"}
        return out

    def best(self, run_dir: Path) -> dict[str, Any]:
        stored = read_store(run_dir)
        out: dict[str, Any] = {"run": run_dir.name, "process": self._process(run_dir)["state"]}
        if stored is None:
            return {**out, "best": None, "message": "the run has not stored anything yet"}
        run, candidates, verdict_of = stored["run"], stored["candidates"], stored["verdict"]
        best = _best_row(run, candidates)
        out["status"] = run["status"]
        if best is None:
            return {**out, "best": None, "message": "no candidate has passed the judge yet"}
        code = best.get("code") or ""
        entry = {"id": best["id"], "action": best.get("action"), "speedup": _speedups(verdict_of(best["id"])),
                 "verdict": verdict_summary(verdict_of(best["id"]) or {}),
                 "code": code if len(code.encode()) <= self.limits.code_bytes else None}
        file = run_dir / BEST_FILE
        if file.is_file() and run.get("best_candidate") == best["id"]:
            entry["file"] = self.ws.shown(file)  # the same code with its evidence header
            entry["evidence"] = _header(file)
        return {**out, "best": entry}

    def stop(self, run_dir: Path) -> dict[str, Any]:
        """Ctrl-C for the run (it marks itself interrupted and stays resumable); then SIGTERM and
        SIGKILL for a process group that does not end (a judge it waits for is killed with it)."""
        process = self._process(run_dir)
        if process["state"] != "running":
            raise ToolInputError(CONFLICT, f"run {run_dir.name} is not running", "run")
        if process.get("outside"):
            raise ToolInputError(CONFLICT, f"run {run_dir.name} was started outside this server (pid "
                                           f"{process['pid']}); stop it where it runs", "run")
        pid = process["pid"]
        for sig, grace in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self._process(run_dir)["state"] == "running":
                time.sleep(0.2)
            if self._process(run_dir)["state"] != "running":
                break
        return self.status(run_dir)

    def _process(self, run_dir: Path) -> dict[str, Any]:
        """Whether this run's `kernelwright optimize` process is alive (ours, or an earlier server's)."""
        proc = self.procs.get(str(run_dir))
        if proc is not None:
            code = proc.poll()
            if code is None:
                return {"state": "running", "pid": proc.pid, "exit_code": None}
            meaning = MEANING.get(code) or ("stopped by a signal" if code < 0 else "error")
            return {"state": "exited", "pid": proc.pid, "exit_code": code, "meaning": meaning}
        record = _read_json(run_dir / PROCESS_FILE)
        pid = record.get("pid") if record else None
        if isinstance(pid, int) and _alive(pid, run_dir):
            return {"state": "running", "pid": pid, "exit_code": None, "note": "started by an earlier server"}
        other = _optimize_process(run_dir)
        if other is not None:
            return {"state": "running", "pid": other, "exit_code": None, "outside": True,
                    "note": "a `kernelwright optimize` started outside this server works on this run"}
        return {"state": "not running", "pid": None, "exit_code": None}


# ---- the store, read-only ------------------------------------------------------------------------


def read_store(run_dir: Path) -> dict[str, Any] | None:
    if not (run_dir / RUN_DB).is_file():
        return None
    try:
        with RunStore.in_dir(run_dir, create=False) as store:
            run = store.run()
            candidates = store.candidates(run["id"])
            verdicts = {c["id"]: store.verdict(run["id"], c["id"]) for c in candidates}
    except StoreError:
        return None
    return {"run": run, "candidates": candidates, "verdict": verdicts.get}


def _run_status(stored: dict[str, Any]) -> dict[str, Any]:
    run, candidates = stored["run"], stored["candidates"]
    settings = run.get("settings") or {}
    counts: dict[str, int] = {}
    for row in candidates:
        if row["action"] != "reference":
            counts[row["status"]] = counts.get(row["status"], 0) + 1
    best = _best_row(run, candidates)
    return {
        "status": run["status"],
        "detail": trim(run.get("status_detail"), LOG_TAIL),
        "mode": "autopilot" if settings.get("mode") == "autotune" else "search",
        "problem": run["problem_path"],
        "budget": {k: v for k, v in (settings.get("limits") or {}).items() if v is not None}
        | ({"max_evals": settings["budget_evals"]} if settings.get("budget_evals") else {}),
        "spend": run.get("spend") or {},
        "candidates": {"total": sum(counts.values()), "by_status": counts},
        "best": {"id": best["id"], "speedup": _speedups(stored["verdict"](best["id"]))} if best else None,
    }


def _best_row(run: dict[str, Any], candidates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's recorded best, else (while it runs) the fastest passing candidate so far."""
    by_id = {row["id"]: row for row in candidates}
    if run.get("best_candidate") in by_id:
        return by_id[run["best_candidate"]]
    passing = [r for r in candidates if r["status"] == "pass" and r["action"] != "reference"]
    return max(passing, key=lambda r: r.get("speedup") or 0.0, default=None)


def _speedups(verdict: dict | None) -> dict[str, float]:
    return {k: round(v, 4) for k, v in ((verdict or {}).get("speedup") or {}).items()}


def _header(path: Path) -> list[str]:
    lines = []
    for line in path.read_text(errors="replace").splitlines()[:40]:
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").rstrip())
    return lines


# ---- processes and files -------------------------------------------------------------------------


def _alive(pid: int, run_dir: Path) -> bool:
    """A live process whose command line names this run folder (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return str(run_dir) in cmdline.replace("\x00", " ")


def _optimize_process(run_dir: Path) -> int | None:
    """The pid of a live `kernelwright optimize` naming this run folder (e.g. a CLI resume in a
    terminal), so a second process is never started on the same run."""
    for entry in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = entry.read_bytes().decode(errors="replace").split("\x00")
        except OSError:
            continue
        if "optimize" in words and any(w.rstrip("/").endswith(run_dir.name) for w in words):
            return int(entry.parent.name)
    return None


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - 4 * LOG_TAIL))
            data = handle.read().decode(errors="replace")
    except OSError:
        return ""
    return data.strip()[-LOG_TAIL:]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
