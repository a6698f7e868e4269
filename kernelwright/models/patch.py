"""Putting an optimized region back: each instance of the region replaced by the candidate's
`ModelNew` carrying that instance's own weights.

- Weights: the problem's `Model` keeps the submodule as `self.region` (problem_file.REGION_ATTR),
  so the instance's state dict under that prefix is what a faithful `ModelNew` holds; it is loaded
  strictly (same names, same shapes). A mismatch is that region's error, and the region stays
  original; other regions are not touched.
- Calls: the problem fixed the call's constant arguments and its tensors' shapes and dtypes; a call
  unlike it (another shape, another constant) goes to the original submodule, kept beside the
  adapter (not registered: its weights are the candidate's now, and `parameters()` lists them
  once), and is counted (`RegionAdapter.fallbacks`): a candidate is only used where it was judged.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from .calls import literal_repr
from .problem_file import REGION_ATTR


class RegionError(Exception):
    """A region that cannot be put back (its candidate does not load, its weights do not fit)."""


class CandidateCallError(Exception):
    """A candidate raised when the model called it: the region it stands for is named."""

    def __init__(self, path: str, exc: BaseException):
        super().__init__(f"{path}: ModelNew raised {type(exc).__name__}: {exc}")
        self.path = path


class RegionAdapter(torch.nn.Module):
    """Stands where the region's submodule stood: the candidate for calls like the extracted one."""

    def __init__(self, candidate: torch.nn.Module, original: torch.nn.Module, args: list[dict], path: str = ""):
        super().__init__()
        self.path = path
        self.candidate = candidate
        self.__dict__["original"] = original  # not a submodule: see the module docstring
        self.args = args
        self.calls = 0
        self.fallbacks = 0

    def tensors_of(self, args: tuple, kwargs: dict) -> list[torch.Tensor] | None:
        """The call's tensors in the problem's order, or None when the call differs from the extracted one."""
        positional = [a for a in self.args if a["name"] is None]
        keywords = {a["name"]: a for a in self.args if a["name"] is not None}
        if len(args) != len(positional) or set(kwargs) != set(keywords):
            return None
        for spec, value in list(zip(positional, args, strict=True)) + [(keywords[k], v) for k, v in kwargs.items()]:
            if "literal" in spec:
                if isinstance(value, torch.Tensor) or literal_repr(value) != spec["literal"]:
                    return None
            elif not (isinstance(value, torch.Tensor) and list(value.shape) == spec["shape"]
                      and str(value.dtype).removeprefix("torch.") == spec["dtype"]):
                return None
        ordered = [(s, v) for s, v in zip(positional, args, strict=True)]
        ordered += [(keywords[a["name"]], kwargs[a["name"]]) for a in self.args if a["name"] is not None]
        by_spec = {id(s): v for s, v in ordered}
        return [by_spec[id(s)] for s in self.args if "literal" not in s]

    def forward(self, *args, **kwargs):
        tensors = self.tensors_of(args, kwargs)
        if tensors is None:
            self.fallbacks += 1
            return self.original(*args, **kwargs)
        self.calls += 1
        try:
            return self.candidate(*tensors)
        except Exception as exc:  # noqa: BLE001 -- the candidate's error: named with its region, not the model's
            raise CandidateCallError(self.path, exc) from exc


@dataclass
class Replacement:
    path: str
    adapter: RegionAdapter
    names: dict[str, str]  # the original parameter's name in the model -> its name in the patched model


def make_adapter(model_new_cls: type, init_inputs: list, original: torch.nn.Module, args: list[dict],
                 path: str) -> Replacement:
    """A ModelNew for the instance at `path`, with that instance's weights, device and mode."""
    state = {f"{REGION_ATTR}.{k}": v for k, v in original.state_dict().items()}
    try:
        torch.manual_seed(0)
        candidate = model_new_cls(*init_inputs)
    except Exception as exc:  # noqa: BLE001 -- the candidate's constructor: its error, reported per region
        raise RegionError(f"{path}: ModelNew(*get_init_inputs()) failed: {type(exc).__name__}: {exc}") from exc
    try:
        candidate.load_state_dict(state, strict=True)
    except (RuntimeError, KeyError) as exc:
        raise RegionError(f"{path}: the model's weights do not fit ModelNew (a faithful ModelNew keeps the region's "
                          f"parameters and buffers as `{REGION_ATTR}.<name>`, same shapes): {exc}") from None
    device = next((t.device for t in original.state_dict().values()), None)
    if device is not None:
        candidate.to(device)
    candidate.train(original.training)
    names = {f"{path}.{k}": f"{path}.candidate.{REGION_ATTR}.{k}" for k, _ in original.named_parameters()}
    return Replacement(path, RegionAdapter(candidate, original, args, path), names)


def patched_copy(model: torch.nn.Module, replacements: list[Replacement]) -> torch.nn.Module:
    """A copy of `model` with the replacements installed (the original is left as it was)."""
    patched = copy.copy(model)  # shallow first: only the parents along each path are copied
    patched._modules = dict(model._modules)
    for replacement in replacements:
        parent = patched
        for name in replacement.path.split(".")[:-1]:
            child = copy.copy(parent._modules[name])
            child._modules = dict(child._modules)
            parent._modules[name] = child
            parent = child
        parent._modules[replacement.path.split(".")[-1]] = replacement.adapter
    return patched
