"""The call channel between the checker (trusted) and the runner (candidate code): its frames, its
messages and how tensors travel. Both sides import this module and nothing else of each other.

A frame is a JSON header and binary payloads on a UNIX stream socket:

    !I header length, !I payload count, header (UTF-8 JSON), then per payload !Q length, bytes

with open file descriptors passed beside it (SCM_RIGHTS). Everything the runner sends is
candidate-controlled: lengths are bounded (`MAX_HEADER`, `max_payload`), descriptors are checked
against what the checker expects, and nothing is ever unpickled.

Tensors travel as descriptors (`describe` / `rebuild`):
- "cuda": a place in a device allocation of the sender's, whose IPC handle went with this frame or
  an earlier one (`Exports` / `Imports`, `cudaipc`): the receiver maps the sender's memory once and
  reads it there (no copy);
- "empty": a tensor without elements;
- "shm": a view into a shared memory arena (a memfd passed with the frame): the checker's inputs
  on a CPU run;
- "bytes": the tensor's contents in a payload (CPU outputs);
- "input": a view of one of the call's inputs (an output that aliases an input: it is the
  checker's own memory already);
- "value": a plain JSON value (ints, floats, booleans, None, strings and lists of them).

Messages (checker -> runner; the runner answers each with one frame):
    load     problem, candidate, sizes, seed, device, timing mode -> compile record
    build    -> ModelNew built on the device, or the error
    inputs   descriptors of the shared input buffers (and the flag words on a GPU)
    call     n, phase, record -> outputs (descriptors) or error
    burst    milliseconds -> calls made (the energy window)
    sync     -> the runner's device work has drained
    trim     -> the runner's cached device blocks given back (the checker ran out of memory beside it)
    report   -> what the runner observed so far (launches, ops, kernels per call)
    finish   -> the final report; the runner exits
"""
from __future__ import annotations

import base64
import json
import mmap
import os
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import torch

from . import cudaipc

MAX_HEADER = 4 << 20
MAX_PAYLOAD = 4 << 30  # bytes of all payloads of one frame (CPU outputs of a shrunk problem are far smaller)
MAX_FDS = 8
_HEAD = struct.Struct("!II")
_LEN = struct.Struct("!Q")

# the ops of the channel (see the module docstring)
LOAD, BUILD, INPUTS, CALL, BURST, SYNC, REPORT, FINISH = ("load", "build", "inputs", "call", "burst", "sync", "report",
                                                         "finish")
TRIM = "trim"  # the runner gives its allocator's unused blocks back (the checker ran out of memory)


class ChannelError(Exception):
    """The other side closed the channel, sent a malformed frame, or did not answer in time."""


@dataclass
class Frame:
    header: dict[str, Any]
    payloads: list[bytes] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)


def send(sock: socket.socket, header: dict[str, Any], payloads: list[bytes] | None = None,
         fds: list[int] | None = None) -> None:
    payloads = payloads or []
    head = json.dumps(header).encode()
    if len(head) > MAX_HEADER:
        raise ChannelError(f"header of {len(head)} bytes exceeds {MAX_HEADER}")
    first = _HEAD.pack(len(head), len(payloads)) + head
    if fds:
        socket.send_fds(sock, [first], list(fds))
    else:
        sock.sendall(first)
    for payload in payloads:
        sock.sendall(_LEN.pack(len(payload)))
        sock.sendall(payload)


def receive(sock: socket.socket, timeout: float | None = None, max_payload: int = MAX_PAYLOAD) -> Frame:
    """One frame; ChannelError when the peer closed, exceeded a bound or `timeout` seconds passed."""
    sock.settimeout(timeout)
    try:
        data, fds, _, _ = socket.recv_fds(sock, _HEAD.size, MAX_FDS)
        if not data:
            raise ChannelError("the other side closed the channel")
        data += _exactly(sock, _HEAD.size - len(data))
        head_len, count = _HEAD.unpack(data)
        if head_len > MAX_HEADER or count > 4096:
            raise ChannelError(f"frame too large (header {head_len} bytes, {count} payloads)")
        header = json.loads(_exactly(sock, head_len))
        if not isinstance(header, dict):
            raise ChannelError("the frame's header is not a JSON object")
        payloads, total = [], 0
        for _ in range(count):
            (length,) = _LEN.unpack(_exactly(sock, _LEN.size))
            total += length
            if total > max_payload:
                raise ChannelError(f"payloads exceed {max_payload} bytes")
            payloads.append(_exactly(sock, length))
        return Frame(header, payloads, list(fds))
    except socket.timeout as exc:
        raise ChannelError(f"no answer within {timeout:g} s") from exc
    except (OSError, ValueError) as exc:
        raise ChannelError(f"the channel broke: {type(exc).__name__}: {exc}") from exc
    finally:
        sock.settimeout(None)


