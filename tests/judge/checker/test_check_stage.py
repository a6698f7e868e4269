"""The check stage's own rules that need no runner: room made when the checker runs out of memory."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kernelwright.judge.checker.stages.check import OutOfRoom, with_room


class _Link:
    def __init__(self):
        self.trims = 0

    def trim(self):
        self.trims += 1
        return {"ok": True, "held": 3 << 30}


def _steps(*outcomes):
    """A step that raises or returns the given outcomes in turn."""
    left = list(outcomes)

    def step():
        outcome = left.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
    return step


def test_an_out_of_memory_check_is_run_again_once_the_runner_gave_its_cache_back():
    built = SimpleNamespace(link=_Link())
    assert with_room(built, _steps("fine")) == "fine" and built.link.trims == 0
    assert with_room(built, _steps(torch.OutOfMemoryError("CUDA out of memory"), "fine")) == "fine"
    assert built.link.trims == 1


def test_a_second_shortage_is_reported_with_what_the_candidate_still_holds():
    built = SimpleNamespace(link=_Link())
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    with pytest.raises(OutOfRoom) as caught:
        with_room(built, _steps(oom, oom))
    assert "CUDA out of memory" in str(caught.value) and "still holds 3.00 GiB" in str(caught.value)
    with pytest.raises(ValueError):  # not a shortage: not the checker's to retry
        with_room(built, _steps(ValueError("bug")))
    assert built.link.trims == 1
