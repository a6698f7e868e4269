"""The runner's session: what its messages do to the record the checker reads."""
from __future__ import annotations

import torch

from kernelwright.judge.protocol import Frame
from kernelwright.judge.runner.observe import TIMED, Observer
from kernelwright.judge.runner.session import Session


def test_the_energy_burst_is_not_filed_under_the_last_timed_call():
    """The burst repeats forward with no marks: its work must not be counted as the last timed
    call's (on the H200 a cuBLAS + Triton candidate read as thousands of matmuls in one call and
    was rejected for `observed_work`)."""
    session = Session(None)
    a = torch.randn(32, 32)
    session.model, session.args = (lambda x: x @ x), [a]
    session.observer = Observer("cpu", "", allow_tf32=False)
    session.observer.begin(TIMED)
    session.observer.mark(1)
    session.model(a)
    reply, _ = session.burst(Frame({"ms": 30}))
    assert reply["calls"] >= 2
    calls = session.observer.report()["calls"]
    assert calls["1"]["top_ops"] == {"matmul": 1}, calls


def test_trim_answers_on_every_device():
    """The checker asks for room after its own out-of-memory error; a CPU runner has none to give."""
    session = Session(None)
    reply, payloads = session.trim(Frame({"op": "trim"}))
    assert reply == {"ok": True, "held": 0} and payloads == []
