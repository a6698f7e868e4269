"""The trusted supervisor of one evaluation:
`python -m kernelwright.judge.supervisor REQUEST.json --phase evaluate|compile --parent-pid PID`.

The sandbox starts this process. It never imports torch or candidate code.

1. It becomes a child subreaper, so whatever the candidate starts, in any session or process
   group, stays in its tree.
2. It makes what the two processes below it need but cannot make once confined (cache and lock
   folders, the runner's folder with a copy of the candidate, copies of a problem given as text),
   reads the result token from its stdin, opens the service socket (`service`) and, on a GPU,
   starts the evaluation's private MPS server (`mps`).
3. It forks the runner (`judge.runner`, the candidate's process) and the checker
   (`judge.checker`, the judge's), joined by a socket pair (the call channel, `judge.protocol`).
   Each removes from its environment what it must not see and confines itself (`confine.confine`)
   before anything else: the runner may write only its own folder and cannot read the checker's
   folders, this process's, the request or the judge's caches of reference outputs and
   baselines; the checker may write only its work and output folders. Neither may signal or
   ptrace outside its domain, except that the checker may stop and continue the runner.
4. It answers requests (`service`), by who asks (SO_PEERCRED): the runner may ask only `build`
   (the trusted builder, `buildservice`); the checker every other: `seal` (the baseline
   parameters, once, before the runner loads anything), `baselines` (measured by
   `baseline.get_baselines` from this process, for the sealed parameters, only once no process
   of the runner's is left: it kills them first), `lock` (device lock files), `profile` (the
   profile's processes, each confined afresh by `launch`, ncu composed here: `profilehost`),
   `references` and `store_references` (the reference store, `refstore`: one lookup and one store,
   only before the seal), `judge_kernels` and `store_judge_kernels` (the judge's own compiled
   kernels, `judgekernels`: only before the seal), `runner_status` (how the runner ended).
5. When the checker has ended (or on SIGTERM: the judge's time limit), it kills every process left
   in its tree and counts those that were the candidate's (they carry no_new_privs and are not the
   checker), stops the MPS server, writes `trusted/supervisor.json` (a folder neither child can
   write), and exits the way the checker did: same exit code, or killed by the same signal.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
import faulthandler
import socket
import tempfile

from kernelwright.files import atomic_write

from . import proctree, service
from .request import JudgeRequest, source_filename
from .config import JudgeConfig

REPORT_FILE = "supervisor.json"
TRUSTED_FOLDER = "trusted"
RUNNER_FOLDER = "runner"  # the runner's cwd, HOME, TMPDIR and caches: all it may write
RUNNER_OPS = frozenset({"build"})  # what the runner may ask of the service
# the judge's own variables: the candidate's process gets none of them
SUPERVISOR_ONLY = ("KW_CACHE_DIR", "KW_PARENT_PID")
# what only the candidate's process may see: with CUDA_LAUNCH_BLOCKING=1 (the rerun that locates a
# fault, judge/locate.py) the checker's stream waits on the runner's flags would block its host
# thread, and a runner that faults before writing `done` left the checker waiting until the time
# limit, never reading the runner's error (H200, 2026-11-28: "the rerun ... ran out of time")
RUNNER_ONLY = ("CUDA_LAUNCH_BLOCKING",)
_LOCK_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,120}$")
PR_SET_PDEATHSIG = 1


@dataclass
class Supervision:
    """What the supervisor saw; written to trusted/supervisor.json for the judging process."""

    confinement: dict[str, Any] = field(default_factory=dict)  # the runner's: where candidate code runs
    checker_confinement: dict[str, Any] = field(default_factory=dict)
    mps: str = ""  # "active", or why the evaluation has no MPS server
    runner_status: int | None = None  # os.waitstatus_to_exitcode of the runner, when it was reaped
    subreaper: bool = False
    killed: int = 0  # processes the candidate left running, killed after the worker ended
    killed_pids: list[int] = field(default_factory=list)
    killed_other: int = 0  # the supervisor's own helpers still running (a build the worker no longer waits for)
    service: str = ""
    builds: list[str] = field(default_factory=list)  # extensions this supervisor published
    rewrote: dict[str, list[int]] = field(default_factory=dict)  # baseline records it rewrote -> their stat
    sealed: bool = False
    references: dict[str, Any] = field(default_factory=dict)  # the reference store: key, hit, stored
    launched: list[dict[str, Any]] = field(default_factory=list)  # profiled processes started (`profilehost`)
    network: str = ""  # what profiling needed of the network namespace (its loopback up)
    worker_status: int | None = None  # os.waitstatus_to_exitcode of the checker
    terminated: bool = False  # stopped by SIGTERM (the judge's time limit, or the judge died)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Supervisor:
    def __init__(self, request_path: Path, phase: str, parent_pid: int):
        self.request_path, self.phase, self.parent_pid = request_path, phase, parent_pid
        self.request = JudgeRequest.load(request_path)
        self.config = JudgeConfig.from_dict(self.request.config)
        self.scratch = request_path.resolve().parent
        self.trusted = self.scratch / TRUSTED_FOLDER
        self.cache = Path(self.config.cache_dir or Path.home() / ".cache" / "kernelwright")
        self.record = Supervision()
        self.pid = os.getpid()
        self.worker_pid = 0  # the checker
        self.runner_pid = 0
        self.runner = self.scratch / RUNNER_FOLDER
        self.token = ""
        self.mps = None  # mps.Mps, on a GPU
        self.sealed: dict[str, Any] | None = None
        self.reference_key: str | None = None  # the store's key, from the worker's one lookup
        self._reference_fields: dict[str, Any] = {}
        self._helpers: set[int] = set()  # builder processes, spared by the count (not the kill)
        self._candidate_killed: set[int] = set()  # the candidate's processes killed before the clean-up
        self._profile_host = None  # profilehost.ProfileHost, made on the first `profile` request
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ preparation

    def prepare(self) -> None:
        from .gpulock import lock_folder  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        for folder in (self.trusted / "tmp", self.trusted / "home", self.cache / "torch_extensions",
                       self.cache / "baselines", lock_folder("cpu", self.cache), lock_folder("cuda")):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # the worker's build cache or lock says what is missing
                self.record.notes.append(f"cannot create {folder}: {exc}")
        _ensure_uvm_device()
        if self.config.profile:
            from .profilehost import loopback_up  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

            self.record.network = loopback_up()
        if self.request.problem_source is not None and not self.request.problem_path:
            copy = self.trusted / "problem" / source_filename(self.request.problem_name)
            copy.parent.mkdir(exist_ok=True)
            copy.write_text(self.request.problem_source)
        self.prepare_runner()
        self.record.subreaper = proctree.become_subreaper()  # before the MPS daemon forks away
        if self.phase == "evaluate" and _gpu_expected(self.config) and self.config.mps:
            from . import mps  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

            self.mps = mps.start(self.trusted / "mps")
            self.record.mps = "active" if self.mps.active else self.mps.note
        else:
            self.record.mps = "no GPU in this phase" if self.config.mps else "switched off (config.mps is False)"

    def prepare_runner(self) -> None:
        """The runner's folder (its cwd, HOME, TMPDIR and caches) with its own copies of the
        candidate and, when given as text, the problem: the runner reads nothing of the checker's."""
        for sub in ("home", "tmp", ".cache", "problem"):
            (self.runner / sub).mkdir(parents=True, exist_ok=True)
        candidate = self.runner / source_filename(self.request.candidate_name if self.request.candidate_source
                                                  is not None else Path(self.request.candidate_path or "c").stem)
        text = self.request.candidate_source
        if text is None:
            try:
                text = Path(self.request.candidate_path or "").read_text()
            except (OSError, UnicodeDecodeError):
                text = ""
        candidate.write_text(text)
        self.runner_candidate = candidate
        if self.request.sweep:  # a sweep's instances: outside the runner's folder, so it cannot rewrite the next
            from .sweep import write_instances  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

            write_instances(self.scratch, self.request.sweep)
        if self.request.problem_path:
            self.runner_problem = Path(self.request.problem_path)
        else:
            self.runner_problem = self.runner / "problem" / source_filename(self.request.problem_name)
            self.runner_problem.write_text(self.request.problem_source or "")

    def problem_path(self) -> Path:
        if self.request.problem_path:
            return Path(self.request.problem_path)
        return self.trusted / "problem" / source_filename(self.request.problem_name)

    def worker_writable(self) -> list[Path]:
        """The checker's folders: its work folder (cwd, HOME, TMPDIR) and the folder of the result
        and progress files (and the MPS server's pipe folder)."""
        folders = {Path.cwd().resolve(), Path(self.request.result_path).resolve().parent,
                   Path(self.request.progress_path).resolve().parent}
        if self.scratch in folders or any(self.trusted.is_relative_to(f) for f in folders):
            raise RuntimeError("the worker's folders must not contain the supervisor's trusted folder")
        return sorted(folders) + self._mps_folders()

    def runner_writable(self) -> list[Path]:
        return [self.runner.resolve()] + self._mps_folders()

    def runner_hidden(self) -> list[Path]:
        """What the runner may not read: the request, the checker's folders, this process's, and
        the judge's caches of reference outputs and baselines."""
        checker = {Path.cwd().resolve(), Path(self.request.result_path).resolve().parent,
                   Path(self.request.progress_path).resolve().parent}
        hidden = {(self.scratch / "request.json").resolve(), self.trusted.resolve(), *checker,
                  (self.cache / "references").resolve(), (self.cache / "baselines").resolve()}
        return sorted(p for p in hidden if p != self.runner.resolve())

    def _mps_folders(self) -> list[Path]:
        return [self.mps.pipe.resolve()] if self.mps is not None and self.mps.active and self.mps.pipe else []

    def trusted_env(self) -> None:
        """This process's environment, inherited by the builds and baseline measurements it starts:
        the shared caches (only trusted processes write them) and a temporary folder of its own."""
        os.environ.update(trusted_cache_env(self.cache, self.trusted))
        os.environ.pop(service.ENV_VAR, None)

        tempfile.tempdir = None

    # ------------------------------------------------------------------ the worker

    def start_processes(self, server: service.Server | None) -> None:
        """Fork the runner, then the checker, joined by the call channel (a socket pair)."""
        checker_end, runner_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.runner_pid, self.record.confinement = self._fork(
            lambda fd: self._runner_child(server, runner_end, checker_end, fd))
        runner_end.close()
        self.worker_pid, self.record.checker_confinement = self._fork(
            lambda fd: self._checker_child(server, checker_end, fd))
        checker_end.close()

    def _fork(self, child) -> tuple[int, dict[str, Any]]:
        """Fork `child(report_fd)` (its return is the exit code); (pid, the confinement it reported)."""
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            code = 70
            try:
                code = child(write_end)
            except BaseException:  # noqa: BLE001 - a judge bug: say so on stderr, exit
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(write_end)
        return pid, _read_report(read_end)

    def _child_setup(self, server: service.Server | None, service_ok: bool) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent(signal.SIGKILL)
        if server is not None:
            server.sock.close()
            if service_ok:
                os.environ[service.ENV_VAR] = str(server.path)
        for name in SUPERVISOR_ONLY:
            os.environ.pop(name, None)
        if self.mps is not None:
            from .mps import client_env  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

            os.environ.update(client_env(self.mps))

    def _runner_child(self, server: service.Server | None, sock, other, report_fd: int) -> int:
        """The candidate's process: its own process group (the checker stops and continues it),
        stdin from /dev/null, its own folder, confined, then the call channel's loop."""
        other.close()
        os.setpgid(0, 0)
        self._child_setup(server, service_ok=True)
        if os.getppid() != self.pid:
            return 3
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # plain cudaMalloc blocks: the checker maps them
        caches = self.runner / ".cache"
        os.environ.update({"HOME": str(self.runner / "home"), "TMPDIR": str(self.runner / "tmp"),
                           "TMP": str(self.runner / "tmp"), "TEMP": str(self.runner / "tmp"),
                           "TRITON_CACHE_DIR": str(caches / "triton"),
                           "TORCH_EXTENSIONS_DIR": str(caches / "torch_extensions"),
                           "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"), "CUDA_CACHE_PATH": str(caches / "nv")})
        os.chdir(self.runner)

        tempfile.tempdir = None
        report = self._confine(self.runner_writable(), hidden=self.runner_hidden(), scope_signals=True)
        os.write(report_fd, json.dumps(report).encode())
        os.close(report_fd)
        _stack_dumps(os.environ.get(DEBUG_STACKS, ""))  # after confining: its watchdog is a thread
        from .runner.main import serve  # noqa: PLC0415 -- in the runner child only, after its confinement: runner.main brings torch, which the supervisor never imports

        return serve(sock.detach())

    def _checker_child(self, server: service.Server | None, sock, report_fd: int) -> int:
        """The judge's process: the runner's pid and channel, the token, confined (it may stop and
        continue the runner), then `checker.main`."""
        from .checker import main as checker  # noqa: PLC0415 -- in the checker child only: the checker's modules are never in the runner's process, forked from this one

        self._child_setup(server, service_ok=True)
        for name in RUNNER_ONLY:
            os.environ.pop(name, None)
        if os.getppid() != self.pid:
            return 3
        os.environ.update({checker.RUNNER_FD: str(sock.fileno()), checker.RUNNER_PID: str(self.runner_pid),
                           checker.RUNNER_PROBLEM: str(self.runner_problem),
                           checker.RUNNER_CANDIDATE: str(self.runner_candidate), checker.RESULT_TOKEN: self.token})
        if self.request.sweep:
            os.environ[checker.RUNNER_INSTANCES] = str(self.scratch)
        os.environ[checker.MPS_NOTE] = checker_mps_note(self.mps, self.record.mps)
        sock.set_inheritable(True)
        report = self._confine(self.worker_writable(), scope_signals=False)
        os.write(report_fd, json.dumps(report).encode())
        os.close(report_fd)
        _stack_dumps(os.environ.get(DEBUG_STACKS, ""))  # after confining: its watchdog is a thread
        return checker.main([str(self.request_path), "--phase", self.phase])

    def _confine(self, writable: list[Path], hidden: list[Path] = (), scope_signals: bool = True) -> dict[str, Any]:
        from .confine import ConfinementReport, confine  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        if not self.config.confine:
            ctypes.CDLL(ctypes.util.find_library("c") or None).prctl(38, 1, 0, 0, 0)  # no_new_privs: marks its processes
            return ConfinementReport(reason="switched off (config.confine is False)", no_new_privs=True).to_dict()
        report = confine(self.scratch, writable, hidden=hidden, scope_signals=scope_signals)
        if not report.no_new_privs:
            ctypes.CDLL(ctypes.util.find_library("c") or None).prctl(38, 1, 0, 0, 0)
            report.no_new_privs = True
        return report.to_dict()

    def confinement_rules(self) -> tuple[list[Path], tuple[str, ...]]:
        """(writable paths, capabilities kept) of every profiled process (`launch`): the checker's
        folders (the profile's results land there), CAP_SYS_ADMIN where ncu needs it."""
        writable = self.worker_writable()
        keep: tuple[str, ...] = ()
        if self.config.profile:
            keep = ("CAP_SYS_ADMIN",)  # ncu, where the GPU's counters are for administrators only
            writable += _ncu_lock_file()
        return writable, keep

    def launcher_flags(self) -> list[str]:
        """`launch`'s arguments: the worker's rules; required where the worker was confined."""
        if not self.config.confine:
            return ["--scratch", str(self.scratch), "--off"]
        writable, keep = self.confinement_rules()
        flags = ["--scratch", str(self.scratch), *(f for w in writable for f in ("--writable", str(w))),
                 *(f for cap in keep for f in ("--keep", cap))]
        return flags + (["--require"] if self.record.checker_confinement.get("active") else [])

    def wait_worker(self) -> int:
        while True:
            try:
                _, status = os.waitpid(self.worker_pid, 0)
                return status
            except ChildProcessError:
                return 0
            except InterruptedError:
                continue

    def terminate(self, *_: Any) -> None:
        """SIGTERM: the judge's time limit (or the judge died): end the checker and the runner now."""
        self.record.terminated = True
        for pid in (self.worker_pid, self.runner_pid):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def end_runner(self, wait_s: float = 5.0) -> int | None:
        """The runner's exit code once it has ended (None while it runs after `wait_s` seconds)."""
        with self._lock:
            if self.record.runner_status is not None or not self.runner_pid:
                return self.record.runner_status
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    pid, status = os.waitpid(self.runner_pid, os.WNOHANG)
                except ChildProcessError:
                    return None
                if pid:
                    self.record.runner_status = os.waitstatus_to_exitcode(status)
                    return self.record.runner_status
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.01)

    def kill_candidate_processes(self) -> int:
        """Kill the runner's process group and every process of the candidate's left in the tree
        (no_new_privs, not the checker): before anything is measured without them. How many."""
        if self.runner_pid <= 0:
            return 0
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.runner_pid, signal.SIGKILL)
        tree = proctree.parent_map()
        spared = {self.worker_pid} | (proctree.descendants(self.worker_pid, tree) if self.worker_pid > 0 else set())
        with self._lock:
            spared |= set(self._helpers)
        victims = [pid for pid in proctree.descendants(os.getpid(), tree)
                   if pid not in spared and proctree.no_new_privs(pid)]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with self._lock:
            self._candidate_killed.update(pid for pid in victims if pid != self.runner_pid)
        self.end_runner(wait_s=10.0)
        return len(victims)

    def clean_up(self) -> None:
        """Kill everything left in the tree; count what was the candidate's."""
        started = time.perf_counter()
        with self._lock:
            helpers = set(self._helpers)
        before = proctree.parent_map()
        marked = {pid for pid in proctree.descendants(os.getpid(), before) if proctree.no_new_privs(pid)}
        helper_tree = helpers | {d for h in helpers for d in proctree.descendants(h, before)}
        killed = proctree.kill_tree(os.getpid())
        with self._lock:
            earlier = set(self._candidate_killed)  # killed before the baselines or before this clean-up
        candidate = sorted(((killed & marked) | earlier) - helper_tree - {self.worker_pid, self.runner_pid})
        self.record.killed, self.record.killed_pids = len(candidate), candidate[:50]
        self.record.killed_other = len(killed - set(candidate))
        self.record.seconds["clean_up"] = round(time.perf_counter() - started, 4)

    # ------------------------------------------------------------------ the service

    def handlers(self) -> dict[str, service.Handler]:
        return {"build": self._build, "seal": self._seal, "baselines": self._baselines, "lock": self._make_lock,
                "profile": self._profile, "references": self._references, "store_references": self._store_references,
                "judge_kernels": self._judge_kernels, "store_judge_kernels": self._store_judge_kernels,
                "runner_status": self._runner_status}

    def permit(self, pid: int) -> frozenset[str] | None:
        """What a process may ask: the checker everything, the runner `build`, nobody else anything."""
        if pid == self.worker_pid:
            return None
        if pid == self.runner_pid:
            return RUNNER_OPS
        return frozenset()

    def _runner_status(self, message: dict[str, Any]) -> dict[str, Any]:
        code = self.end_runner(wait_s=min(float(message.get("wait_s") or 0), 30.0))
        return {"code": code}

    def _profile(self, message: dict[str, Any]) -> dict[str, Any]:
        """The profile's processes, started here so each is confined afresh (`profilehost`)."""
        with self._lock:
            if self._profile_host is None:
                from .profilehost import ProfileHost  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

                if not self.config.profile:
                    return {"error": "this evaluation does not profile"}
                self._profile_host = ProfileHost(self.trusted / "profile", self.launcher_flags(),
                                                 max(1.0, self.config.timeout_s), self._launched)
            host = self._profile_host
        return host.handle(message)

    def _launched(self, entry: dict[str, Any]) -> None:
        with self._lock:
            if len(self.record.launched) < 20:
                self.record.launched.append(entry)

    def _build(self, message: dict[str, Any]) -> dict[str, Any]:
        from .buildservice import serve_build  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        reply = serve_build(message, self.cache, timeout_s=self.config.compile_timeout_s,
                            readable=self.scratch, on_start=self._helper_started)
        if reply.get("ok") and not reply.get("cached"):
            with self._lock:
                self.record.builds.append(reply["name"])
        return reply

    def _helper_started(self, pid: int) -> None:
        with self._lock:
            self._helpers.add(pid)

    def _seal(self, message: dict[str, Any]) -> dict[str, Any]:
        """The baseline parameters, sent by the worker of an evaluation before it loads candidate
        code; accepted once. (A compile-phase worker loads candidate code without sealing.)"""
        with self._lock:
            if self.phase != "evaluate":
                return {"error": "no baselines in the compile phase"}
            if self.sealed is not None:
                return {"error": "the baseline parameters were already given"}
            self.sealed = {"overrides": dict(message.get("overrides") or {}), "device": str(message.get("device")),
                           "device_name": str(message.get("device_name") or "")}
            self.record.sealed = True
        return {"ok": True}

    def _references(self, message: dict[str, Any]) -> dict[str, Any]:
        """The reference store's verified entry for the worker's key fields (`refstore`); asked once,
        before the seal: the fields come from the worker before any candidate code ran."""
        from . import refstore  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        with self._lock:
            if self.phase != "evaluate" or self.sealed is not None or self.reference_key is not None:
                return {"error": "the reference store answers one lookup, before the candidate is loaded"}
            if self.config.reference_cache_entry_bytes <= 0:
                return {"error": "the reference store is off (reference_cache_entry_bytes = 0)"}
            self.reference_key = refstore.key_of(dict(message.get("fields") or {}))
            self._reference_fields = dict(message.get("fields") or {})
        found = refstore.lookup(self.cache, self.reference_key)
        self.record.references = {"key": found.key, "hit": found.path is not None, "why": found.why}
        return found.to_reply()

    def _store_references(self, message: dict[str, Any]) -> dict[str, Any]:
        """Publish the worker's freshly computed references under the key of its lookup; once, and
        only before the seal (no candidate code has run in the worker)."""
        from . import refstore  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        with self._lock:
            if self.sealed is not None or self.reference_key is None or self.record.references.get("offered"):
                return {"error": "the reference store takes one entry, after the lookup, before the candidate"}
            self.record.references["offered"] = True
        reply = refstore.publish(self.cache, self.reference_key, Path(str(message.get("path"))),
                                 self.worker_writable(), self.config.reference_cache_entry_bytes,
                                 self.config.reference_cache_bytes, fields=self._reference_fields)
        self.record.references["stored"] = bool(reply.get("stored"))
        return reply

    def _judge_kernels(self, message: dict[str, Any]) -> dict[str, Any]:
        """The shared folder of the judge's compiled kernels (`judgekernels`), to read before the seal."""
        from .judgekernels import shared_folder  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        with self._lock:
            if self.sealed is not None:
                return {"error": "the judge's kernels are read before the candidate is loaded"}
        return {"ok": True, "folder": str(shared_folder(self.cache))}

    def _store_judge_kernels(self, message: dict[str, Any]) -> dict[str, Any]:
        """Publish the judge's kernels the worker compiled; once, and only before the seal (no
        candidate code has run in the worker)."""
        from .judgekernels import publish  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        with self._lock:
            if self.sealed is not None or "judge_kernels" in self.record.seconds:
                return {"error": "the judge's kernels are offered once, before the candidate is loaded"}
            self.record.seconds["judge_kernels"] = 0.0
        started = time.perf_counter()
        reply = publish(self.cache, Path(str(message.get("path"))), [str(n) for n in message.get("names") or []],
                        self.worker_writable())
        self.record.seconds["judge_kernels"] = round(time.perf_counter() - started, 4)
        return reply

    def _baselines(self, message: dict[str, Any]) -> dict[str, Any]:
        from .baseline import get_baselines  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        if self.sealed is None:
            return {"error": "no baseline parameters were given before the candidate was loaded"}
        self.kill_candidate_processes()  # measured with no candidate process left
        if self.runner_pid and self.record.runner_status is None:
            return {"error": "the candidate's process could not be ended before the baselines"}
        from .trusted import stat_matches  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        params = self.sealed
        label = device_label(params["device"], params["device_name"])
        if not label:
            return {"error": f"cannot name the device {params['device']!r} without torch"}
        before: dict = {}
        stat_matches(self.cache / "baselines", ("*.json",), before)
        result = get_baselines(self.problem_path(), params["overrides"], self.config, params["device"],
                               device_label=label)
        after: dict = {}
        stat_matches(self.cache / "baselines", ("*.json",), after)
        with self._lock:  # records it rewrote (not merely added): the judge must not take them for tampering
            self.record.rewrote.update({p: list(st) for p, st in after.items() if p in before and before[p] != st})
        return {"baselines": asdict(result)}

    def _make_lock(self, message: dict[str, Any]) -> dict[str, Any]:
        from .gpulock import lock_folder  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        folder, key = Path(str(message.get("folder"))), str(message.get("key"))
        allowed = {lock_folder("cuda").resolve(), lock_folder("cpu", self.cache).resolve()}
        if folder.resolve() not in allowed or not _LOCK_KEY.match(key):
            return {"error": f"not a device lock: {folder}/{key}"}
        for suffix in ("lock", "turnstile"):
            with open(folder / f"{key}.{suffix}", "a"):
                pass
        return {"ok": True}

    # ------------------------------------------------------------------ report

    def write_report(self) -> None:
        path = self.trusted / REPORT_FILE
        atomic_write(path, json.dumps(asdict(self.record), indent=1))

    def run(self) -> int:
        from .stagetimes import process_age_s  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

        self.record.seconds["startup"] = round(process_age_s() or 0.0, 4)  # interpreter and imports
        _die_with_parent(signal.SIGTERM)
        if self.parent_pid and os.getppid() != self.parent_pid:
            return 3  # the judge died before this process started
        started = time.perf_counter()
        self.token = _read_token()
        self.prepare()
        server = self._open_service()
        signal.signal(signal.SIGTERM, self.terminate)
        self.record.seconds["prepare"] = round(time.perf_counter() - started, 4)
        started = time.perf_counter()
        self.start_processes(server)
        self.record.seconds["fork_and_confine"] = round(time.perf_counter() - started, 4)
        self.trusted_env()
        if server is not None:
            server.start()
        status = self.wait_worker()
        self.record.worker_status = os.waitstatus_to_exitcode(status)
        if server is not None:
            server.close()
        self.kill_candidate_processes()
        self.clean_up()
        if self.mps is not None:
            from . import mps  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

            mps.stop(self.mps)
        self.write_report()
        return self.record.worker_status

    def _open_service(self) -> service.Server | None:
        try:
            server = service.Server(self.trusted, self.handlers(), permit=self.permit)
        except OSError as exc:
            self.record.service = f"unavailable: {exc}"
            return None
        self.record.service = str(server.path)
        return server