def _exactly(sock: socket.socket, count: int) -> bytes:
    chunks, left = [], count
    while left > 0:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ChannelError("the other side closed the channel mid-frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# --------------------------------------------------------------------------- tensors


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype(name: str):
    value = getattr(torch, str(name), None)
    if not isinstance(value, torch.dtype):
        raise ChannelError(f"unknown dtype {name!r}")
    return value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode())


def _layout(t) -> dict[str, Any]:
    return {"dtype": dtype_name(t.dtype), "shape": list(t.shape), "stride": list(t.stride()),
            "offset": int(t.storage_offset())}


def describe(value, payloads: list[bytes], inputs: list | None = None, exports: "Exports | None" = None
             ) -> dict[str, Any]:
    """The descriptor of one value to send; tensor contents that must be copied go to `payloads`.
    `inputs`: the call's inputs (an output that views one is described as such); `exports`: this
    side's exported device allocations (a CUDA tensor is sent as a place in one of them)."""
    if not isinstance(value, torch.Tensor):
        return {"kind": "value", "value": _plain(value)}
    tensor = value.detach()
    storage = tensor.untyped_storage()
    for index, source in enumerate(inputs or []):
        if isinstance(source, torch.Tensor) and source.device == tensor.device and source.numel() and \
                source.untyped_storage().data_ptr() == storage.data_ptr():
            base = source.storage_offset()
            return {"kind": "input", "index": index, "device": str(tensor.device),
                    **_layout(tensor), "offset": int(tensor.storage_offset() - base)}
    if tensor.numel() == 0:
        return {"kind": "empty", "device": str(tensor.device), "dtype": dtype_name(tensor.dtype),
                "shape": list(tensor.shape)}
    if tensor.is_cuda:
        if exports is None:
            raise ChannelError("a CUDA tensor needs an export table to travel")
        return exports.describe(tensor)
    contiguous = tensor.contiguous()
    payloads.append(contiguous.view(-1).view(torch.uint8).numpy().tobytes())
    return {"kind": "bytes", "payload": len(payloads) - 1, "device": "cpu", "dtype": dtype_name(tensor.dtype),
            "shape": list(tensor.shape)}


def _plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    raise ChannelError(f"a {type(value).__name__} cannot travel between the checker and the runner")


def rebuild(desc: dict[str, Any], payloads: list[bytes], arenas: list | None = None, inputs: list | None = None,
            imports: "Imports | None" = None):
    """The value a descriptor describes, on this side (see `describe`)."""
    kind = desc.get("kind")
    if kind == "value":
        return desc.get("value")
    dtype = _dtype(desc["dtype"])
    shape = [int(s) for s in desc["shape"]]
    if kind == "empty":
        return torch.empty(shape, dtype=dtype, device=str(desc.get("device") or "cpu"))
    if kind == "bytes":
        data = payloads[int(desc["payload"])]
        tensor = torch.frombuffer(bytearray(data), dtype=dtype) if data else torch.empty(0, dtype=dtype)
        return tensor.reshape(shape)
    stride = [int(s) for s in desc["stride"]]
    if kind == "input":
        source = (inputs or [])[int(desc["index"])]
        base = source.storage_offset()
        return _view(source.untyped_storage(), dtype, source.device, base + int(desc["offset"]), shape, stride)
    if kind == "shm":
        arena = (arenas or [])[int(desc["arena"])]
        data = torch.frombuffer(arena, dtype=torch.uint8)
        return _view(data.untyped_storage(), dtype, torch.device("cpu"), int(desc["offset"]), shape, stride)
    if kind == "cuda":
        if imports is None:
            raise ChannelError("a CUDA tensor arrived without a table of mapped allocations")
        return imports.tensor(desc, dtype, shape, stride)
    raise ChannelError(f"unknown tensor descriptor kind {kind!r}")


def _view(storage, dtype, device, offset: int, shape: list[int], stride: list[int]):
    extent = storage.nbytes() // max(torch.empty((), dtype=dtype).element_size(), 1)
    last = offset + sum((s - 1) * st for s, st in zip(shape, stride, strict=True) if s > 0)
    if any(s < 0 for s in shape) or any(st < 0 for st in stride) or offset < 0 or \
            (all(s > 0 for s in shape) and last >= extent):
        raise ChannelError(f"a tensor of shape {shape}, strides {stride} at offset {offset} does not fit its "
                           f"storage of {extent} elements")
    return torch.empty(0, dtype=dtype, device=device).set_(storage, offset, shape, stride)


