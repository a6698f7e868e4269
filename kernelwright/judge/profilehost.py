"""The profile's processes, started by the trusted supervisor for the confined worker (request `profile`).

Why: CUDA's driver writes the process's own /proc entries while it initialises. The worker is
allowed its own (`confine.OWN_PROC`), but a process it starts (the profile runner, the target ncu
starts) has another pid, whose /proc folder did not exist when the worker's rules were made, and
the worker's Landlock domain stays in force in everything it starts: there CUDA finds no driver.
So the worker's profile (`kernelwright.profile`, through `ServiceExecutor`) asks the supervisor,
which never runs candidate code, to start them:

- `run`: the program (the profile runner) through `launch`, which confines itself afresh with the
  worker's rules and its own /proc entries, then becomes the program (same pid);
- `collect`: Nsight Compute, composed here from validated data (sections, metrics, kernel names,
  launches skipped and counted: names and bounded numbers only, no paths or options), writing its report into this supervisor's
  folder (`trusted/profile/`, which candidate code cannot write), with `launch` + the runner as
  its target. ncu itself runs unconfined like the supervisor (it is NVIDIA's binary, started with
  the supervisor's environment and folder, so no file of the candidate's configures it); its
  target is confined. ncu reaches its target over TCP on the loopback (its `--port` range), so the
  supervisor brings the loopback of the evaluation's network namespace up when profiling;
- `ncu`: `--query-metrics`, or `--import` of a report `collect` wrote, with allow-listed options.

Each reply carries the exit status, the output (bounded), the seconds and whether it timed out;
`ServiceExecutor` turns it into the `RunResult` the profile stages read, as if run locally.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import struct
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from kernelwright.profile.ncu import (NcuPlan, RunResult, collect_command, explain_failure, find_ncu, ncu_env,
                                      run_bounded)

from . import launch, service

OUTPUT_LIMIT = 1 << 20  # characters of a program's output sent back (the tail)
MAX_RECORDED = 20  # launches kept in the supervisor's record
MAX_LAUNCHES = 10000  # bound of a plan's launch count and of the launches skipped before them
_SECTION = re.compile(r"^[A-Za-z0-9_]{1,80}$")
_METRIC = re.compile(r"^[A-Za-z0-9_.]{1,200}$")
_STAGE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
# ncu --import options the worker may ask for, and their values (None: a flag without one)
IMPORT_OPTIONS: dict[str, frozenset[str] | None] = {
    "--csv": None, "--page": frozenset({"raw", "source", "details"}),
    "--print-kernel-base": frozenset({"function", "demangled", "mangled"}),
    "--print-units": frozenset({"base", "auto"}), "--print-source": frozenset({"sass", "ptx", "cuda", "cuda,sass"}),
}


class ProfileHost:
    """The supervisor's side: `handle(message)` is the `profile` request's handler."""

    def __init__(self, folder: Path, launcher_flags: list[str], timeout_cap_s: float,
                 on_launch: Callable[[dict[str, Any]], None] = lambda _: None):
        self.folder, self.flags, self.cap = folder, launcher_flags, timeout_cap_s
        self.on_launch = on_launch
        self._count = 0
        self._lock = threading.Lock()

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        action = message.get("action")
        timeout = max(1.0, min(float(message.get("timeout_s") or self.cap), self.cap))
        self.folder.mkdir(parents=True, exist_ok=True)
        if action == "run":
            return self._run(message, timeout)
        if action == "collect":
            return self._collect(message, timeout)
        if action == "ncu":
            return self._ncu(message, timeout)
        return {"error": f"unknown profile action {action!r}"}

    def _run(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        env = dict(os.environ)
        return self._reply("run", run_bounded(self._launcher(message, env), timeout, env, str(self.folder)))

    def _collect(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        ncu = find_ncu()
        if ncu is None:
            return {"error": "ncu (Nsight Compute) is not installed where the supervisor runs"}
        stage, plan = str(message.get("stage")), _plan(message.get("plan"))
        if not _STAGE.match(stage):
            return {"error": f"not a stage name: {stage!r}"}
        base, env = self.folder / stage, ncu_env(dict(os.environ))
        cmd = collect_command(ncu, plan, base, self._launcher(message, env))
        reply = self._reply("collect", run_bounded(cmd, timeout, env, str(self.folder)))
        return {**reply, "report": f"{base}.ncu-rep"}

    def _ncu(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        ncu = find_ncu()
        if ncu is None:
            return {"error": "ncu (Nsight Compute) is not installed where the supervisor runs"}
        args = [str(a) for a in message.get("args") or []]
        why = self.refuse_ncu_args(args)
        if why:
            return {"error": why}
        result = run_bounded([ncu, *args], timeout, ncu_env(dict(os.environ)), str(self.folder))
        return {"returncode": result.returncode, "output": result.output, "seconds": result.seconds,
                "timed_out": result.timed_out}

    def refuse_ncu_args(self, args: list[str]) -> str:
        """Why ncu must not run with `args` ("" when it may): only the metric list, or an import of a
        report this supervisor wrote with allow-listed options (an ncu option can load files and run
        Python rules, which an unconfined process must never take from a candidate)."""
        if args == ["--query-metrics"]:
            return ""
        if len(args) < 2 or args[0] != "--import":
            return f"not an allowed ncu command: {args[:4]}"
        report = Path(args[1]).resolve()
        if report.parent != self.folder.resolve() or report.suffix != ".ncu-rep":
            return f"not a report of this evaluation: {args[1]}"
        rest = args[2:]
        while rest:
            option, rest = rest[0], rest[1:]
            if option not in IMPORT_OPTIONS:
                return f"not an allowed ncu option: {option}"
            values = IMPORT_OPTIONS[option]
            if values is not None:
                if not rest or rest[0] not in values:
                    return f"not an allowed value of {option}: {rest[:1]}"
                rest = rest[1:]
        return ""

    def _launcher(self, message: dict[str, Any], base_env: dict[str, str]) -> list[str]:
        """`launch` with the supervisor's confinement flags and a spec file (in the supervisor's folder)
        holding what the worker asked for (argv, environment, folder) and `base_env`, the environment
        the launcher is started with (by ncu: plus its own variables, which the program keeps)."""
        argv = message.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("argv must be a non-empty list of strings")
        env = message.get("env") or {}
        if not isinstance(env, dict):
            raise ValueError("env must be an object")
        with self._lock:
            self._count += 1
            spec = self.folder / f"launch-{self._count}.json"
        spec.write_text(json.dumps({"argv": argv, "env": {str(k): str(v) for k, v in env.items()},
                                    "cwd": str(message.get("cwd") or ""), "base_env": launch.digests(base_env)}))
        return [sys.executable, "-m", "kernelwright.judge.launch", *self.flags, str(spec)]

    def _reply(self, action: str, result: RunResult) -> dict[str, Any]:
        output, confinement = split_launch_line(result.output)
        self.on_launch({"action": action, "confinement": confinement, "returncode": result.returncode,
                        "seconds": round(result.seconds, 3)})
        return {"returncode": result.returncode, "output": output[-OUTPUT_LIMIT:], "seconds": result.seconds,
                "timed_out": result.timed_out, "confinement": confinement}


def _plan(data: Any) -> NcuPlan:
    """An NcuPlan from the worker's data, every name checked (ncu reads them as names, never paths)."""
    data = data if isinstance(data, dict) else {}
    sections = [str(s) for s in data.get("sections") or []]
    metrics = [str(m) for m in data.get("metrics") or []]
    names = [str(n) for n in data.get("kernel_names") or []]
    for value, pattern in [*((s, _SECTION) for s in sections), *((m, _METRIC) for m in metrics)]:
        if not pattern.match(value):
            raise ValueError(f"not a section or metric name: {value!r}")
    if any(not re.fullmatch(r"[A-Za-z_][\w:]*", n) for n in names):
        names = []  # collect_command's own rule: no filter rather than one ncu could read differently
    launches, skip = int(data.get("launch_count") or 1), int(data.get("launch_skip") or 0)
    return NcuPlan(sections, metrics, max(1, min(launches, MAX_LAUNCHES)), names, max(0, min(skip, MAX_LAUNCHES)))


