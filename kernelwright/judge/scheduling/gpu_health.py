"""Several GPUs in one pool: what each GPU process gets, which GPU a verdict ran on, and a GPU that fails.

- **NVLink multicast off.** Every process the pool starts on a GPU gets `NCCL_NVLS_ENABLE=0`,
  `TORCH_SYMM_MEM_DISABLE_MULTICAST=1` and `NVSHMEM_DISABLE_NVLS=1` unless the environment sets
  them already (then its values: `multicast_off`): the lent multi-GPU machines have no fabric manager's multicast
  objects, and a library that tried them would fail or hang (the device docs).
- **Which GPU.** `gpu_identity(index)`: index, name and UUID from nvidia-smi (asked by the pool, a
  trusted process: nothing the candidate prints reaches it), written to `Verdict.gpu`.
- **A GPU that fails.** A verdict that did not pass is *suspect* (`suspect`) when its worker was
  killed by a signal from outside (the supervisor, which candidate code cannot signal) or its text
  names a device-level failure (device lost, Xid, ECC, CUDA that cannot initialise). Text can be
  printed by a candidate, so suspicion alone decides nothing: the pool then asks the GPU itself
  (`probe_gpu`: nvidia-smi, then a CUDA context and a 1 MiB allocation in a child process on that
  index). Only a GPU that fails the probe is taken out of the pool's rotation, and the evaluation
  is judged again on another GPU with the INFO flag `gpu_failed_rejudged`; a healthy GPU leaves
  the verdict as it was (the candidate's own). With no GPU left the verdict is an internal judge
  error (`outcome`: not judged), never a failure of the candidate.

No torch here: the pool never imports it (the probe's child uses the CUDA driver through ctypes).
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

from ..verdict import INFO, Flag, Verdict

GPU_FAILED = "gpu_failed_rejudged"  # INFO: judged again elsewhere after the GPU it ran on failed
NO_GPU_LEFT = "internal judge error: no GPU of the pool is left"  # the error of a job whose GPUs all failed
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
# texts of device-level failures (the driver's, NVML's, torch's); a candidate can print them too,
# so they only lead to a probe of the GPU
DEVICE_MARKERS = ("GPU is lost", "fallen off the bus", "device lost", "Xid", "uncorrectable ECC",
                  "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE", "cudaErrorDevicesUnavailable",
                  "CUDA_ERROR_DEVICE_UNAVAILABLE", "busy or unavailable", "no CUDA-capable device",
                  "No CUDA GPUs are available", "CUDA driver initialization failed", "cudaErrorInitializationError",
                  "CUDA_ERROR_NOT_INITIALIZED", "CUDA_ERROR_NO_DEVICE", "cudaErrorNoDevice",
                  "NVML_ERROR_GPU_IS_LOST", "Unable to determine the device handle", "CUDA error: initialization error",
                  # what processes see of a GPU that fell off the bus (Xid 79) mid-run
                  "CUDA error: unknown error", "CUDA_ERROR_UNKNOWN")
PROBE_TIMEOUT_S = 60.0
# the probe's child: a context and an allocation on the one visible GPU, through the driver API
PROBE_CODE = """
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
def check(result, what):
    if result:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(result, ctypes.byref(name))
        sys.exit(f"{what}: {(name.value or b'error %d' % result).decode()}")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
