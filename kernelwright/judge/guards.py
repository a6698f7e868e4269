"""Hack guards: each turns one known way of passing without doing the work into a `Flag`.

Import this module before any candidate code runs: it captures the synchronisation function the
judge itself uses, so a candidate replacing `torch.cuda.synchronize` cannot fake a finished kernel.
"""
from __future__ import annotations

import ctypes
import functools
import os
import resource
import sys
import time
import types
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
import torch.testing

from .checks import check_flag
from .verdict import REJECT, WARN, Flag

_SYNCHRONIZE = torch.cuda.synchronize  # captured at import, before candidate code exists
M_PERTURB = -6  # glibc mallopt(): fill malloc'd memory with ~byte, freed memory with byte
PERTURB_BYTE = 1  # fresh allocations then read 0xFE: -1.7e38 in float32, NaN in float16

# --------------------------------------------------------------------------- process set-up


def synchronize(device: str) -> None:
    """Device-wide synchronisation with the function captured before any candidate ran."""
    if device.startswith("cuda"):
        _SYNCHRONIZE()


def enable_malloc_perturb() -> bool:
    """Make every fresh CPU allocation hold 0xFE bytes (glibc only), so torch.empty outputs that
    are never written cannot pass by luck. The sandbox also sets MALLOC_PERTURB_ for CPU runs, but
    glibc reads it only when a process starts: a worker forked from a warm server sets it here."""
    try:
        return bool(ctypes.CDLL(None).mallopt(M_PERTURB, PERTURB_BYTE)) or bool(os.environ.get("MALLOC_PERTURB_"))
    except (OSError, AttributeError):
        return bool(os.environ.get("MALLOC_PERTURB_"))


def apply_thread_count() -> None:
    """OpenMP reads OMP_NUM_THREADS when torch loads; a worker forked from a warm server loaded it
    before its lane's value was set, so torch is told again (a cold worker gets the same number)."""
    wanted = os.environ.get("OMP_NUM_THREADS", "")
    if wanted.isdigit() and int(wanted) > 0 and torch.get_num_threads() != int(wanted):
        torch.set_num_threads(int(wanted))


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the judge that started it dies (a bench script killed
    by `timeout`, a crashed driver): an orphaned worker would keep the GPU, its memory and its
    lock. Exits at once when that parent ($KW_PARENT_PID) died before the request was made (this
    process was already handed to init)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, 9)
    except (OSError, AttributeError):
        return  # not Linux/glibc: the sandbox's time limits still apply
    parent = os.environ.get("KW_PARENT_PID", "")
    if parent.isdigit() and int(parent) != 1 and os.getppid() == 1:
        os._exit(3)


