"""Device memory shared between the checker and the runner, through the CUDA driver's IPC handles.

Two directions, one mechanism (`libcuda` through ctypes; torch's own IPC path counts references
across processes, which keeps a shared block from being reused and moves outputs to new addresses
every call):
- the checker allocates its input buffers and flag words with `alloc` (its own allocations, apart
  from torch's caching allocator, so nothing else of the checker's lies in what it exports) and
  exports them (`export`); the runner maps them once (`open_handle`);
- the runner exports the allocation an output lies in (`export`: the base of the allocation found
  with cuMemGetAddressRange, a handle made once per allocation) and the checker maps it once; an
  output is then an (allocation, offset) pair, and the same block reused in the next call is the
  same pair, so the checker can copy it out the moment `done` is written (`checker.link`).

`tensor_at` wraps mapped memory as a torch tensor (no copy). Handles are 64 bytes.
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import torch

HANDLE_BYTES = 64
LAZY_ENABLE_PEER_ACCESS = 0x1


class IpcError(RuntimeError):
    """The driver refused an allocation, an export or a mapping (the text says which and why)."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]  # c_char would stop at the first NUL


@functools.cache
def _cuda():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise IpcError(f"the CUDA driver library cannot be loaded: {exc}") from exc
    table = {
        "alloc": ("cuMemAlloc_v2", [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]),
        "free": ("cuMemFree_v2", [ctypes.c_uint64]),
        "range": ("cuMemGetAddressRange_v2", [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                              ctypes.c_uint64]),
        "get": ("cuIpcGetMemHandle", [ctypes.POINTER(_Handle), ctypes.c_uint64]),
        "open": ("cuIpcOpenMemHandle_v2", [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]),
        "close": ("cuIpcCloseMemHandle", [ctypes.c_uint64]),
        "error": ("cuGetErrorString", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]),
    }
    found = {}
    for key, (name, argtypes) in table.items():
        function = getattr(lib, name, None)
        if function is None:
            raise IpcError(f"the CUDA driver has no {name}")
        function.argtypes, function.restype = argtypes, ctypes.c_int
        found[key] = function
    return found


def _check(rc: int, what: str) -> None:
    if rc == 0:
        return
    text = ctypes.c_char_p()
    try:
        _cuda()["error"](rc, ctypes.byref(text))
    except IpcError:
        pass
    message = text.value.decode() if text.value else f"CUresult {rc}"
    if rc == 2:  # CUDA_ERROR_OUT_OF_MEMORY: say it the way the pool recognises
        message = f"CUDA out of memory ({message})"
    raise IpcError(f"{what}: {message}")


@dataclass
class Allocation:
    """Device memory from `alloc`: freed by `free()` (or left to the process's end)."""

    ptr: int
    nbytes: int

    def free(self) -> None:
        if self.ptr:
            _check(_cuda()["free"](ctypes.c_uint64(self.ptr)), "cuMemFree")
            self.ptr = 0


def alloc(nbytes: int) -> Allocation:
    """`nbytes` of device memory in the current context (torch's primary context, made current by
    any torch.cuda call before)."""
    ptr = ctypes.c_uint64()
    _check(_cuda()["alloc"](ctypes.byref(ptr), ctypes.c_size_t(max(int(nbytes), 1))),
           f"cuMemAlloc of {nbytes} bytes")
    return Allocation(int(ptr.value), int(nbytes))


def allocation_of(ptr: int) -> tuple[int, int]:
    """(base, size) of the allocation `ptr` lies in."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(_cuda()["range"](ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(int(ptr))),
           "cuMemGetAddressRange")
    return int(base.value), int(size.value)


def export(base: int) -> bytes:
    """The IPC handle of the allocation starting at `base`."""
    handle = _Handle()
    _check(_cuda()["get"](ctypes.byref(handle), ctypes.c_uint64(int(base))), "cuIpcGetMemHandle")
    return bytes(bytearray(handle.reserved))


def open_handle(handle: bytes) -> int:
    """Map another process's allocation; its base address here."""
    if len(handle) != HANDLE_BYTES:
        raise IpcError(f"an IPC handle has {HANDLE_BYTES} bytes, not {len(handle)}")
    ptr = ctypes.c_uint64()
    _check(_cuda()["open"](ctypes.byref(ptr), _Handle.from_buffer_copy(handle), LAZY_ENABLE_PEER_ACCESS),
           "cuIpcOpenMemHandle")
    return int(ptr.value)


def close_handle(ptr: int) -> None:
    _check(_cuda()["close"](ctypes.c_uint64(int(ptr))), "cuIpcCloseMemHandle")


class _Exposed:
    """The CUDA array interface of raw bytes, for torch.as_tensor (no copy)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (int(nbytes),), "typestr": "|u1", "data": (int(ptr), False),
                                         "version": 3, "strides": None, "stream": None}


def tensor_at(ptr: int, nbytes: int, dtype, shape, stride, offset: int, device):
    """A tensor over `nbytes` of mapped memory at `ptr`: `dtype` elements laid out by `shape`,
    `stride` and `offset` (in elements), checked to lie inside the mapping."""
    raw = torch.as_tensor(_Exposed(ptr, nbytes), device=device)
    size = torch.empty((), dtype=dtype).element_size()
    usable = (nbytes // size) * size
    typed = raw[:usable].view(dtype)
    extent = typed.numel()
    shape, stride = [int(s) for s in shape], [int(s) for s in stride]
    last = offset + sum((s - 1) * st for s, st in zip(shape, stride, strict=True) if s > 0)
    if offset < 0 or any(s < 0 for s in shape) or any(st < 0 for st in stride) or \
            (all(s > 0 for s in shape) and last >= extent):
        raise IpcError(f"a tensor of shape {shape}, strides {stride} at offset {offset} does not fit its "
                       f"{extent}-element allocation")
    return typed.as_strided(shape, stride, offset)
