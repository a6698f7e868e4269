"""Confine the current process before it runs candidate code: what it may write, what it may read,
whom it may signal, which privileges it keeps.

`confine(scratch, writable=[...])` asks Linux (Landlock, through `ctypes`; no root, no tool) to
refuse, for this thread and everything it starts from now on, irrevocably:

- every write outside `writable` (default: the scratch folder) and the device files a GPU program
  needs (`/dev/null` & co., `/dev/nvidia*`, `/dev/shm`): the judge's package, its caches, the run
  store and the rest of the file system become read-only;
- every read inside another candidate's scratch folder: in the folder holding scratch folders
  (`private_root`, default the scratch's parent) only entries that existed when `confine` ran and
  are not named like a scratch folder stay readable, so folders created later are hidden too;
- signals and ptrace to processes outside (Landlock scopes, ABI 6), connections to abstract UNIX
  sockets created outside;
- capabilities (root's included): the bounding, effective, permitted and ambient sets are emptied
  except `keep_capabilities` (Nsight Compute needs CAP_SYS_ADMIN where profiling is restricted to
  administrators), and no_new_privs is set, so no set-uid program gives any back.

Landlock covers the calling thread only: `confine` must run while the process has one thread (a
freshly forked child has), and the report says how many there were. Where the kernel has no
Landlock (or a filter forbids it) the report says why and `active` is False: the caller marks the
result unconfined.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import platform
import stat
import struct
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

SCRATCH_PREFIX = "kw-judge-"  # the judge's scratch folders: tempfile.mkdtemp(prefix=SCRATCH_PREFIX)

# Landlock syscalls (the same numbers on x86_64 and aarch64) and access rights, linux/landlock.h
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_FILE_READ = EXECUTE | READ_FILE
_DIR_READ = _FILE_READ | READ_DIR
_FILE_WRITE = WRITE_FILE | TRUNCATE
_DIR_WRITE = (_FILE_WRITE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
              | MAKE_BLOCK | MAKE_SYM | REFER)

PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
_CAP_VERSION_3 = 0x20080522
CAPABILITIES = {"CAP_SYS_ADMIN": 21, "CAP_SYS_PTRACE": 19, "CAP_SYS_MODULE": 16, "CAP_DAC_OVERRIDE": 1}

# device files any program may write (pseudo devices) and those CUDA, NVML and Nsight Compute open
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/shm")
# the process's own /proc entries (the link resolves to /proc/PID of the process confining itself):
# CUDA's driver writes some of them while it initialises (cudaGetDeviceCount fails with error 304,
# "OS call failed", without them: measured on the H100 machine, 2026-11-23). Writing them changes only
# that process; other processes' entries stay read-only.
OWN_PROC = "/proc/self"


@dataclass
class ConfinementReport:
    """What `confine` enforced, for the verdict (`process.isolation["confinement"]`)."""

    active: bool = False  # writes outside `writable` (and devices) are refused by the kernel
    mechanism: str = "none"  # e.g. "landlock ABI 7"
    writable: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # device files left writable
    private_root: str = ""  # folder whose scratch folders (and entries made later) cannot be read
    hidden: int = 0  # scratch folders of other candidates present when confined
    unreadable: list[str] = field(default_factory=list)  # other paths made unreadable (the runner: the judge's)
    scoped: list[str] = field(default_factory=list)  # "signals", "abstract unix sockets"
    capabilities: str = ""  # what happened to the process's capabilities
    no_new_privs: bool = False
    threads: int = 1  # threads of the process when it was confined (Landlock binds the calling one)
    reason: str = ""  # why it is not active, or what is weaker than asked
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        if not self.active:
            return f"not enforced: {self.reason or 'no confinement mechanism'}"
        text = (f"enforced ({self.mechanism}): writable only {', '.join(self.writable)} and device files; "
                f"other candidates' scratch folders in {self.private_root} unreadable")
        if self.scoped:
            text += f"; no {' or '.join(self.scoped)} outside"
        return text + (f"; {self.reason}" if self.reason else "")


@functools.cache
def _libc():
    """The C library through the running program's own symbols. Not `ctypes.util.find_library`:
    that may start `ldconfig` or `gcc` and write a temporary file, which a process that has just
    confined itself cannot (under Nsight Compute's injection it did, and the launcher died)."""
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> tuple[int, str]:
    """(Landlock ABI version, "") or (0, why not)."""
    if platform.system() != "Linux":
        return 0, f"Landlock is Linux-only (this is {platform.system()})"
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if version < 0:
        err = ctypes.get_errno()
        return 0, f"Landlock unavailable ({os.strerror(err)}; the kernel lacks it or a filter forbids it)"
    return int(version), ""


def confine(scratch: str | os.PathLike, writable: Sequence[str | os.PathLike] | None = None, *,
            private_root: str | os.PathLike | None = None, readable: Sequence[str | os.PathLike] = (),
            keep_capabilities: Sequence[str] = (), hidden: Sequence[str | os.PathLike] = (),
            scope_signals: bool = True) -> ConfinementReport:
    """Confine this process (see the module docstring). `scratch` stays readable (but for what lies
    in `hidden`); `writable` defaults to `[scratch]`; `readable` are extra paths inside
    `private_root` that stay readable; `hidden` are paths that become unreadable (the checker's
    folders and the judge's caches of reference outputs and baselines, for the runner);
    `scope_signals` False leaves signals to processes outside allowed (the checker stops and
    continues its runner). Never raises: a failure leaves the process as it was, with
    `active=False` and the reason."""
    started = time.perf_counter()
    scratch = Path(scratch).resolve()
    report = ConfinementReport(writable=[str(Path(p).resolve()) for p in (writable or [scratch])],
                               private_root=str(Path(private_root or scratch.parent).resolve()),
                               threads=thread_count())
    abi, why = landlock_abi()
    if abi < 1:
        report.reason = why
        report.capabilities = drop_capabilities(keep_capabilities)
        report.seconds = round(time.perf_counter() - started, 4)
        return report
    try:
        _apply_landlock(report, abi, scratch, [Path(p).resolve() for p in readable],
                        [Path(p).resolve() for p in hidden], scope_signals)
    except OSError as exc:
        report.active, report.reason = False, f"Landlock refused the rules: {exc}"
    report.capabilities = drop_capabilities(keep_capabilities)
    if report.threads > 1:
        report.reason = (f"{report.threads} threads when confined: Landlock binds only the calling thread "
                         "and what it starts")
    report.seconds = round(time.perf_counter() - started, 4)
    return report


def thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _apply_landlock(report: ConfinementReport, abi: int, scratch: Path, readable: list[Path],
                    hidden: list[Path] | None = None, scope_signals: bool = True) -> None:
    handled = _DIR_READ | (_DIR_WRITE & ~(REFER if abi < 2 else 0) & ~(TRUNCATE if abi < 3 else 0))
    scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | (SCOPE_SIGNAL if scope_signals else 0)) if abi >= 6 else 0
    hidden = hidden or []
    attr = struct.pack("QQQ", handled, 0, scoped) if abi >= 6 else struct.pack("QQ", handled, 0) if abi >= 4 \
        else struct.pack("Q", handled)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset: " + os.strerror(ctypes.get_errno()))
    try:
        root = Path(report.private_root)
        whole = [p for p in (scratch, *readable) if not any(h == p or p in h.parents for h in hidden)]
        grants, count = readable_paths(root, set(whole), hidden)
        report.hidden = count
        report.unreadable = [str(h) for h in hidden]
        for path in [*grants, *whole]:
            _add_rule(libc, ruleset, path, _DIR_READ & handled)
        for path in map(Path, report.writable):
            _add_rule(libc, ruleset, path, handled)
        report.devices = [p for p in device_paths() if _add_rule(libc, ruleset, Path(p), handled)]
        if _add_rule(libc, ruleset, Path(OWN_PROC), _DIR_READ | _FILE_WRITE):
            report.devices.append(OWN_PROC)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        report.no_new_privs = True
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self: " + os.strerror(ctypes.get_errno()))
    finally:
        os.close(ruleset)
    report.active, report.mechanism = True, f"landlock ABI {abi}"
    report.scoped = ["ptrace"] + (["signals"] if scoped & SCOPE_SIGNAL else []) + \
        (["abstract unix sockets"] if scoped & SCOPE_ABSTRACT_UNIX_SOCKET else [])