# --------------------------------------------------------------------------- device memory across processes


class Exports:
    """This side's device allocations the other side has been sent handles of (`cudaipc`): a CUDA
    tensor travels as (allocation id, byte offset, layout); a handle goes out once per allocation,
    in the `handles` of the next frame. An allocation freed and made again at the same address has
    another handle, hence another id."""

    def __init__(self):
        self.ids: dict[tuple[int, bytes], int] = {}
        self.new: list[dict[str, Any]] = []

    def describe(self, tensor) -> dict[str, Any]:
        base, size = cudaipc.allocation_of(tensor.data_ptr())
        handle = cudaipc.export(base)
        key = (base, handle)
        if key not in self.ids:
            self.ids[key] = len(self.ids)
            self.new.append({"id": self.ids[key], "handle": _b64(handle), "size": size})
        return {"kind": "cuda", "alloc": self.ids[key], "byte_offset": int(tensor.data_ptr() - base),
                "device": str(tensor.device), **_layout(tensor), "offset": 0}

    def take_new(self) -> list[dict[str, Any]]:
        new, self.new = self.new, []
        return new


class Imports:
    """The other side's allocations mapped here, by the ids its `Exports` gave them."""

    MAX = 4096

    def __init__(self, device, trust_sizes: bool = False):
        self.device = device
        self.trust_sizes = trust_sizes  # the runner may take the checker's word for an allocation's size
        self.maps: dict[int, tuple[int, int]] = {}  # id -> (mapped base, size)

    def add(self, handles: list[dict[str, Any]] | None) -> None:
        for entry in handles or []:
            ident = int(entry["id"])
            if ident in self.maps:
                continue
            if len(self.maps) >= self.MAX:
                raise ChannelError(f"more than {self.MAX} device allocations exported")
            ptr = cudaipc.open_handle(_unb64(str(entry["handle"])))
            try:
                _, size = cudaipc.allocation_of(ptr)  # the mapping's true size, not the one claimed
            except cudaipc.IpcError:
                if not self.trust_sizes:
                    raise
                size = int(entry["size"])
            self.maps[ident] = (ptr, size)

    def tensor(self, desc: dict[str, Any], dtype, shape: list[int], stride: list[int]):
        ident = int(desc["alloc"])
        if ident not in self.maps:
            raise ChannelError(f"a tensor in allocation {ident}, of which no handle was sent")
        base, size = self.maps[ident]
        start = int(desc["byte_offset"])
        if not 0 <= start < size:
            raise ChannelError(f"byte offset {start} outside an allocation of {size} bytes")
        try:
            return cudaipc.tensor_at(base + start, size - start, dtype, shape, stride, 0, self.device)
        except cudaipc.IpcError as exc:
            raise ChannelError(str(exc)) from exc

    def close(self) -> None:
        for ptr, _ in self.maps.values():
            try:
                cudaipc.close_handle(ptr)
            except cudaipc.IpcError:
                pass
        self.maps = {}


# --------------------------------------------------------------------------- shared CPU memory


class Arena:
    """A shared memory file (memfd) the checker lays its CPU input buffers in; its descriptor goes
    to the runner with the `inputs` frame, which maps the same pages."""

    ALIGN = 256

    def __init__(self, size: int, fd: int | None = None):
        self.size = max(int(size), self.ALIGN)
        self.fd = fd if fd is not None else os.memfd_create("kw-inputs", os.MFD_CLOEXEC)
        if fd is None:
            os.ftruncate(self.fd, self.size)
        self.map = mmap.mmap(self.fd, self.size)

    @classmethod
    def layout(cls, tensors: list) -> tuple[int, list[int]]:
        """(arena size, byte offset of each tensor) for contiguous copies of `tensors`."""
        offsets, cursor = [], 0
        for tensor in tensors:
            offsets.append(cursor)
            cursor += -(-tensor.numel() * tensor.element_size() // cls.ALIGN) * cls.ALIGN
        return max(cursor, cls.ALIGN), offsets

    def tensor(self, offset: int, like):
        """A contiguous tensor shaped like `like` at `offset` bytes into the arena."""
        data = torch.frombuffer(self.map, dtype=torch.uint8)
        count = like.numel()
        return _view(data.untyped_storage(), like.dtype, torch.device("cpu"), offset // like.element_size(),
                     list(like.shape), _contiguous_strides(list(like.shape))) if count else \
            torch.empty(like.shape, dtype=like.dtype)

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:
            pass  # tensors still view it: the pages go when they do
        os.close(self.fd)


def _contiguous_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return list(reversed(strides))
