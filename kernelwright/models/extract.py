"""`kernelwright extract`: profile a user's model, write its hottest submodules as problems.

    out/
      regions.json        the manifest: the spec, the clock, the step's time, per region its
                          instances' dotted paths, class, share of the step, call shapes and dtypes,
                          mode and problem file; the regions skipped and why
      01_<path>.py ...    one KernelBench problem per region (problem_file.py), a suite for `optimize`

Nothing is written when the model cannot be built or profiled (ModelSpecError, the user's error).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from kernelwright.files import atomic_write

from .attribution import StepProfile, profile_step
from .problem_file import file_name, render
from .regions import Selection, select_regions
from .spec import BuiltModel, ModelSpecError, absolute_spec, build_model

MANIFEST = "regions.json"
SCHEMA = 1


@dataclass
class ExtractResult:
    out_dir: Path
    manifest: dict
    selection: Selection
    profile: StepProfile


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelSpecError(f"--device {device}: no CUDA device is available here")
    return device


def to_device(built: BuiltModel, device: str) -> BuiltModel:
    def move(x):
        return x.to(device) if isinstance(x, torch.Tensor) else x

    return BuiltModel(built.model.to(device), tuple(move(a) for a in built.args),
                 {k: move(v) for k, v in built.kwargs.items()})


def check_out_dir(out: Path) -> None:
    """An output folder that holds problems already is refused: a suite must be one extraction."""
    if out.exists() and (not out.is_dir() or any(out.glob("*.py")) or (out / MANIFEST).exists()):
        raise ModelSpecError(f"{out} already holds extracted problems (or is not a folder); choose another --out "
                             "or remove it")


def manifest_of(spec: str, inputs_spec: str | None, device: str, backward: bool, profile: StepProfile,
                selection: Selection, search_path: list[str]) -> dict:
    regions = []
    for region in selection.regions:
        record = region.record
        regions.append({
            "file": region.file, "path": region.path, "paths": region.paths, "class": region.cls,
            "share": round(region.share, 6), "time_us": round(region.time_us, 3),
            "forward_us": round(region.forward_us, 3), "backward_us": round(region.backward_us, 3),
            "training": record.training, "calls_per_step": record.calls / max(profile.steps, 1),
            "inputs": [asdict(a) for a in record.args], "outputs": [asdict(o) for o in record.outputs]})
    return {"schema": SCHEMA, "spec": spec, "inputs_spec": inputs_spec, "search_path": search_path,
            "device": device, "clock": profile.clock, "backward": backward, "step_us": round(profile.total_us, 3),
            "covered_share": round(sum(r.share for r in selection.regions), 6),
            "regions": regions, "skipped": selection.skipped}


def extract(spec: str, out: str | Path, inputs_spec: str | None = None, top: int = 5, backward: bool = False,
            device: str = "auto", leaves: bool = False, warmup: int = 2, repeat: int = 3) -> ExtractResult:
    """Profile the model `spec` builds and write its `top` regions as problems under `out`."""
    out = Path(out)
    check_out_dir(out)
    spec, inputs_spec = absolute_spec(spec), absolute_spec(inputs_spec) if inputs_spec else None
    search_path = [os.getcwd()]
    device = resolve_device(device)
    built = to_device(build_model(spec, inputs_spec, tuple(search_path)), device)
    profile = profile_step(built.model, built.args, built.kwargs, backward, device, warmup, repeat)
    selection = select_regions(built.model, profile, top, leaves)
    out.mkdir(parents=True, exist_ok=True)
    for rank, region in enumerate(selection.regions, 1):
        region.file = file_name(rank, region)
        atomic_write(out / region.file, render(region, spec, search_path, profile.clock, backward))
    manifest = manifest_of(spec, inputs_spec, device, backward, profile, selection, search_path)
    atomic_write(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return ExtractResult(out, manifest, selection, profile)