def _add_rule(libc, ruleset: int, path: Path, access: int) -> bool:
    """Allow `access` beneath `path` (file-only rights for a non-directory); False when it cannot be
    opened (gone, or a dangling link)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_READ | _FILE_WRITE
        attr = ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12)
        if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), attr,
                        ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            if err == 22:  # EINVAL: no right of this set applies to this kind of file
                return False
            raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
        return True
    finally:
        os.close(fd)


def readable_paths(private_root: Path, visible: set[Path], hidden: list[Path] | None = None
                   ) -> tuple[list[Path], int]:
    """Everything readable except scratch folders in `private_root` and the `hidden` paths: the
    entries of every folder on the way from / to `private_root` and to each hidden path, minus
    those folders themselves, the hidden paths, and scratch folders not in `visible` (their count
    is returned). A link is followed unless it leads into a folder on the way or a hidden path."""
    hidden = hidden or []
    expand = {private_root, *private_root.parents}
    for path in hidden:
        expand.update(path.parents)
    expand.difference_update(hidden)
    blocked = expand | set(hidden)
    grants, count = [], 0
    for folder in sorted(expand, key=lambda p: len(p.parts)):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if path in expand or path in visible or path in blocked:
                continue
            if folder == private_root and entry.name.startswith(SCRATCH_PREFIX):
                count += 1
                continue
            if not entry.is_symlink():
                grants.append(path)
                continue
            target = _link_target(path)
            if target is not None and not _reaches(target, blocked, private_root, hidden):
                grants.append(target)
    return grants, count


def _link_target(path: Path) -> Path | None:
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None


def _reaches(target: Path, blocked: set[Path], private_root: Path, hidden: list[Path] | None = None) -> bool:
    """A link to a folder on the way to the hidden ones, into the private root or into a hidden
    path would expose them (a rule covers everything beneath the file it is given)."""
    return target in blocked or private_root in target.parents or \
        any(h == target or h in target.parents for h in hidden or [])


def device_paths() -> list[str]:
    found = [p for p in DEVICE_FILES if os.path.exists(p)]
    for pattern in DEVICE_GLOBS:
        found += sorted(glob.glob(pattern))
    return found


# ---------------------------------------------------------------- capabilities


def drop_capabilities(keep: Sequence[str] = ()) -> str:
    """Empty the bounding, ambient, effective, permitted and inheritable capability sets except
    `keep` (names such as "CAP_SYS_ADMIN"); a description of the outcome."""
    held = _held_capabilities()
    if held == 0:
        return "none held"
    keep_bits = 0
    for name in keep:
        keep_bits |= 1 << CAPABILITIES[name]
    libc = _libc()
    last = _last_capability()
    for cap in range(last + 1):
        if not keep_bits & (1 << cap):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: nothing to drop then
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("Ii", _CAP_VERSION_3, 0)
    kept = held & keep_bits
    data = struct.pack("IIIIII", kept & 0xFFFFFFFF, kept & 0xFFFFFFFF, 0, kept >> 32, kept >> 32, 0)
    if libc.capset(ctypes.create_string_buffer(header, 8), ctypes.create_string_buffer(data, 24)) != 0:
        return f"unchanged: capset failed ({os.strerror(ctypes.get_errno())})"
    names = [name for name in keep if kept & (1 << CAPABILITIES[name])]
    return "dropped all" + (f" except {', '.join(names)}" if names else "")


def _held_capabilities() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def _last_capability() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 40
