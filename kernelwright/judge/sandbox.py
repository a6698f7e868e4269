"""Run one command in a disposable process: its own process group, scratch directory, time limit,
bounded output, no core dumps and, where the OS allows it, no network.

A candidate is untrusted code that may segfault, hang, print forever or spawn children. Whatever it
does, the caller gets a `ProcessInfo` back: exit code or signal name, whether it was killed for
time, and the last bytes of stdout and stderr. The whole process group is killed at the end, so a
candidate's children do not outlive it.

The child inherits only the parts of the caller's environment a program needs (`scrubbed_environ`:
toolchain, library, threading and device settings; no API keys, no cache paths, no judge
internals). Filesystem confinement and the reaping of every descendant are the judge's
supervisor's (`supervisor.py`), which the judge runs under this sandbox; at a time limit the
sandbox asks it to stop (SIGTERM) before it kills the process group.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kernelwright.procs import kill_group

from .verdict import ProcessInfo

POLL_S = 0.05


@dataclass
class SandboxSpec:
    """What to run and under which limits."""

    argv: list[str]
    workdir: Path  # becomes cwd, HOME and TMPDIR
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)  # added to (and overriding) the parent's env
    output_limit_bytes: int = 64 * 1024
    no_network: bool = True
    address_space_bytes: int | None = None  # RLIMIT_AS; None leaves it alone
    stdin_text: str = ""
    # called while waiting: returns the current absolute time.monotonic() deadline (stage budgets)
    deadline: Callable[[float], float] | None = None
    # at a time limit: SIGTERM first and this long to clean up (the supervisor kills its tree), then SIGKILL
    stop_grace_s: float = 0.0
    # a warm start (`forkserver.Launcher`): called with the spec and the child's environment, it
    # forks the command from a process that has imported it already, or says why it cannot
    launcher: Callable[["SandboxSpec", dict[str, str]], "Launch"] | None = None


@dataclass
class Launch:
    """How a launcher started the command: `process` is driven like subprocess.Popen (None: start
    it cold after all); `start` says how, or why not warm."""

    process: Any = None
    start: str = ""
    network_isolated: bool = False
    network: str = ""


@functools.lru_cache(maxsize=None)
def network_prefix() -> tuple[tuple[str, ...], str]:
    """The command prefix that puts a child in a fresh network namespace, and how (or why not).

    Probed once per process: `unshare --net` needs CAP_SYS_ADMIN (root); otherwise an unprivileged
    user namespace may grant it. Where neither works the candidate keeps the host network.
    """
    exe = shutil.which("unshare")
    if not exe:
        return (), "not enforced: util-linux `unshare` not found"
    attempts = [(exe, "--net"), (exe, "--user", "--map-root-user", "--net")]
    for prefix in attempts:
        try:
            probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return (*prefix, "--"), "enforced: " + " ".join(prefix[1:]) + " (new network namespace, loopback only)"
    return (), "not enforced: this OS refuses new network namespaces (no root, no user namespaces)"


class _TailReader(threading.Thread):
    """Drains a pipe, keeping only the last `limit` bytes, so a chatty child cannot fill memory."""

    def __init__(self, stream, limit: int):
        super().__init__(daemon=True)
        self.stream, self.limit = stream, max(limit, 1024)
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.total = 0

    def run(self) -> None:
        try:
            for chunk in iter(lambda: self.stream.read1(65536), b""):
                self.chunks.append(chunk)
                self.size += len(chunk)
                self.total += len(chunk)
                while self.size - len(self.chunks[0]) >= self.limit:
                    self.size -= len(self.chunks.popleft())
        except (OSError, ValueError):
            pass

    def text(self) -> str:
        data = b"".join(self.chunks)[-self.limit:]
        prefix = f"[... {self.total - len(data)} earlier bytes dropped ...]\n" if self.total > len(data) else ""
        return prefix + data.decode("utf-8", errors="replace")


def limits_prefix(address_space_bytes: int | None) -> tuple[str, ...]:
    """`prlimit` (util-linux) sets the limits for the child; a preexec_fn would not be thread-safe
    (the pool starts sandboxes from threads). Without prlimit the worker sets them itself."""
    exe = shutil.which("prlimit")
    if not exe:
        return ()
    flags = ["--core=0"] + ([f"--as={address_space_bytes}"] if address_space_bytes else [])
    return (exe, *flags, "--")


# what a candidate's process inherits from the caller's environment: toolchains, libraries, threads,
# devices; nothing else. Names that look like credentials are dropped even under a kept prefix.
ENV_KEEP = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "SHELL", "LD_LIBRARY_PATH", "LIBRARY_PATH",
    "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "CC", "CXX", "CUDAHOSTCXX", "MAX_JOBS", "PYTHONPATH",
    "PYTHONHASHSEED", "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "CONDA_PREFIX", "MALLOC_PERTURB_",
})
ENV_KEEP_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TORCH_", "TRITON_", "PYTORCH_", "OMP_", "MKL_", "KMP_", "OPENBLAS_",
                     "GOMP_", "CUBLAS", "CUDNN_", "NCCL_", "NVCC_", "KW_")
ENV_DROP = frozenset({"KW_CACHE_DIR", "KW_PARENT_PID", "KW_KEEP_SCRATCH"})
_CREDENTIAL = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)


def scrubbed_environ(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of `environ` (default os.environ) a candidate's process may inherit."""
    environ = dict(os.environ if environ is None else environ)
    return {k: v for k, v in environ.items()
            if (k in ENV_KEEP or k.startswith(ENV_KEEP_PREFIXES)) and k not in ENV_DROP and not _CREDENTIAL.search(k)}


