"""The worker's side of the reference store (`refstore`): what the reference outputs of a problem
depend on (`key_fields`), how they are written for the supervisor to publish (`payload`, `save`)
and read back (`read`, `place`).

An entry holds, for every trial and the refill case, the reference outputs, the inputs the
reference writes in place and their values, the expected gradients (backward problems), the
variant actually used (a fallback to "given" included); and, once per problem, the inputs the
reference mutates, its ATen ops and Triton launches, and whether `get_inputs()` draws on the
device. Inputs themselves are not stored: each candidate regenerates its own from the trial's
seed, on the device where `get_inputs()` allows it (`check.make_inputs`), so it gets fresh buffers
and nothing it writes reaches the store or the next candidate.

Reading maps the file (`torch.load(mmap=True, weights_only=True)`, private pages: a write changes
this process's copy only) with no device work, before the worker holds the device; placing moves
outputs to the device, under the hold, within the same room as computing them
(`check.DeviceRoom`, `check.reference_cases`).
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..problem.inputs import variant_for_trial
from .check import DeviceRoom, TrialCase, host_copy, tensor_bytes

# the judge code whose behaviour decides what an entry holds: a change to any of it is another key
CODE = ("kernelwright.judge.check", "kernelwright.judge.grad", "kernelwright.judge.refcases",
        "kernelwright.problem.inputs", "kernelwright.problem.loader", "kernelwright.problem.ops")


@dataclass
class References:
    """Everything stage 1 computes from the reference model (`stages.load`)."""

    cases: list[TrialCase]
    refill: TrialCase
    ref_mutates: list[int]
    ref_ops: dict[str, int]
    launches: dict[str, int]
    inputs_on_device: bool | None


def key_fields(problem_source: str, problem, config, device: str, device_name: str, precision: dict) -> dict:
    """What the reference outputs depend on; the supervisor hashes it into the entry's key."""
    return {
        "source": hashlib.sha256(problem_source.encode()).hexdigest(),
        "overrides": {str(k): v for k, v in sorted(dict(problem.overrides).items())},
        "shrunk": bool(problem.shrunk),
        "seed": config.seed, "trials": config.trials,
        "variants": [variant_for_trial(i) for i in range(config.trials)],
        "device": str(device), "device_name": device_name,
        "rules": config.rules, "allow_tf32": config.allow_tf32, "precision": precision,
        "versions": versions(), "code": code_digest(),
    }


def versions() -> dict[str, str]:
    found = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("triton", "numpy"):
        try:
            found[name] = importlib.import_module(name).__version__
        except Exception:  # noqa: BLE001 - optional here
            found[name] = ""
    return found


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    sha = hashlib.sha256()
    for name in CODE:
        path = importlib.import_module(name).__file__
        sha.update(name.encode() + Path(path).read_bytes() if path else name.encode())
    return sha.hexdigest()[:24]


def stored_bytes(refs: References) -> int:
    """Bytes of tensors an entry of `refs` holds (about the size of its file)."""
    total = 0
    for case in [*refs.cases, refs.refill]:
        total += sum(tensor_bytes(case.ref_outputs)) + sum(tensor_bytes(case.ref_inputs.values()))
        total += sum(tensor_bytes(case.ref_grads.values()))
    return total


def payload(refs: References) -> dict[str, Any]:
    """What an entry holds, every tensor copied to the CPU (copies from the GPU: under the device's
    hold); `save` writes it."""
    return {"format": 1, "cases": [_case_dict(c) for c in refs.cases], "refill": _case_dict(refs.refill),
            "ref_mutates": list(refs.ref_mutates), "ref_ops": dict(refs.ref_ops),
            "launches": dict(refs.launches), "inputs_on_device": refs.inputs_on_device}


def save(data: dict[str, Any], path: Path) -> int:
    """Write a `payload` to `path`; returns the file's size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(data, path)
    return path.stat().st_size


def _case_dict(case: TrialCase) -> dict[str, Any]:
    cpu = lambda t: t.detach() if t.device.type == "cpu" else host_copy(t)  # noqa: E731 - saved as it is
    return {"index": case.index, "seed": case.seed, "variant": case.variant, "fallback_from": case.fallback_from,
            "input_bytes": case.input_bytes, "ref_outputs": [cpu(t) for t in case.ref_outputs],
            "ref_inputs": {str(i): cpu(t) for i, t in case.ref_inputs.items()},
            "ref_grads": {name: cpu(t) for name, t in case.ref_grads.items()}}


def read(path: Path) -> dict[str, Any]:
    """An entry's payload, its tensors mapped from the file on the CPU (no device work)."""
    data = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    if data.get("format") != 1:
        raise ValueError(f"reference entry of format {data.get('format')!r}")
    return data


def place(data: dict[str, Any], device: str, room: DeviceRoom | None = None) -> References:
    """A `read` payload as References: outputs (and the written inputs and gradients of their case)
    on the device while their total fits the room's budget (none: keep all on the CPU), else the
    mapped CPU tensors."""
    room = room or DeviceRoom()
    first = data["cases"][0] if data["cases"] else data["refill"]
    budget = room.budget(int(first.get("input_bytes", 0)), sum(tensor_bytes(first["ref_outputs"])))
    kept = [0]
    cases = [_case(c, device, budget, kept) for c in data["cases"]]
    refill = _case(data["refill"], device, budget, kept)
    if cases and cases[0].ref_outputs and cases[0].ref_outputs[0].device.type != "cpu":
        cases[0].pinned = list(cases[0].ref_outputs)  # as when computed: trial 0's outputs held on the device
    return References(cases=cases, refill=refill, ref_mutates=[int(i) for i in data["ref_mutates"]],
                      ref_ops={str(k): int(v) for k, v in data["ref_ops"].items()},
                      launches={str(k): int(v) for k, v in data["launches"].items()},
                      inputs_on_device=data["inputs_on_device"])


def _case(data: dict[str, Any], device: str, budget: int, kept: list[int]) -> TrialCase:
    outputs = list(data["ref_outputs"])
    size = sum(tensor_bytes(outputs))
    on_device = str(device).startswith("cuda") and kept[0] + size <= budget
    if on_device:
        kept[0] += size
    move = (lambda t: t.to(device)) if on_device else (lambda t: t)  # noqa: E731
    return TrialCase(index=int(data["index"]), seed=int(data["seed"]), variant=str(data["variant"]),
                     ref_outputs=[move(t) for t in outputs], fallback_from=data["fallback_from"],
                     ref_inputs={int(i): move(t) for i, t in data["ref_inputs"].items()},
                     ref_grads={str(n): move(t) for n, t in data["ref_grads"].items()},
                     input_bytes=int(data.get("input_bytes", 0)))
