"""The call channel's frames and how values travel (CPU side; CUDA IPC is in the GPU tests)."""
from __future__ import annotations

import os
import socket
import struct
import threading

import pytest
import torch

from kernelwright.judge import protocol


def _pair():
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def test_a_frame_carries_header_payloads_and_descriptors():
    a, b = _pair()
    read_fd, write_fd = os.pipe()
    protocol.send(a, {"op": "x", "n": 3}, [b"abc", b""], fds=[read_fd])
    frame = protocol.receive(b, timeout=10)
    assert frame.header == {"op": "x", "n": 3} and frame.payloads == [b"abc", b""]
    os.write(write_fd, b"!")
    assert os.read(frame.fds[0], 1) == b"!"
    for fd in (read_fd, write_fd, *frame.fds):
        os.close(fd)


def test_a_closed_or_silent_or_oversized_peer_is_a_channel_error():
    a, b = _pair()
    with pytest.raises(protocol.ChannelError, match="within"):
        protocol.receive(b, timeout=0.05)
    a.sendall(struct.pack("!II", protocol.MAX_HEADER + 1, 0))
    with pytest.raises(protocol.ChannelError, match="too large"):
        protocol.receive(b, timeout=5)
    c, d = _pair()
    c.sendall(struct.pack("!II", 2, 1) + b"{}" + struct.pack("!Q", 100))
    with pytest.raises(protocol.ChannelError, match="exceed"):
        protocol.receive(d, timeout=5, max_payload=10)
    c.close()
    with pytest.raises(protocol.ChannelError, match="closed"):
        protocol.receive(d, timeout=5)


def test_tensors_and_values_travel_by_descriptor():
    payloads: list[bytes] = []
    x = torch.randn(3, 4)
    inputs = [x]
    descs = [protocol.describe(v, payloads, inputs) for v in (x[1:], torch.arange(6).reshape(2, 3), 2.5, [1, None],
                                                                torch.empty(0, 5))]
    assert [d["kind"] for d in descs] == ["input", "bytes", "value", "value", "empty"]
    rebuilt = [protocol.rebuild(d, payloads, inputs=inputs) for d in descs]
    assert torch.equal(rebuilt[0], x[1:]) and rebuilt[0].data_ptr() == x[1:].data_ptr()  # a view, no copy
    assert torch.equal(rebuilt[1], torch.arange(6).reshape(2, 3))
    assert rebuilt[2:4] == [2.5, [1, None]] and rebuilt[4].shape == (0, 5)
    with pytest.raises(protocol.ChannelError, match="cannot travel"):
        protocol.describe(object(), payloads)


def test_a_descriptor_outside_its_storage_is_refused():
    x = torch.randn(4)
    bad = {"kind": "input", "index": 0, "dtype": "float32", "shape": [8], "stride": [1], "offset": 0}
    with pytest.raises(protocol.ChannelError, match="does not fit"):
        protocol.rebuild(bad, [], inputs=[x])
    with pytest.raises(protocol.ChannelError, match="unknown dtype"):
        protocol.rebuild({**bad, "dtype": "os.system"}, [], inputs=[x])


def test_the_arena_is_shared_memory_both_sides_map():
    a, b = _pair()
    values = [torch.randn(5, 7), torch.arange(3, dtype=torch.int64)]
    size, offsets = protocol.Arena.layout(values)
    arena = protocol.Arena(size)
    mine = [arena.tensor(o, v) for o, v in zip(offsets, values, strict=True)]
    for buffer, value in zip(mine, values, strict=True):
        buffer.copy_(value)
    received = []

    def other_side():
        frame = protocol.receive(b, timeout=10)
        theirs = protocol.Arena(os.fstat(frame.fds[0]).st_size, fd=frame.fds[0])
        tensors = [protocol.rebuild(d, [], [theirs.map]) for d in frame.header["args"]]
        tensors[0].mul_(2)  # a write on their side shows on ours
        received.append([t.clone() for t in tensors])

    thread = threading.Thread(target=other_side)
    thread.start()
    descs = [{"kind": "shm", "arena": 0, "offset": o // v.element_size(), "dtype": protocol.dtype_name(v.dtype),
              "shape": list(v.shape), "stride": list(v.stride())} for o, v in zip(offsets, values, strict=True)]
    protocol.send(a, {"args": descs}, fds=[arena.fd])
    thread.join(30)
    assert torch.equal(received[0][1], values[1]) and torch.allclose(mine[0], 2 * values[0])
