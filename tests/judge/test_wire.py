"""One JSON object per line over a stream socket (judge/wire.py)."""
from __future__ import annotations

import socket

import pytest

from kernelwright.judge import wire


def test_messages_go_across_one_per_line_and_a_closed_end_reads_none():
    left, right = socket.socketpair()
    with left, right, right.makefile("rb") as reader:
        wire.send(left, {"op": "echo", "value": [1, "x\ny"]})
        wire.send(left, {"op": "second"})
        left.shutdown(socket.SHUT_WR)
        assert wire.receive(reader) == {"op": "echo", "value": [1, "x\ny"]}
        assert wire.receive(reader) == {"op": "second"}
        assert wire.receive(reader) is None


def test_a_line_longer_than_the_limit_is_refused_and_half_a_line_is_none():
    left, right = socket.socketpair()
    with left, right, right.makefile("rb") as reader:
        left.sendall(b'{"a": "' + b"x" * 100 + b'"}\n')
        with pytest.raises(ValueError, match="too long"):
            wire.receive(reader, limit=50)
    left, right = socket.socketpair()
    with left, right, right.makefile("rb") as reader:
        left.sendall(b'{"a": 1')
        left.shutdown(socket.SHUT_WR)
        assert wire.receive(reader) is None
