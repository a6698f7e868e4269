"""What the runner records of a candidate's work: events sorted into calls, ops on other threads,
ops inside the candidate's own launches, foreign kernels; and the guards' record of its process."""
from __future__ import annotations

import math

import torch

from kernelwright.judge import work
from kernelwright.judge.runner.observe import CALL_RANGE, OWN_RANGE, Observer, split_calls


class Event:
    """The part of a kineto event split_calls reads."""

    def __init__(self, name, start, end, thread=1, device="CPU"):
        self._args = (name, start, end, thread, device)

    def name(self):
        return self._args[0]

    def start_ns(self):
        return self._args[1]

    def duration_ns(self):
        return self._args[2] - self._args[1]

    def start_thread_id(self):
        return self._args[3]

    def device_type(self):
        return f"DeviceType.{self._args[4]}"


def test_events_are_sorted_into_calls_threads_and_own_launches():
    events = [
        Event(CALL_RANGE, 100, 200), Event("aten::softmax", 110, 150), Event("aten::_softmax", 111, 149),  # nested
        Event(OWN_RANGE, 160, 190), Event("aten::add", 165, 170),  # inside an own launch: the interpreter's
        Event("aten::sigmoid", 120, 130, thread=2),  # another thread during the call
        Event(CALL_RANGE, 300, 400), Event("aten::mm", 310, 320),
        Event("void at::native::vectorized_elementwise_kernel<4, x>", 140, 145, device="CUDA"),
        Event("my_kernel", 330, 360, device="CUDA"), Event("Memset (Device)", 305, 306, device="CUDA"),
        Event("aten::relu", 50, 60),  # before the first mark: no call's
    ]
    records = split_calls(events, [(1, 100), (2, 300)], ({"my_kernel"}, set()))
    first, second = records[1], records[2]
    assert dict(first.top_ops) == {"softmax": 1, "elementwise": 1} and dict(first.thread_ops) == {"elementwise": 1}
    assert dict(first.kernels) == {"elementwise": 1} and first.own_kernels == 0
    assert dict(second.top_ops) == {"matmul": 1} and not second.thread_ops
    assert second.own_kernels == 1 and not second.kernels  # the memset is free
    assert math.isclose(second.kernel_us["my_kernel"][0], 0.03)


def test_unrecorded_calls_may_not_run_more_torch_work_than_recorded_ones():
    observed = {"recorded": [1, 5], "calls": {"1": {"top_ops": {}}, "5": {"top_ops": {}},
                                             "2": {"top_ops": {"softmax": 1}}, "9": {"top_ops": {}}}}
    watched, unwatched = work.split_recorded(observed)
    flag = work.observed_work_flag(watched, unwatched, "top_ops")
    assert flag is not None and flag.code == "observed_work" and "softmax 1" in flag.message
    same = {"recorded": [1], "calls": {"1": {"kernels": {"matmul": 2}}, "2": {"kernels": {"matmul": 2}}}}
    assert work.observed_work_flag(*work.split_recorded(same), "kernels") is None


def test_ops_on_other_threads_count_as_forwards_python():
    from kernelwright.rules import get

    observed = {"phases": {"1": "trials", "2": "trials"},
                "calls": {"1": {"thread_ops": {"softmax": 1}}, "2": {"thread_ops": {}}}}
    threads = work.thread_ops(observed, "trials")
    record, flags = work.evaluate(get("strict"), {"softmax": 1}, {}, {"triton": {"copy": 1}}, [], "",
                                  thread_ops=threads)
    assert record.python == {"softmax": 1} and record.threads == {"softmax": 1}
    assert any(f.check == "python_torch_ops" and "another thread" in f.message for f in flags)
    _, flags = work.evaluate(get("kernelbench"), {"softmax": 1}, {}, {"triton": {"copy": 1}}, [], "",
                             thread_ops=threads)
    assert any(f.check == "torch_work" for f in flags)


def test_the_observer_notes_and_undoes_what_the_candidate_replaced():
    observer = Observer("cpu", "", allow_tf32=False)
    original = torch.cuda.Event.elapsed_time
    observer.install()
    try:
        torch.cuda.Event.elapsed_time = lambda self, end: 0.0
        torch.backends.cuda.matmul.allow_tf32 = True
        observer.after_call("during a call")
        assert torch.cuda.Event.elapsed_time is original and torch.backends.cuda.matmul.allow_tf32 is False
        assert observer.patched and "torch.cuda.Event.elapsed_time" in observer.patched[0]["names"]
        assert observer.precision_changes and observer.precision_changes[0]["after"]["cuda.matmul.allow_tf32"] is True
        report = observer.report()
        assert report["patched"] == observer.patched and report["launches"]["triton"] == {}
    finally:
        observer.own.uninstall()
        observer.tracker.uninstall()
        torch.cuda.Event.elapsed_time = original