DEBUG_STACKS = "KW_DEBUG_STACKS"  # seconds: both children print every thread's stack that often (hangs)


def _stack_dumps(every: str) -> None:
    """With $KW_DEBUG_STACKS=N, the checker and the runner print every thread's Python stack to
    stderr every N seconds (faulthandler's watchdog): where a hang is shows in the verdict's
    stderr tail when the time limit ends the evaluation. Started after the process confined
    itself: the watchdog is a thread, and Landlock binds only the thread that confines (with it
    running first, the H200 smoke run of 2026-11-28 flagged every verdict `unconfined`)."""
    try:
        seconds = float(every)
    except ValueError:
        return
    if seconds > 0:
        faulthandler.dump_traceback_later(seconds, repeat=True, file=sys.stderr)


def _read_token() -> str:
    """The result file's token, given on this process's stdin by the judge; the checker gets it in
    its environment, the runner never."""
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return ""
        return sys.stdin.readline().strip()
    except (OSError, ValueError):
        return ""


def _gpu_expected(config: JudgeConfig) -> bool:
    """Whether this evaluation will run on a GPU (decided without torch: the checker decides for
    good; an MPS server started for a CPU evaluation costs nothing but a daemon)."""
    if str(config.device) == "cpu":
        return False
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return any(Path("/dev").glob("nvidia[0-9]*"))