def split_launch_line(output: str) -> tuple[str, dict[str, Any]]:
    """(output without the launcher's line, the confinement report it printed). The first such line
    is the launcher's: it is printed before the program (and any candidate code) exists."""
    lines = output.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if launch.MARKER in line:  # anywhere in the line: ncu may prefix what its target prints
            try:
                report = json.loads(line.split(launch.MARKER, 1)[1])
            except ValueError:
                report = {"active": False, "reason": "unreadable launcher report"}
            return "".join(lines[:index] + lines[index + 1:]), report if isinstance(report, dict) else {}
    return output, {"active": False, "reason": "the launcher reported nothing (it did not start)"}


def loopback_up() -> str:
    """Bring `lo` up in this network namespace (a fresh one has it down): ncu reaches its target over
    TCP on the loopback. A description of the outcome."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("16sH22x", b"lo", 0)
            flags = struct.unpack("16sH22x", fcntl.ioctl(sock, siocgifflags, request))[1]
            if flags & iff_up:
                return "loopback already up"
            fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))
    except OSError as exc:
        return f"loopback not brought up: {exc}"
    return "loopback brought up"


# ---------------------------------------------------------------- the worker's side


class ServiceExecutor:
    """`kernelwright.profile.executor.Executor` that asks the judge's supervisor (see the module
    docstring); `confinements` collects what each launched process reported."""

    def __init__(self) -> None:
        self.confinements: list[dict[str, Any]] = []

    def run(self, cmd: list[str], timeout_s: float, env: dict, cwd: str | None = None) -> RunResult:
        return self._call("run", timeout_s, argv=list(cmd), env=dict(env), cwd=cwd or os.getcwd())

    def collect(self, ncu: str, plan: NcuPlan, report_base: Path, program: list[str], timeout_s: float,
                env: dict) -> RunResult:
        return self._call("collect", timeout_s, stage=Path(report_base).name, plan=asdict(plan), argv=list(program),
                          env=dict(env), cwd=os.getcwd())

    def ncu(self, ncu: str, args: list[str], timeout_s: float) -> RunResult:
        return self._call("ncu", timeout_s, args=list(args))

    def _call(self, action: str, timeout_s: float, **fields: Any) -> RunResult:
        try:
            reply = service.call("profile", action=action, timeout_s=timeout_s, **fields)
        except service.ServiceError as exc:
            return RunResult(None, "", 0.0, error=f"the judge's supervisor did not start it: {exc}", kind="failed")
        result = RunResult(reply.get("returncode"), str(reply.get("output") or ""), float(reply.get("seconds") or 0.0),
                           bool(reply.get("timed_out")), report=str(reply.get("report") or ""))
        if "confinement" in reply:
            self.confinements.append(reply["confinement"])
        if result.timed_out or result.returncode != 0:
            result.kind, result.error = explain_failure(result.returncode, result.output, result.timed_out, timeout_s)
        return result