check(cuda.cuInit(0), "cuInit")
check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), 1 << 20), "cuMemAlloc")
check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
check(cuda.cuMemFree_v2(ptr), "cuMemFree")
cuda.cuDevicePrimaryCtxRelease(dev)
"""


def multicast_off(env: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """`env` with NVLink multicast switched off: each variable `env` does not set gets the inherited
    environment's value (`environ`, default this process's) where that sets it, else "off". The
    value is written either way: the sandbox passes only some prefixes of the inherited environment."""
    environ = os.environ if environ is None else environ
    return {**{k: environ.get(k, v) for k, v in MULTICAST_OFF.items()}, **env}


def _nvidia_smi(*args: str) -> tuple[int, str]:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return -1, ""
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return 1, f"{type(exc).__name__}: {exc}"
    return done.returncode, (done.stdout + done.stderr).strip()


@functools.lru_cache(maxsize=None)
def gpu_identity(index: str) -> tuple[tuple[str, object], ...]:
    """(("index", i), ("name", ...), ("uuid", ...)) of physical GPU `index`; name and UUID "" when
    nvidia-smi cannot say. A tuple (cached); `dict()` it."""
    code, text = _nvidia_smi("--query-gpu=name,uuid", "--format=csv,noheader", "-i", str(index))
    parts = [p.strip() for p in text.splitlines()[0].split(",")] if code == 0 and text else []
    name, uuid = (", ".join(parts[:-1]), parts[-1]) if len(parts) >= 2 else ("", "")
    return (("index", int(index)), ("name", name), ("uuid", uuid))


def describe(index: str) -> str:
    """"GPU 1 (NVIDIA H200)", for messages."""
    name = dict(gpu_identity(index)).get("name")
    return f"GPU {index} ({name})" if name else f"GPU {index}"


def suspect(verdict: Verdict) -> str:
    """Why the verdict may be its GPU's failure rather than the candidate's ("" when nothing says
    so): the worker killed from outside, or a device-level failure named in its texts."""
    if verdict.passed:
        return ""
    process = verdict.process
    if process is not None and process.signal and not process.timed_out:
        return f"the judge's worker was killed ({process.signal})"
    texts = [verdict.error or "", process.stderr_tail if process else ""] + [t.message or "" for t in verdict.trials]
    for line in "\n".join(texts).splitlines():
        if any(marker in line for marker in DEVICE_MARKERS):
            return line.strip()[:300]
    return ""


def probe_gpu(index: str) -> str:
    """"" when GPU `index` answers (nvidia-smi reads it, a CUDA context on it allocates and
    synchronises), else what failed. Runs in child processes: the caller never touches CUDA."""
    code, text = _nvidia_smi("--query-gpu=index,name", "--format=csv,noheader", "-i", str(index))
    if code > 0 or any(m in text for m in ("lost", "Unable to determine", "Unknown Error")):
        return f"nvidia-smi cannot read it: {text.splitlines()[-1] if text else f'exit {code}'}"
    env = multicast_off({**os.environ, "CUDA_VISIBLE_DEVICES": str(index)})
    try:
        done = subprocess.run([sys.executable, "-c", PROBE_CODE], capture_output=True, text=True, env=env,
                              timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"a CUDA context on it did not answer within {PROBE_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"the probe could not start: {exc}"
    if done.returncode:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return f"a CUDA context on it failed: {lines[-1] if lines else f'exit {done.returncode}'}"
    return ""


def rejudged_flag(failed: list[tuple[str, str, str]], now: str) -> Flag:
    """The INFO flag of an evaluation judged again on GPU `now` after the GPUs in `failed`
    ((index, why, the first run's error line)) failed while it ran."""
    said = "; ".join(f"{describe(gpu)} failed while it judged this candidate ({why}), the run there said: "
                     f"{first or '(nothing)'}" for gpu, why, first in failed)
    where = f"on {describe(now)}" if now else "elsewhere"
    return Flag(GPU_FAILED, INFO, f"{said}. That GPU was taken out of the pool's rotation (not held against "
                                  f"the candidate); judged again {where}, this is that verdict")


def no_gpu_left(verdict: Verdict) -> bool:
    """Whether the verdict says every GPU its pool had failed (a Ray actor's pool: its one GPU)."""
    return (verdict.error or "").startswith(NO_GPU_LEFT)


def no_gpu_left_verdict(problem: str, candidate: str, failed: list[tuple[str, str, str]], config: dict) -> Verdict:
    """An internal judge error (not judged): every GPU of the pool failed; `failed` as in `rejudged_flag`."""
    why = "; ".join(f"{describe(gpu)}: {reason}" for gpu, reason, _ in failed) or "every GPU was taken out of rotation"
    return Verdict(problem=problem, candidate=candidate, status="error",
                   error=f"{NO_GPU_LEFT} to judge it ({why}); judge it again on a machine with a working GPU",
                   config=config,
                   flags=[Flag(GPU_FAILED, INFO, f"{describe(g)} failed: {r}; the run there said: {f or '(nothing)'}")
                          for g, r, f in failed])