def apply_rlimits_from_env() -> None:
    """Limits the sandbox asked for, set here when `prlimit` was not available to set them."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    limit = os.environ.get("KW_RLIMIT_AS_BYTES")
    if limit:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY or soft > int(limit):
            resource.setrlimit(resource.RLIMIT_AS, (int(limit), hard))


# --------------------------------------------------------------------------- precision


def set_full_precision(allow_tf32: bool) -> None:
    """The reference runs in true fp32 unless TF32 is explicitly allowed (torch's cuDNN default is on)."""
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32
    torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")


_PRECISION_READERS = {
    "cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    "float32_matmul_precision": torch.get_float32_matmul_precision,
    "cuda.matmul.allow_fp16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    "cuda.matmul.allow_bf16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    "cuda.matmul.fp32_precision": lambda: torch.backends.cuda.matmul.fp32_precision,
    "cudnn.conv.fp32_precision": lambda: torch.backends.cudnn.conv.fp32_precision,
}


def precision_state() -> dict[str, object]:
    """Every precision switch torch exposes; a reader that raises (torch refuses mixed legacy/new
    TF32 APIs) records the error, which itself shows that someone changed the switches."""
    state = {}
    for name, read in _PRECISION_READERS.items():
        try:
            state[name] = read()
        except AttributeError:
            continue  # this torch version has no such switch
        except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError for mixed APIs
            state[name] = f"error: {type(exc).__name__}"
    return state


def precision_flag(before: dict, after: dict, allow_tf32: bool) -> Flag | None:
    changed = {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    if not changed:
        return None
    detail = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(changed.items()))
    severity = WARN if allow_tf32 else REJECT
    return check_flag("precision_switches", severity,
                      f"the candidate changed global precision settings ({detail}): they change "
                      "the numerics of everything else in the process. Lower precision inside your own kernels instead, "
                      "where the measured error decides")


# --------------------------------------------------------------------------- monkeypatching


def guarded_targets(extra: dict[str, object] | None = None) -> dict[str, tuple[object, bool]]:
    """name -> (namespace, additions count as tampering). Namespaces whose functions the judge or
    the timer relies on, or that decide what a comparison means."""
    targets = {
        "torch": (torch, False), "torch._C": (torch._C, False), "torch.nn.functional": (F, False),
        "torch.linalg": (torch.linalg, False), "torch.testing": (torch.testing, False),
        "torch.cuda": (torch.cuda, False), "time": (time, False),
        "torch.Tensor": (torch.Tensor, True), "torch._C.TensorBase": (torch._C.TensorBase, True),
        "torch.nn.Module": (torch.nn.Module, True), "torch.cuda.Event": (torch.cuda.Event, True),
    }
    for name, namespace in (extra or {}).items():
        targets[name] = (namespace, False)
    return targets


def _entries(namespace) -> dict[str, object]:
    items = vars(namespace).items()
    if isinstance(namespace, types.ModuleType):
        return {k: v for k, v in items if callable(v) and not isinstance(v, types.ModuleType)}
    return dict(items)


@dataclass
class IdentitySnapshot:
    """The identity of every guarded function, taken before candidate code is loaded."""

    targets: dict[str, tuple[object, bool]]
    saved: dict[str, dict[str, object]] = field(default_factory=dict)

    @classmethod
    def take(cls, targets: dict[str, tuple[object, bool]]) -> "IdentitySnapshot":
        snap = cls(targets)
        snap.saved = {name: _entries(ns) for name, (ns, _) in targets.items()}
        return snap

    def changes(self) -> list[str]:
        """Qualified names replaced, removed (or, for classes, added) since the snapshot."""
        found = []
        for name, (namespace, additions) in self.targets.items():
            now, before = _entries(namespace), self.saved[name]
            found += [f"{name}.{k}" for k, v in before.items() if now.get(k, _MISSING) is not v]
            if additions:
                found += [f"{name}.{k}" for k in now.keys() - before.keys()]
        return sorted(found)

    def restore(self, qualified: list[str]) -> None:
        """Put the originals of `qualified` names back (or remove them where they were added), so
        the judge's own checks run on real torch again."""
        for full in qualified:
            for name, (namespace, _) in self.targets.items():
                if full.startswith(name + ".") and full[len(name) + 1:] in _entries(namespace) | self.saved[name]:
                    key = full[len(name) + 1:]
                    if key in self.saved[name]:
                        _try_setattr(namespace, key, self.saved[name][key])
                    else:
                        _try_delattr(namespace, key)
                    break


_MISSING = object()


def _try_setattr(namespace, key, value) -> None:
    try:
        setattr(namespace, key, value)
    except (AttributeError, TypeError):
        pass


def _try_delattr(namespace, key) -> None:
    try:
        delattr(namespace, key)
    except (AttributeError, TypeError):
        pass


# what dynamo itself patches the first time it compiles a frame: not the candidate's doing
DYNAMO_PATCHES = frozenset({"torch.nn.Module.__init__", "torch.nn.Module.__setstate__",
                            "torch.nn.Module.___needs_generation_tag_patch"})


def monkeypatch_flag(changed: list[str], when: str) -> Flag:
    shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
    return check_flag("identity_snapshot", REJECT,
                      f"the candidate replaced functions the judge relies on ({when}): {shown}. "
                      "A kernel must not patch torch, timing or comparison functions")


# --------------------------------------------------------------------------- memory poisoning


def poison_allocator(device: str, sizes: list[int]) -> None:
    """Make memory the candidate may be handed hold poison bytes, so outputs it never writes show.

    GPU: empty the caching allocator, then allocate blocks of the sizes the trial will need (and one
    large block), fill them with 0xFF (NaN in every float type) and free them back into the cache.
    CPU: fill a scratch buffer likewise; glibc's malloc perturbation covers fresh allocations.
    """
    total = sum(sizes)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        blocks = [torch.empty(max(n, 1), dtype=torch.uint8, device=device).fill_(0xFF)
                  for n in sizes for _ in range(2)]
        blocks.append(torch.empty(max(2 * total, 1), dtype=torch.uint8, device=device).fill_(0xFF))
        synchronize(device)
        del blocks
    else:
        scratch = torch.empty(max(min(2 * total, 256 << 20), 1), dtype=torch.uint8).fill_(0xFE)
        del scratch


# --------------------------------------------------------------------------- torch.compile


def dynamo_frames() -> int:
    """Frames torch.compile / dynamo has compiled in this process so far."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is None:
        return 0
    return int(dynamo.counters["frames"].get("total", 0))


class CompileTracker:
    """Counts calls of torch.compile and torch._dynamo.optimize made after `install()`.

    Dynamo's frame counter alone misses a compiled function that only ran under the judge's op
    recorder (dynamo does not trace under a dispatch mode), so the entry points are counted too.
    Install before the identity snapshot: the wrappers are then the guarded originals.
    """

    def __init__(self):
        self.calls: list[str] = []
        self.originals: list[tuple[object, str, object]] = []

    def install(self) -> "CompileTracker":
        import torch._dynamo  # noqa: PLC0415 -- torch._dynamo takes about a second to import and patches torch when it loads: only when the tracker is installed

        for owner, name, label in ((torch, "compile", "torch.compile"),
                                   (torch._dynamo, "optimize", "torch._dynamo.optimize")):
            original = getattr(owner, name, None)
            if original is not None:
                self.originals.append((owner, name, original))
                setattr(owner, name, self._wrap(original, label))
        return self

    def uninstall(self) -> None:
        for owner, name, original in self.originals:
            setattr(owner, name, original)
        self.originals = []

    def _wrap(self, original, label: str):
        @functools.wraps(original)
        def counted(*args, **kwargs):
            self.calls.append(label)
            return original(*args, **kwargs)

        return counted


def dynamo_flag(frames_before: int, compile_calls: list[str] | None = None,
                dynamo_patched: bool = False, frames: int | None = None) -> Flag | None:
    """torch.compile / dynamo used by the candidate: by its entry points, compiled frames, or the
    patches dynamo applies to nn.Module the first time it runs. `frames`: compiled frames counted
    elsewhere (the runner's process), else this process's since `frames_before`."""
    frames = dynamo_frames() - frames_before if frames is None else frames
    calls = sorted(set(compile_calls or []))
    if frames <= 0 and not calls and not dynamo_patched:
        return None
    evidence = ", ".join(calls + ([f"{frames} compiled frames"] if frames > 0 else [])
                         + (["dynamo's patches of torch.nn.Module"] if dynamo_patched else []))
    return check_flag("dynamo_use", REJECT,
                      f"the candidate used torch.compile / dynamo ({evidence}): inductor writes those kernels, not "
                      "the candidate")


# --------------------------------------------------------------------------- inputs and caching


def mutation_flag(mutated: list[int]) -> Flag:
    which = ", ".join(str(i) for i in mutated)
    return check_flag("input_fingerprint", REJECT,
                      f"ModelNew.forward changed its input tensor(s) {which} in place; the "
                      "reference leaves its inputs untouched, so callers would see corrupted inputs")


def output_cache_flag(detail: str) -> Flag:
    return check_flag("output_refill", REJECT,
                      "ModelNew returned a stale result after the same input buffers were "
                      f"refilled with new values ({detail}): outputs must be recomputed on every call, not cached "
                      "by data_ptr, shape or call count")


def uninitialized_flag(count: int) -> Flag:
    return check_flag("poisoned_memory", REJECT,
                      f"{count} output elements still hold the judge's poison bytes: the "
                      "kernel never wrote them (e.g. torch.empty with a grid that misses elements)")
