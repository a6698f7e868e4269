"""Which submodules become problems: ranked by time, grouped when identical, never nested.

- Candidates: every called submodule but the model itself and pure containers (`nn.Sequential`,
  `nn.ModuleList`, `nn.ModuleDict`, whose time is their children's); with `leaves`, only
  submodules without children.
- Identical submodules (same `repr`, same tensors' names, shapes and dtypes, same plain settings
  such as an `eps`, same call arguments, same mode: the twelve blocks of a transformer) are one
  region with several instances: one problem, one optimized `ModelNew`, put back at every
  instance with each instance's own weights. A region's time is the sum over its instances.
- Ranked by time, taken greedily: a region none of whose instances is inside or around a region
  already taken (times are inclusive, so nested regions would count the same time twice). A
  region a problem cannot express (calls.py says why) is listed as skipped and its children stay
  candidates.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import torch

from .attribution import StepProfile
from .calls import ModuleCall, literal_repr

CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)


@dataclass
class Region:
    paths: list[str]  # every instance, in the model's order; the first is the one a problem rebuilds
    cls: str
    record: ModuleCall  # the first instance's first call
    time_us: float  # per step, over all instances
    forward_us: float
    backward_us: float
    share: float  # of the step's total
    file: str = ""  # the problem file's name, once written

    @property
    def path(self) -> str:
        return self.paths[0]


@dataclass
class Selection:
    regions: list[Region] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {"paths", "cls", "share", "reason"}


def _settings(module: torch.nn.Module) -> list:
    """What `repr` may leave out: every tensor's name, shape and dtype, and the plain settings
    (numbers, strings, tuples of them: an `eps`, a head count) of the module and its children."""
    tensors = [(k, list(v.shape), str(v.dtype)) for k, v in module.state_dict().items()]
    plain = [(path, k, literal_repr(v)) for path, m in module.named_modules() for k, v in sorted(vars(m).items())
             if not k.startswith("_") and k != "training" and literal_repr(v) is not None]
    return [tensors, plain]


def _signature(module: torch.nn.Module, record: ModuleCall) -> str:
    return json.dumps([repr(module), _settings(module), [asdict(a) for a in record.args], record.training],
                      sort_keys=True, default=str)


def _overlaps(path: str, taken: list[str]) -> bool:
    return any(path == t or path.startswith(t + ".") or t.startswith(path + ".") for t in taken)


def group_regions(model: torch.nn.Module, profile: StepProfile, leaves: bool = False) -> list[Region]:
    """Every candidate region, largest time first."""
    groups: dict[str, Region] = {}
    for path, module in model.named_modules():
        record = profile.records.get(path)
        if not path or record is None or isinstance(module, CONTAINERS):
            continue
        if leaves and next(module.children(), None) is not None:
            continue
        time = profile.modules.get(path)
        forward, backward = (time.forward_us, time.backward_us) if time else (0.0, 0.0)
        key = _signature(module, record)
        if key in groups:
            region = groups[key]
            region.paths.append(path)
            region.forward_us += forward
            region.backward_us += backward
        else:
            groups[key] = Region([path], record.cls, record, 0.0, forward, backward, 0.0)
    for region in groups.values():
        region.time_us = region.forward_us + region.backward_us
        region.share = region.time_us / profile.total_us if profile.total_us > 0 else 0.0
    return sorted(groups.values(), key=lambda r: (-r.time_us, r.path))


def select_regions(model: torch.nn.Module, profile: StepProfile, top: int, leaves: bool = False) -> Selection:
    """The `top` largest regions that do not overlap (see the module docstring)."""
    chosen = Selection()
    taken: list[str] = []
    for region in group_regions(model, profile, leaves):
        if len(chosen.regions) >= top:
            break
        if any(_overlaps(p, taken) for p in region.paths):
            continue
        if region.record.unsupported:
            chosen.skipped.append({"paths": region.paths, "cls": region.cls, "share": region.share,
                                   "reason": region.record.unsupported})
            continue
        chosen.regions.append(region)
        taken.extend(region.paths)
    return chosen
