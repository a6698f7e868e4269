"""Warm judge processes: a fork server that imports torch, Triton, numpy and the judge's own modules
once, without initialising CUDA, and forks every evaluation's supervisor from that state.

`python -m kernelwright.judge.scheduling.forkserver SOCKET` (started by `ForkServer.start`, never by hand)
imports `PRELOAD`, checks that CUDA was not initialised and that it runs one thread, listens on
a UNIX socket and answers each connection with one child:

- the connection carries one request (JSON: the token, the supervisor's arguments, the working
  folder, the environment, the address-space limit) and the child's stdin, stdout and stderr as
  file descriptors (SCM_RIGHTS); it is refused unless the token is the one given to this server on
  its stdin (never on disk) and the peer process does not carry no_new_privs (every process of a
  candidate does: the worker sets it before any candidate code runs, so a candidate cannot ask for
  an evaluation of its own, unconfined);
- the child (`_become_supervisor`) closes what belongs to the server, takes the three descriptors
  as 0, 1 and 2, starts its own session, replaces its environment and working folder, sets its
  core and address-space limits, and runs `supervisor.main` exactly as `python -m
  kernelwright.judge.supervisor` would: the supervisor forks the worker, which confines itself
  (one thread, before any candidate code) and imports nothing new of the judge's;
- the server answers the child's pid, then its wait status when it ends, and closes the
  connection. A client that goes away first gets its child's process group killed.

Everything the sandbox promised stays: a fresh process per candidate (a fork, not a reused
process), its own session and scratch folder, time limits and bounded output (the client's
`sandbox.run`), no network (the server itself runs in the network namespace the sandbox would
have made), no core dumps, Landlock confinement and the reaped process tree (the supervisor's).
What a fork changes: the worker starts with torch imported instead of importing it (seconds
saved per candidate), and variables read when a library loads come from the server's start
(`IMPORT_ENV`: a request whose values differ is refused and started cold; OpenMP's thread count
is set again in the worker, glibc's malloc perturbation by `mallopt`).

The server dies with its owner: it reads its stdin, whose other end only the owner holds, and
stops (killing its children's process groups) at end of file.
"""
from __future__ import annotations

import array
import faulthandler
import hashlib
import importlib
import io
import json
import os
import resource
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.procs import kill_group

from ..proctree import no_new_privs
from ..sandbox import Launch, limits_prefix, network_prefix
from ..service import peer_pid

# imported once by the server, before any fork: what a worker would otherwise import itself. Not
# torch.utils.cpp_extension: on a GPU machine importing it starts the CUDA driver's thread
# ("cuda00001400006", measured on the H100), after which no child could use CUDA; CUDA candidates
# import it in their own process. The rest of the list is what a worker imported lazily in every
# evaluation (listed on the CPU: Triton's code generator at the first launch, the reference store's
# modules, the energy meter and the kernel-times profiler's module, which import only the stdlib
# and torch at import time).
PRELOAD = (
    "numpy", "torch", "torch.nn.functional", "torch._dynamo", "triton",
    "triton.language", "triton.compiler.code_generator", "kernelwright.judge.timing", "kernelwright.judge.guards", "kernelwright.judge.compile",
    "kernelwright.judge.baseline", "kernelwright.judge.floor", "kernelwright.judge.env", "kernelwright.judge.check",
    "kernelwright.judge.grad", "kernelwright.judge.inplace", "kernelwright.judge.own_code",
    "kernelwright.judge.work", "kernelwright.judge.kernel_times", "kernelwright.judge.candidate_kinds",
    "kernelwright.judge.gpulock", "kernelwright.judge.reference", "kernelwright.problem.ops",
    "kernelwright.problem.reference", "kernelwright.judge.checker.main", "kernelwright.judge.supervisor",
    "kernelwright.judge.refcases", "kernelwright.judge.checker.stages.reference", "kernelwright.problem.shrink",
    "kernelwright.profile.energy", "kernelwright.profile.torchprof", "kernelwright.judge.gpucompare",
    "kernelwright.judge.runner.session", "kernelwright.judge.runner.observe", "kernelwright.judge.protocol",
    "kernelwright.judge.checker.link", "kernelwright.judge.checker.timed_calls", "torch.profiler",
)
# computed once by the server after PRELOAD, inherited by every fork: Triton's own key (a hash of its
# package's files, 0.55 s on the H100 machine), which the first Triton compile or cache lookup of a
# process computes: the judge's comparison kernel or the candidate's first kernel. No CUDA needed.
PRECOMPUTE = (("triton.runtime.cache", "triton_key"),)
# variables read when the interpreter or a library starts (not later): a request must agree with
# the server's on each, or it is started cold. TRITON_INTERPRET is one: triton.language's own
# @jit helpers (the combine functions of tl.sum, tl.max, ...) are made when triton is imported,
# and compiled ones cannot be called from an interpreted kernel.
IMPORT_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONHASHSEED", "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE",
              "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_HOME", "CUDA_PATH",
              "MKL_NUM_THREADS", "KMP_AFFINITY", "GOMP_CPU_AFFINITY", "TRITON_INTERPRET")
