"""The supervisor's service: one JSON request per connection, answered only to its own descendants."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.judge import service

REPO = Path(__file__).resolve().parents[2]


def test_a_descendant_gets_answers_and_errors_come_back_as_service_errors(tmp_path, monkeypatch):
    server = service.Server(tmp_path, {"echo": lambda m: {"got": m["value"]},
                                       "boom": lambda m: 1 / 0})
    server.start()
    try:
        monkeypatch.setenv(service.ENV_VAR, str(server.path))
        assert service.available()
        assert service.call("echo", value=[1, "x"]) == {"got": [1, "x"]}
        with pytest.raises(service.ServiceError, match="ZeroDivisionError"):
            service.call("boom")
        with pytest.raises(service.ServiceError, match="unknown request"):
            service.call("nothing")
    finally:
        server.close()


_SERVE_IN_CHILD = r"""
import sys, time
from pathlib import Path
from kernelwright.judge import service
server = service.Server(Path(sys.argv[1]), {"echo": lambda m: {"got": 1}})
server.start()
print(server.path, flush=True)
time.sleep(30)
"""


def test_a_process_outside_the_supervisors_tree_is_refused(tmp_path, monkeypatch):
    owner = subprocess.Popen([sys.executable, "-c", _SERVE_IN_CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        path = owner.stdout.readline().strip()
        monkeypatch.setenv(service.ENV_VAR, path)
        with pytest.raises(service.ServiceError, match="only processes of this evaluation"):
            service.call("echo")  # this test process is the server's parent, not its descendant
    finally:
        owner.kill()
        owner.wait()


def test_without_a_supervisor_there_is_no_service(monkeypatch):
    monkeypatch.delenv(service.ENV_VAR, raising=False)
    assert not service.available()
    with pytest.raises(service.ServiceError, match="no judge supervisor"):
        service.call("build")


def test_a_socket_path_too_long_for_unix_sockets_moves_to_a_short_folder(tmp_path):
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    path, short = service.socket_path(deep)
    assert short and len(str(path)) < 100
    os.rmdir(short)


def test_a_request_line_longer_than_the_limit_gets_no_answer_and_the_service_goes_on(tmp_path, monkeypatch):
    import socket

    monkeypatch.setattr(service, "MAX_MESSAGE", 1 << 12)
    server = service.Server(tmp_path, {"echo": lambda m: {"got": m["value"]}})
    server.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(server.path))
            sock.sendall(b'{"op": "echo", "value": "' + b"x" * (1 << 13))  # never ends its line
            sock.shutdown(socket.SHUT_WR)
            try:
                answer = sock.recv(100)
            except ConnectionResetError:  # closed with the rest of the line unread
                answer = b""
            assert answer == b""  # no reply
        monkeypatch.setenv(service.ENV_VAR, str(server.path))
        assert service.call("echo", value=1) == {"got": 1}
    finally:
        server.close()


def test_what_a_process_may_ask_depends_on_which_process_asks(tmp_path, monkeypatch):
    """The supervisor's rule (`Supervisor.permit`): the checker everything, the runner `build`
    only, any other process (a child of the runner's) nothing."""
    from kernelwright.judge.supervisor import RUNNER_OPS

    me = os.getpid()
    roles = {"me": None}
    server = service.Server(tmp_path, {"build": lambda m: {"built": 1}, "references": lambda m: {"entry": "x"}},
                            permit=lambda pid: roles["me"] if pid == me else frozenset())
    server.start()
    try:
        monkeypatch.setenv(service.ENV_VAR, str(server.path))
        assert service.call("references") == {"entry": "x"}  # as the checker
        roles["me"] = RUNNER_OPS  # as the runner
        assert service.call("build") == {"built": 1}
        with pytest.raises(service.ServiceError, match="may not ask 'references'"):
            service.call("references")
        roles["me"] = frozenset()  # as anything else
        with pytest.raises(service.ServiceError, match="may not ask 'build'"):
            service.call("build")
    finally:
        server.close()
