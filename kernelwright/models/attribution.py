"""Time per submodule: the model's step run under torch.profiler, its events attributed to the
submodules whose ranges (calls.py) enclose them.

- Clock: on a GPU, the kernels' device time (each range's `device_time_total` sums the kernels its
  operators launched); on a CPU, each range's CPU time. The step's total is the forward's range
  plus every backward node, in the same clock.
- Only host-side events are read: a range's device time is the kernels its operators launched
  (its twin on the device timeline, a `gpu_user_annotation`, would count it twice).
- Forward: each submodule's range, summed over its calls. Nested submodules are inside their
  parents' ranges: times are inclusive (regions.py picks regions that do not overlap).
- Backward (`backward=True`): each autograd node (`autograd::engine::evaluate_function: ...`)
  carries the sequence number of the forward operator that made it; its time goes to every
  submodule whose range enclosed that operator. Nodes with none (gradient accumulation) count in
  the total only.
Times are per step: the mean over `repeat` profiled steps after `warmup` unprofiled ones.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from .calls import RANGE_PREFIX, ModuleCall, CallRecorder

STEP_FORWARD = "kw.step::forward"
BACKWARD_NODE = "autograd::engine::evaluate_function:"


@dataclass
class ModuleTime:
    forward_us: float = 0.0
    backward_us: float = 0.0

    @property
    def total_us(self) -> float:
        return self.forward_us + self.backward_us


@dataclass
class StepProfile:
    clock: str  # "cuda" (kernel time) or "cpu" (CPU time)
    total_us: float  # one step: forward (+ backward)
    modules: dict[str, ModuleTime] = field(default_factory=dict)
    records: dict[str, ModuleCall] = field(default_factory=dict)
    steps: int = 1  # steps run while the hooks recorded (calls per step = calls / steps)


class BackwardSetupError(ValueError):
    """--backward on a model none of whose floating outputs requires grad."""


def flat_tensors(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in flat_tensors(item)]
    if isinstance(out, dict):
        return [t for item in out.values() for t in flat_tensors(item)]
    return []


def _event_time(event, clock: str) -> float:
    if clock == "cuda":
        return float(getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0.0))
    return float(event.cpu_time_total)


def _on_host(event) -> bool:
    """A CPU-side event: with CUDA activity a range also appears on the device timeline (a
    `gpu_user_annotation` of the same name), which would count its time twice."""
    return getattr(event, "device_type", DeviceType.CPU) == DeviceType.CPU


def _enclosing(event) -> list[str]:
    found, parent = [], event.cpu_parent
    while parent is not None:
        if parent.name.startswith(RANGE_PREFIX):
            found.append(parent.name[len(RANGE_PREFIX):])
        parent = parent.cpu_parent
    return found


def attribute(events, clock: str, repeat: int) -> tuple[float, dict[str, ModuleTime]]:
    """(step total, time per submodule path), per step, from the profiler's events."""
    modules: dict[str, ModuleTime] = defaultdict(ModuleTime)
    made_by: dict[int, list[str]] = {}  # forward sequence number -> enclosing submodules
    total = 0.0
    events = [e for e in events if _on_host(e)]
    for e in events:
        if e.name.startswith(RANGE_PREFIX):
            modules[e.name[len(RANGE_PREFIX):]].forward_us += _event_time(e, clock) / repeat
        elif e.name == STEP_FORWARD:
            total += _event_time(e, clock)
        elif getattr(e, "sequence_nr", -1) >= 0 and not e.name.startswith(BACKWARD_NODE):
            made_by.setdefault(e.sequence_nr, _enclosing(e))
    for e in events:
        if e.name.startswith(BACKWARD_NODE):
            spent = _event_time(e, clock)
            total += spent
            for path in made_by.get(getattr(e, "sequence_nr", -1), []):
                modules[path].backward_us += spent / repeat
    return total / repeat, dict(modules)


def profile_step(model: torch.nn.Module, args: tuple, kwargs: dict, backward: bool, device: str,
                 warmup: int = 2, repeat: int = 3, seed: int = 0) -> StepProfile:
    """Run warmup + repeat steps of the model (forward, and backward with fixed output gradients)
    with the call recorder on; profile the last `repeat`."""
    clock = "cuda" if device.startswith("cuda") else "cpu"
    grads: list[torch.Tensor] = []

    def step() -> None:
        with torch.set_grad_enabled(backward), record_function(STEP_FORWARD):
            out = model(*args, **kwargs)
        if backward:
            outs = [o for o in flat_tensors(out) if o.is_floating_point() and o.requires_grad]
            if not outs:
                raise BackwardSetupError("--backward: no floating output of the model requires grad "
                                         "(is the model frozen, or built under torch.no_grad?)")
            if not grads:
                gen = torch.Generator(device=outs[0].device).manual_seed(seed)
                grads.extend(torch.randn(o.shape, dtype=o.dtype, device=o.device, generator=gen) for o in outs)
            torch.autograd.backward(outs, grads)
            model.zero_grad(set_to_none=True)
        if clock == "cuda":
            torch.cuda.synchronize()

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if clock == "cuda" else [])
    with CallRecorder(model) as recorder:
        for _ in range(warmup):
            step()
        with profile(activities=activities) as prof:
            for _ in range(repeat):
                step()
    total, modules = attribute(prof.events(), clock, repeat)
    return StepProfile(clock, total, modules, recorder.records, warmup + repeat)