def _ensure_uvm_device() -> None:
    """CUDA creates /dev/nvidia-uvm on first use through the set-uid nvidia-modprobe; a confined
    worker (no capabilities, no_new_privs, no new files in /dev) cannot, so it is made here."""
    if not Path("/dev/nvidiactl").exists() or Path("/dev/nvidia-uvm").exists():
        return
    exe = shutil.which("nvidia-modprobe")
    if exe:
        try:
            subprocess.run([exe, "-u", "-c=0"], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            pass


def trusted_cache_env(cache: Path, home: Path) -> dict[str, str]:
    """The environment of a trusted process that writes the shared caches (the supervisor, and the
    builds and baseline measurements it starts; the batch runner's baseline lane): the caches
    under `cache`, HOME and the temporary folder under `home`."""
    return {
        "TMPDIR": str(home / "tmp"), "TMP": str(home / "tmp"), "TEMP": str(home / "tmp"),
        "HOME": str(home / "home"), "KW_CACHE_DIR": str(cache),
        "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"), "TRITON_CACHE_DIR": str(cache / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "CUDA_CACHE_PATH": str(cache / "nv"),
    }


def device_label(device: str, sealed_name: str) -> str:
    """The device name baselines are keyed by (`env.device_name`'s), found here without torch: the
    processor for the CPU; for a GPU nvidia-smi's name of the visible device, else the name the
    worker sealed before any candidate code ran."""
    from .env import device_name_without_torch  # noqa: PLC0415 -- the runner is forked from this process: what the supervisor imports at its top is in the candidate's process too (RUNNER_REACHES)

    return device_name_without_torch(device) or (sealed_name if str(device).startswith("cuda") else "")


NCU_LOCK = Path("/tmp/nsight-compute-lock")  # Nsight Compute's machine-wide lock file


def _ncu_lock_file() -> list[Path]:
    """The one file outside its folders a profiled candidate may write: ncu's lock (made here, so
    the candidate needs no right to create files in /tmp)."""
    try:
        if not NCU_LOCK.exists():
            NCU_LOCK.touch()
            NCU_LOCK.chmod(0o666)
        return [NCU_LOCK]
    except OSError:
        return []


def _read_report(fd: int) -> dict[str, Any]:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except InterruptedError:
            continue
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    try:
        return json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        return {"active": False, "reason": "the worker died before it reported its confinement"}


def _die_with_parent(sig: int) -> None:
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or None).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def read_report(scratch: Path) -> Supervision | None:
    """The supervisor's record of an evaluation (None when it did not write one)."""
    try:
        data = json.loads((scratch / TRUSTED_FOLDER / REPORT_FILE).read_text())
    except (OSError, ValueError):
        return None
    known = Supervision.__dataclass_fields__
    return Supervision(**{k: v for k, v in data.items() if k in known})


def exit_like(status: int) -> None:
    """Leave with the worker's exit code, or die by the signal that killed it."""
    if status < 0:
        sig = -status
        try:
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)
    os._exit(status)


def checker_mps_note(mps, recorded: str) -> str:
    """What the checker is told about the evaluation's MPS server: "" when one is active (the
    checker's own CUDA events time the runner's work), else why not (the runner times itself and
    the verdict says so). Always set: a missing variable reads as "no server" in the checker."""
    if mps is not None and mps.active:
        return ""
    if mps is not None:
        return mps.note or "the MPS server did not start"
    return f"no MPS server: {recorded or 'not a GPU evaluation'}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.judge.supervisor")
    parser.add_argument("request")
    parser.add_argument("--phase", choices=("evaluate", "compile"), default="evaluate")
    parser.add_argument("--parent-pid", type=int, default=0)
    args = parser.parse_args(argv)
    supervisor = Supervisor(Path(args.request), args.phase, args.parent_pid)
    status = supervisor.run()
    sys.stdout.flush()
    sys.stderr.flush()
    exit_like(status)


if __name__ == "__main__":
    main()
