"""attribution.py: profiler events to time per submodule, on hand-made events shaped like
torch.profiler's FunctionEvents (the GPU's clock and its device-side twins included), and on a
real CPU profile."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch.autograd import DeviceType

from kernelwright.models.attribution import BACKWARD_NODE, STEP_FORWARD, attribute, profile_step
from kernelwright.models.calls import RANGE_PREFIX


@dataclass
class Event:
    name: str
    cpu_time_total: float
    device_time_total: float = 0.0
    cpu_parent: "Event | None" = None
    sequence_nr: int = -1
    device_type: DeviceType = DeviceType.CPU


def step_events() -> list[Event]:
    step = Event(STEP_FORWARD, 100.0, 60.0)
    outer = Event(RANGE_PREFIX + "block", 80.0, 50.0, step)
    inner = Event(RANGE_PREFIX + "block.lin", 30.0, 40.0, outer)
    matmul = Event("aten::addmm", 25.0, 40.0, inner, sequence_nr=7)
    gelu = Event("aten::gelu", 20.0, 10.0, outer, sequence_nr=8)
    twin = Event(RANGE_PREFIX + "block", 0.0, 55.0, device_type=DeviceType.CUDA)  # gpu_user_annotation
    backward = [Event(f"{BACKWARD_NODE} AddmmBackward0", 50.0, 80.0, sequence_nr=7),
                Event(f"{BACKWARD_NODE} GeluBackward0", 10.0, 20.0, sequence_nr=8),
                Event(f"{BACKWARD_NODE} torch::autograd::AccumulateGrad", 5.0, 4.0)]
    return [step, outer, inner, matmul, gelu, twin] + backward


def test_gpu_clock_nesting_backward_and_twins():
    total, modules = attribute(step_events(), "cuda", repeat=2)
    assert total == pytest.approx((60 + 80 + 20 + 4) / 2)  # forward range + every backward node, per step
    assert modules["block"].forward_us == pytest.approx(25.0)  # the device twin (55) is not added
    assert modules["block"].backward_us == pytest.approx(50.0)  # both nodes: their ops ran inside it
    assert modules["block.lin"].forward_us == pytest.approx(20.0) and modules["block.lin"].backward_us == pytest.approx(40.0)


def test_cpu_clock_reads_cpu_time():
    total, modules = attribute(step_events(), "cpu", repeat=1)
    assert total == pytest.approx(100 + 50 + 10 + 5) and modules["block.lin"].total_us == pytest.approx(80.0)


def test_a_real_profile_attributes_forward_and_backward():
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
    found = profile_step(model, (torch.randn(32, 16),), {}, backward=True, device="cpu", warmup=1, repeat=2)
    assert found.clock == "cpu" and found.total_us > 0 and found.steps == 3
    assert all(found.modules[p].forward_us > 0 and found.modules[p].backward_us > 0 for p in ("0", "1", "2"))
    assert found.records["0"].calls == 3 and found.records["2"].outputs[0].shape == [32, 8]
    assert sum(found.modules[p].total_us for p in ("0", "1", "2")) <= found.total_us * 1.01