READY = "kw-forkserver-ready"
STOP_GRACE_S = 5.0
_HEADER = struct.Struct("!I")  # length of the JSON request that follows
_MAX_REQUEST = 1 << 22


class ForkServerError(RuntimeError):
    """The fork server could not be started or refused a request: start the evaluation cold."""


# ============================================================================ the client side


@dataclass
class WarmProcess:
    """A child of the fork server, driven like `subprocess.Popen` by `sandbox.run`: poll, wait,
    send_signal; its stdin, stdout and stderr are pipes this process holds the other ends of."""

    pid: int
    conn: socket.socket
    stdin: Any
    stdout: Any
    stderr: Any
    returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(block=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"warm pid {self.pid}", timeout)
            left = 0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic()))
            self._read(block=True, timeout=left)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _read(self, block: bool, timeout: float = 0.0) -> None:
        if block and not select.select([self.conn], [], [], timeout)[0]:
            return
        try:
            data = self.conn.recv(4096, 0 if block else socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the server went away without reporting: its children went with it
            self._gone()
            return
        for line in data.decode(errors="replace").splitlines():
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "status" in message:
                self.returncode = os.waitstatus_to_exitcode(int(message["status"]))
                self.conn.close()

    def _gone(self) -> None:
        """No status will come: wait for the process group to vanish, then report it killed."""
        for _ in range(100):
            try:
                os.killpg(self.pid, 0)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.05)
        self.returncode = -signal.SIGKILL
        self.conn.close()