def child_env(spec: SandboxSpec) -> dict[str, str]:
    env = scrubbed_environ()
    tmp = spec.workdir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env.update({"HOME": str(spec.workdir), "TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp),
                "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"})
    if spec.address_space_bytes:  # read by the worker when prlimit is missing
        env["KW_RLIMIT_AS_BYTES"] = str(spec.address_space_bytes)
    env.update(spec.env)
    return env


def signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


COLD = "cold: a fresh interpreter"


def run(spec: SandboxSpec) -> ProcessInfo:
    """Run `spec.argv` under the sandbox and report how it ended. Never raises for the child's sake."""
    spec.workdir.mkdir(parents=True, exist_ok=True)
    env = child_env(spec)
    start = time.monotonic()
    launch = _launch_warm(spec, env)
    proc, started = launch.process, launch.start
    isolated, net_note = launch.network_isolated, launch.network
    if proc is None:
        prefix, net_note = network_prefix() if spec.no_network else ((), "not requested")
        isolated = bool(prefix)
        try:
            proc = subprocess.Popen(
                [*prefix, *limits_prefix(spec.address_space_bytes), *spec.argv], cwd=spec.workdir,
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return ProcessInfo(exit_code=None, stderr_tail=f"cannot start the judge process: {exc}",
                               isolation=_isolation(spec, net_note, started))
    readers = [_TailReader(proc.stdout, spec.output_limit_bytes), _TailReader(proc.stderr, spec.output_limit_bytes)]
    for reader in readers:
        reader.start()
    _feed_stdin(proc, spec.stdin_text)
    timed_out = _wait(proc, spec, start)
    kill_group(proc)  # children the candidate left behind go with it
    for reader in readers:
        reader.join(timeout=2)
    return ProcessInfo(
        exit_code=proc.returncode, signal=signal_name(proc.returncode), timed_out=timed_out,
        wall_s=round(time.monotonic() - start, 3), stdout_tail=readers[0].text(), stderr_tail=readers[1].text(),
        network_isolated=isolated, isolation=_isolation(spec, net_note, started),
    )


def _launch_warm(spec: SandboxSpec, env: dict[str, str]) -> Launch:
    """The launcher's start, or a cold one (with the launcher's reason) when there is none or it fails."""
    if spec.launcher is None:
        return Launch(start=COLD)
    try:
        launch = spec.launcher(spec, env)
    except Exception as exc:  # noqa: BLE001 - a failed warm start costs only the warm start
        return Launch(start=f"{COLD} (the warm start failed: {type(exc).__name__}: {exc})")
    if launch.process is None and not launch.start.startswith(COLD):
        launch.start = f"{COLD} ({launch.start})" if launch.start else COLD
    return launch


def _feed_stdin(proc: subprocess.Popen, text: str) -> None:
    try:
        if text:
            proc.stdin.write(text.encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _wait(proc: subprocess.Popen, spec: SandboxSpec, start: float) -> bool:
    """Wait for the child; kill its group when the (possibly moving) deadline passes."""
    while proc.poll() is None:
        now = time.monotonic()
        deadline = spec.deadline(start) if spec.deadline else start + spec.timeout_s
        if now >= min(deadline, start + spec.timeout_s):
            _stop(proc, spec.stop_grace_s)
            return True
        time.sleep(POLL_S)
    return False


def _stop(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM and `grace_s` to exit (a supervisor kills what it started), then the group's SIGKILL."""
    if grace_s > 0:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace_s)
        except (OSError, subprocess.TimeoutExpired):
            pass
    kill_group(proc)
    proc.wait()


def _isolation(spec: SandboxSpec, net_note: str, started: str = COLD) -> dict:
    return {
        "start": started,
        "network": net_note,
        "process_group": "own session; the whole group is killed on exit or timeout",
        "workdir": "cwd, HOME and TMPDIR are a fresh scratch folder",
        "environment": "only toolchain, library, thread and device variables of the caller's (scrubbed_environ)",
        "rlimits": {"core": 0, "address_space_bytes": spec.address_space_bytes,
                    "set_by": "prlimit" if shutil.which("prlimit") else "the worker at start-up"},
        "output_limit_bytes": spec.output_limit_bytes,
        "not_enforced": ["seccomp / syscall filtering", "filesystem isolation", "GPU sharing"],
    }


def describe_status(code: int) -> str:
    """How a process ended, from its exit code (negative: the signal that killed it)."""
    if code < 0:
        name = signal_name(code) or f"signal {-code}"
        return f"was killed by {name} ({SIGNAL_MEANING.get(name, 'a fatal signal')})"
    if code == 0:
        return "exited (code 0) before it finished"
    return f"exited with code {code}; the candidate may have called sys.exit() or os._exit()"


def signal_of(exit_code: int | None) -> str | None:
    """The signal a shell-style exit code 128+N reports (the supervisor passes on its worker's death
    that way: 137 is SIGKILL), else None."""
    if exit_code is None or not 128 < exit_code < 128 + 65:
        return None
    return signal_name(128 - exit_code)


SIGNAL_MEANING = {
    "SIGSEGV": "segmentation fault: an out-of-bounds memory access in a kernel or extension",
    "SIGBUS": "bus error: a misaligned or unmapped memory access",
    "SIGABRT": "aborted: a C++ assertion, an uncaught C++ exception or a fatal CUDA error",
    "SIGKILL": "killed from outside, most often by the kernel's out-of-memory killer",
    "SIGFPE": "arithmetic fault, e.g. an integer division by zero",
    "SIGILL": "illegal instruction: code built for another architecture",
}
