"""The checker's room on the device: when its own allocations run out beside the runner."""
from __future__ import annotations

import socket

import pytest
import torch

from kernelwright.judge.checker.link import RunnerLink
from kernelwright.judge.checker.stages.check import out_of_room


class _Link(RunnerLink):
    """A link whose runner answers `trim` only (on_device: as on a GPU, without one)."""

    def __init__(self):
        mine, theirs = socket.socketpair()
        theirs.close()
        super().__init__(mine, "cuda:0", on_device=True)
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


def test_an_allocation_that_ran_out_runs_again_once_the_runner_gave_its_cache_back():
    link = _Link()
    assert link.with_room(_steps("fine")) == "fine" and link.trims == 0
    assert link.with_room(_steps(torch.OutOfMemoryError("CUDA out of memory"), "fine")) == "fine"
    assert link.trims == 1 and link.held == 3 << 30


def test_a_second_shortage_is_raised_and_says_what_the_candidate_still_holds():
    link = _Link()
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    with pytest.raises(torch.OutOfMemoryError) as caught:
        link.with_room(_steps(oom, oom))
    text = out_of_room(link, caught.value)
    assert "CUDA out of memory" in text and "still holds 3.00 GiB" in text  # the pool's retries read this
    with pytest.raises(ValueError):  # not a shortage: not the checker's to retry
        link.with_room(_steps(ValueError("bug")))
    assert link.trims == 1