@dataclass
class ForkServer:
    """The client's handle on one fork server process (see the module docstring)."""

    env: dict[str, str]  # the server's environment: what a cold evaluation would be started with
    process: subprocess.Popen | None = None
    socket_path: str = ""
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    started_s: float = 0.0  # seconds the server took to import and get ready
    package_digest: str = ""
    network: str = ""  # how the server (and every child) is kept off the network
    network_isolated: bool = False
    failure: str = ""  # why it is not running, once it failed
    _folder: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, prefix: tuple[str, ...] = (), network: str = "", timeout_s: float = 300.0) -> "ForkServer":
        """Start the server process (prefix: the sandbox's network and limits prefix); raises
        ForkServerError when it does not get ready."""
        started = time.monotonic()
        self._folder = tempfile.mkdtemp(prefix="kw-fork-")
        os.chmod(self._folder, 0o700)
        self.socket_path = os.path.join(self._folder, "s")
        env = {**self.env, "OPENBLAS_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
        argv = [*prefix, sys.executable, "-m", "kernelwright.judge.scheduling.forkserver", self.socket_path]
        try:
            with open(os.path.join(self._folder, "server.log"), "wb") as log:  # never a pipe nobody reads
                self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                                env=env, cwd=self._folder, start_new_session=True)
            self.process.stdin.write((self.token + "\n").encode())
            self.process.stdin.flush()  # the pipe stays open: closing it stops the server
        except OSError as exc:
            raise ForkServerError(f"cannot start the fork server: {exc}") from exc
        line = _read_ready(self.process, timeout_s)
        if not line.startswith(READY):
            self.close()
            raise ForkServerError(f"the fork server did not start: {line.strip()[-1500:]}")
        self.package_digest = line.split()[-1]
        self.network = network
        self.started_s = round(time.monotonic() - started, 3)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def accepts(self, env: dict[str, str]) -> str:
        """"" when a child with `env` can be forked from this server, else why not."""
        if not self.alive():
            return self.failure or "the fork server is not running"
        differ = [name for name in IMPORT_ENV if env.get(name) != self.env.get(name)]
        if differ:
            return f"the request's {', '.join(differ)} differ from the fork server's"
        return ""

    def spawn(self, argv: list[str], cwd: str, env: dict[str, str], address_space_bytes: int | None) -> WarmProcess:
        """Fork one supervisor; raises ForkServerError when the server refuses or is gone."""
        pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr
        child_ends = [pipes[0][0], pipes[1][1], pipes[2][1]]
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.socket_path)
            payload = json.dumps({"token": self.token, "argv": argv, "cwd": cwd, "env": env,
                                  "address_space_bytes": address_space_bytes}).encode()
            try:
                conn.sendmsg([_HEADER.pack(len(payload)) + payload],
                             [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", child_ends))])
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused before it read the request: its reply says why
            reply = json.loads(_recv_line(conn, timeout=60.0) or b"{}")
        except (OSError, ValueError) as exc:
            conn.close()
            _close_all(fd for pair in pipes for fd in pair)
            raise ForkServerError(f"the fork server did not answer: {exc}") from exc
        finally:
            _close_all(child_ends)
        if "pid" not in reply:
            conn.close()
            _close_all([pipes[0][1], pipes[1][0], pipes[2][0]])
            raise ForkServerError(f"the fork server refused: {reply.get('error', reply)}")
        return WarmProcess(pid=int(reply["pid"]), conn=conn, stdin=os.fdopen(pipes[0][1], "wb"),
                           stdout=os.fdopen(pipes[1][0], "rb"), stderr=os.fdopen(pipes[2][0], "rb"))

    def close(self) -> None:
        """Stop the server (its running children's process groups are killed)."""
        process, self.process = self.process, None
        if process is not None:
            try:
                process.stdin.close()
                process.wait(timeout=STOP_GRACE_S + 5)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait()
            if process.stdout:
                process.stdout.close()
        if self._folder:
            for name in os.listdir(self._folder) if os.path.isdir(self._folder) else []:
                try:
                    os.unlink(os.path.join(self._folder, name))
                except OSError:
                    pass
            try:
                os.rmdir(self._folder)
            except OSError:
                pass


SUPERVISOR = ("-m", "kernelwright.judge.supervisor")


class Launcher:
    """`sandbox.SandboxSpec.launcher` for the judge's supervisor command: forks it from a fork
    server started in the background (the first evaluations wait for it to be ready). Anything it
    cannot fork (another command, another network setting, variables the server was not started
    with, a package changed on disk since the server imported it, a server that failed) is started
    cold, and the verdict says why (`process.isolation["start"]`)."""

    def __init__(self, env: dict[str, str], no_network: bool, package: Path):
        self.no_network, self.package = no_network, package
        self.server = ForkServer(env=dict(env))
        self._ready = threading.Event()
        threading.Thread(target=self._start, name="kw-forkserver-start", daemon=True).start()

    def _start(self) -> None:
        prefix, note = network_prefix() if self.no_network else ((), "not requested")
        try:
            self.server.start(prefix=(*prefix, *limits_prefix(None)), network=note)
            self.server.network_isolated = bool(prefix)
        except ForkServerError as exc:
            self.server.failure = str(exc)
        finally:
            self._ready.set()

    def __call__(self, spec, env: dict[str, str]):
        argv = list(spec.argv)
        if len(argv) < 3 or tuple(argv[1:3]) != SUPERVISOR:
            return Launch(start="not the judge's supervisor command")
        if spec.no_network != self.no_network:
            return Launch(start="the fork server was started with another network setting")
        self._ready.wait(timeout=600)
        why = self.server.accepts(env) or self._stale()
        if why:
            return Launch(start=why)
        process = self.server.spawn(argv[3:], str(spec.workdir), env, spec.address_space_bytes)
        return Launch(process=process, network_isolated=self.server.network_isolated, network=self.server.network,
                      start=f"warm: forked from the fork server (pid {self.server.process.pid}, imports done once "
                            f"in {self.server.started_s} s)")

    def _stale(self) -> str:
        if package_digest(self.package) != self.server.package_digest:
            self.server.failure = "the judge's package changed on disk after the fork server imported it"
            self.server.close()
            return self.server.failure
        return ""

    def close(self) -> None:
        self._ready.wait(timeout=600)
        self.server.close()


def _read_ready(process: subprocess.Popen, timeout_s: float) -> str:
    """The server's first line on stdout (READY ...), or what it said on stderr when it died."""
    fd = process.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    data = b""
    while b"\n" not in data and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
        elif process.poll() is not None:
            break
    if b"\n" in data:
        return data.decode(errors="replace").splitlines()[0]
    process.kill()
    process.wait()
    try:
        said = Path(process.args[-1]).parent.joinpath("server.log").read_bytes()[-3000:]
    except (OSError, TypeError, IndexError):
        said = b""
    return (data + said).decode(errors="replace") or f"exit status {process.returncode}"


def _recv_line(conn: socket.socket, timeout: float) -> bytes:
    conn.settimeout(timeout)
    try:
        data = b""
        while b"\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        return data.split(b"\n", 1)[0]
    finally:
        conn.settimeout(None)


def _close_all(fds) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def package_digest(package: Path) -> str:
    """A digest of the package's files (path, size, modification time): a server that imported
    another state of the package than the one on disk now must not fork evaluations."""
    entries = []
    for root, _, files in os.walk(package):
        if "__pycache__" in root:
            continue
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                entries.append(f"{path}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()[:16]


# ============================================================================ the server side


class _Server:
    def __init__(self, socket_path: str, token: str):
        self.token = token
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(socket_path)
        self.listener.listen(64)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)  # drained without blocking
        os.set_blocking(self.wake_w, False)
        self.children: dict[int, socket.socket] = {}  # pid -> the connection that asked for it
        self.stopping = False
        self.owner_gone = False

    def serve(self) -> None:
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        while not self.stopping:
            watched = [self.listener, sys.stdin.fileno(), self.wake_r, *self.children.values()]
            try:
                readable = select.select(watched, [], [], 1.0)[0]
            except InterruptedError:
                readable = []
            if sys.stdin.fileno() in readable and not os.read(sys.stdin.fileno(), 4096):
                self.owner_gone = True  # the owner is gone (or closed us): its evaluations go at once
                break
            if self.wake_r in readable:
                _drain(self.wake_r)
            if self.listener in readable:
                self._accept()
            for pid, conn in list(self.children.items()):
                if conn in readable and not _peek_alive(conn):
                    kill_group(pid, signal.SIGTERM)  # the client went away: its evaluation goes too
            self._reap()
        self._shutdown()

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        fds: list[int] = []
        try:
            peer = peer_pid(conn)
            if no_new_privs(peer) is not False:  # before reading: candidate code cannot even stall us
                conn.sendall(json.dumps({"error": f"process {peer} carries no_new_privs (candidate code) or "
                                                  "cannot be inspected"}).encode() + b"\n")
                conn.close()
                return
            request, fds = _receive(conn)
            refusal = self._refusal(request, fds)
            if refusal:
                conn.sendall(json.dumps({"error": refusal}).encode() + b"\n")
                conn.close()
                _close_all(fds)
                return
            pid = os.fork()
            if pid == 0:
                _become_supervisor(self, conn, request, fds)  # never returns
            _close_all(fds)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            self.children[pid] = conn
        except (OSError, ValueError) as exc:
            _close_all(fds)
            try:
                conn.sendall(json.dumps({"error": f"bad request: {exc}"}).encode() + b"\n")
            except OSError:
                pass
            conn.close()

    def _refusal(self, request: dict, fds: list[int]) -> str:
        if not secrets.compare_digest(str(request.get("token", "")), self.token):
            return "wrong token"
        if len(fds) != 3:
            return f"expected 3 file descriptors, got {len(fds)}"
        argv = request.get("argv")
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            return "argv must be a list of strings"
        if not isinstance(request.get("env"), dict) or not isinstance(request.get("cwd"), str):
            return "env and cwd are required"
        return ""

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(json.dumps({"status": status}).encode() + b"\n")
                except OSError:
                    pass
                conn.close()

    def _shutdown(self) -> None:
        for pid in list(self.children):
            kill_group(pid, signal.SIGKILL if self.owner_gone else signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while self.children and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        for pid in list(self.children):
            kill_group(pid, signal.SIGKILL)
        time.sleep(0.1)
        self._reap()


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    conn.settimeout(30.0)
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(_HEADER.size + _MAX_REQUEST, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if len(data) < _HEADER.size:
        raise ValueError("short request")
    (size,) = _HEADER.unpack(data[:_HEADER.size])
    body = data[_HEADER.size:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ValueError("truncated request")
        body += chunk
    conn.settimeout(None)
    return json.loads(body), list(fds)


def _become_supervisor(server: _Server, conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: become what `python -m kernelwright.judge.supervisor ARGS` would be."""
    code = 70
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        server.listener.close()
        for other in server.children.values():
            other.close()
        conn.close()
        _close_all([server.wake_r, server.wake_w])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        _close_all(fds)
        os.setsid()
        _set_limits(request.get("address_space_bytes"))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        tempfile.tempdir = None
        os.chdir(request["cwd"])
        _fresh_std_streams()
        from .. import supervisor  # noqa: PLC0415 -- the fork server imports the supervisor in PRELOAD's order, stopping before a module that starts a thread: not at this module's import

        argv = _with_parent(list(request["argv"]), os.getppid())
        sys.argv = ["-m kernelwright.judge.supervisor", *argv]
        supervisor.main(argv)  # exits like the worker did
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - a judge bug: say so on stderr, exit

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _with_parent(argv: list[str], parent: int) -> list[str]:
    """The supervisor checks that its parent still lives when it starts: here that is the server."""
    if "--parent-pid" in argv:
        index = argv.index("--parent-pid")
        return argv[:index] + ["--parent-pid", str(parent)] + argv[index + 2:]
    return argv


def _fresh_std_streams() -> None:
    """stdin, stdout and stderr over the new descriptors 0-2, unbuffered as PYTHONUNBUFFERED=1 would
    make them, and the fault handler writing to the new stderr (PYTHONFAULTHANDLER=1)."""
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  write_through=True, line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  write_through=True, line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    faulthandler.enable(file=sys.stderr, all_threads=True)


def _set_limits(address_space_bytes) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if address_space_bytes:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = int(address_space_bytes)
        if soft == resource.RLIM_INFINITY or soft > limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _peek_alive(conn: socket.socket) -> bool:
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, OSError):
        pass


def preload() -> tuple[list[str], str]:
    """Import PRELOAD, in order, stopping at the first module that starts a thread; returns the
    names that could not be imported (a judge without Triton still forks) and that module's name
    ("" when none did)."""
    missing = []
    threads = len(_thread_names())
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - an optional module: the worker will say so itself
            missing.append(f"{name} ({type(exc).__name__})")
        if len(_thread_names()) > threads:
            return missing, name
    for module, function in PRECOMPUTE:
        try:
            getattr(importlib.import_module(module), function)()
        except Exception as exc:  # noqa: BLE001 - computed in the worker then
            missing.append(f"{module}.{function}() ({type(exc).__name__})")
        if len(_thread_names()) > threads:
            return missing, f"{module}.{function}"
    return missing, ""


def _thread_names() -> list[str]:
    """The names of this process's threads (the kernel's `comm`; one entry where /proc is missing)."""
    folder = "/proc/self/task"
    if not os.path.isdir(folder):
        return ["main"]
    names = []
    for task in sorted(os.listdir(folder)):
        try:
            names.append(Path(folder, task, "comm").read_text().strip() or task)
        except OSError:
            names.append(task)
    return names


def _fork_safe(started_by: str = "") -> str:
    """"" when forking now is safe for the children, else why not (`started_by`: the module whose
    import started a thread)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA was initialised while importing"
    names = _thread_names()
    if len(names) > 1:
        after = f" after importing {started_by}" if started_by else " after importing"
        return (f"{len(names)} threads{after} ({', '.join(names)}; a fork copies only one, "
                f"their locks could be held)")
    return ""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m kernelwright.judge.scheduling.forkserver SOCKET (started by the judge)", file=sys.stderr)
        return 2
    token = sys.stdin.readline().strip()
    if not token:
        return 2
    _missing, started_by = preload()
    unsafe = _fork_safe(started_by)
    if unsafe:
        print(f"refusing to serve: {unsafe}", file=sys.stderr, flush=True)
        return 1
    server = _Server(args[0], token)
    package = Path(__file__).resolve().parents[2]  # kernelwright/
    print(f"{READY} {os.getpid()} {package_digest(package)}", flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
