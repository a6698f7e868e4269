"""Stream memory operations (`cuStreamWaitValue32` / `cuStreamWriteValue32`): how the checker and
the runner order their GPU work across processes without either waiting on the host.

A stream that waits on a value (`wait(stream, address, n)`) stops there until the 32-bit word at
`address` is at least `n`; a stream that writes one (`write(stream, address, n)`) stores it when it
reaches that point. The words live in device memory of the checker's, opened by the runner through
CUDA IPC. The calls go straight to the driver (`libcuda`, through ctypes): torch has no binding.

Stdlib only: streams and addresses are passed as integers (`torch.cuda.Stream.cuda_stream`,
`Tensor.data_ptr()`).
"""
from __future__ import annotations

import ctypes
import functools

WAIT_GEQ = 0x0  # CU_STREAM_WAIT_VALUE_GEQ


class MemopsError(RuntimeError):
    """The driver lacks stream memory operations, or refused one."""


@functools.cache
def _functions() -> tuple:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise MemopsError(f"the CUDA driver library cannot be loaded: {exc}") from exc
    found = []
    for name in ("cuStreamWaitValue32", "cuStreamWriteValue32"):
        function = getattr(lib, name + "_v2", None) or getattr(lib, name, None)
        if function is None:
            raise MemopsError(f"the CUDA driver has no {name}")
        function.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        function.restype = ctypes.c_int
        found.append(function)
    return tuple(found)


def available() -> tuple[bool, str]:
    """(True, "") when the driver has stream memory operations, else (False, why)."""
    try:
        _functions()
    except MemopsError as exc:
        return False, str(exc)
    return True, ""


def wait(stream: int, address: int, value: int) -> None:
    """Make `stream` wait until the word at `address` is >= `value`."""
    rc = _functions()[0](ctypes.c_void_p(stream), ctypes.c_uint64(address), ctypes.c_uint32(value), WAIT_GEQ)
    if rc != 0:
        raise MemopsError(f"cuStreamWaitValue32 failed (CUresult {rc})")


def write(stream: int, address: int, value: int) -> None:
    """Make `stream` store `value` into the word at `address` when it gets there."""
    rc = _functions()[1](ctypes.c_void_p(stream), ctypes.c_uint64(address), ctypes.c_uint32(value), 0)
    if rc != 0:
        raise MemopsError(f"cuStreamWriteValue32 failed (CUresult {rc})")
