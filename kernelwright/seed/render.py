"""The seed file: header (origin, versions, sizes, the rule sets it should pass under), the
reference's Model, the kernels with their helpers and launchers, the rewritten call, and
`ModelNew(Model)` whose forward calls it with the model's parameters and the forward's inputs."""
from __future__ import annotations

from .kernels import (INTERPRETED_LIBDEVICE, KernelCode, helpers_source, interpreted_libdevice_source, launcher_source,
                      libdevice_names)
from .types import ORIGIN, Capture
from .wrapper import CallCode

# names the seed file defines at module level (the reference's code may not reuse them)
RESERVED = {"os", "types", "ModelNew", "seed_call", "alloc", "reinterpret_tensor", "assert_size_stride", "assert_alignment",
            "aten", "tl", "triton", "libdevice", "tl_math", "device"}

PRELUDE = '''import math
import os
import types
from math import inf, nan

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice

tl_math = tl.math
aten = torch.ops.aten
device = torch.device
'''

RUNTIME = '''def alloc(size, stride, dtype, device):
    """inductor's empty_strided_*: a buffer on the inputs' device."""
    return torch.empty_strided(size, stride, dtype=dtype, device=device)


def reinterpret_tensor(tensor, size, stride, offset):
    """inductor's reinterpret_tensor: a view of the same storage, `offset` elements further."""
    return torch.as_strided(tensor, size, stride, tensor.storage_offset() + offset)


def assert_size_stride(tensor, size, stride, what=""):
    """The kernels are specialized to the sizes they were compiled for: other sizes are an error."""
    if tuple(tensor.shape) != tuple(size) or any(
            n > 1 and a != b for n, a, b in zip(size, tensor.stride(), stride)):
        raise ValueError(f"this seed was compiled for a tensor of size {tuple(size)} and stride {tuple(stride)}, "
                         f"got {tuple(tensor.shape)} and {tuple(tensor.stride())} ({what}); write it again "
                         "for these sizes (kernelwright seed PROBLEM --set NAME=VALUE)")


def assert_alignment(tensor, alignment, what=""):
    if tensor.data_ptr() % alignment:
        raise ValueError(f"this seed's kernels assume {alignment}-byte aligned data ({what})")
'''


def render(problem_label: str, sizes: str, capture: Capture, reference: str, codes: list[KernelCode],
           call: CallCode, rule_sets: dict[str, str]) -> str:
    """The whole file."""
    helpers = helpers_source(set().union(*(c.helpers for c in codes))) if codes else ""
    kernels = [c.text for c in codes]
    interpreted = libdevice_names(helpers, *kernels)
    if capture.device == "cpu" and interpreted:
        interpreted_source = interpreted_libdevice_source(interpreted)
    else:  # written on a GPU: a CPU stand-in where there is one (the file may be judged on a CPU too)
        interpreted_source = interpreted_libdevice_source(interpreted & set(INTERPRETED_LIBDEVICE)) if interpreted else ""
    launchers = [launcher_source(capture.kernels[c.name], c) for c in codes]
    sections = [
        _header(problem_label, sizes, capture, call, rule_sets),
        PRELUDE,
        "# ---- the reference's Model, copied: ModelNew(*get_init_inputs()) builds the same layers, so the same weights",
        reference,
        "# ---- from torch/_inductor/runtime/triton_helpers.py, renamed triton_helpers_NAME" if helpers else "",
        helpers,
        "# ---- tl stand-ins for libdevice under TRITON_INTERPRET=1 (a CPU); a GPU calls libdevice" if interpreted_source else "",
        interpreted_source,
        "# ---- inductor's kernels (its autotuning decorators dropped) and their fixed launches",
        "\n\n\n".join(kernels + launchers),
        "# ---- what inductor's wrapper needs, without torch._inductor",
        RUNTIME,
        *call.extern_helpers.values(),
        "# ---- inductor's call(args), rewritten",
        call.text,
        _model_new(capture, call),
    ]
    return "\n\n".join(s.strip("\n") for s in sections if s) + "\n"


def _header(problem_label: str, sizes: str, capture: Capture, call: CallCode, rule_sets: dict[str, str]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in capture.versions.items())
    tuned = all(k.config.tuned for k in capture.kernels.values())
    launch = ("chosen by inductor's autotuner on this GPU" if tuned else
              "inductor's first configuration (generated on a CPU, not timed: write the seed on the GPU it runs on)")
    calls = ", ".join(dict.fromkeys(call.torch_calls)) or "none"
    verdicts = "; ".join(f"{name}: {'expected to pass' if not why else 'not expected: ' + why}"
                         for name, why in rule_sets.items())
    lines = [
        f'"""{problem_label}: torch.compile\'s (inductor\'s) Triton kernels as a standalone ModelNew, written by '
        '`kernelwright seed` (docs/seed.md).',
        "",
        "It imports no torch._inductor, torch._dynamo or torch.compile: the kernels are plain @triton.jit functions",
        "with fixed launch configurations, and the wrapper's buffer allocations and kernel calls are forward's code.",
        '"""',
        f"# origin: {ORIGIN}",
        f"# written with: {versions}, on {capture.device}",
        f"# sizes: {sizes or 'as in the problem'} (the kernels are specialized to these shapes)",
        f"# launch configurations: fixed, {launch}",
        f"# matmuls: {capture.gemm}; torch calls left in forward: {calls}",
        f"# rule sets: {verdicts}",
    ]
    return "\n".join(lines)


def _model_new(capture: Capture, call: CallCode) -> str:
    args = ", ".join(capture.arg_exprs)
    params = ", ".join(("self",) + capture.forward_params)
    if capture.outputs == "tensor":
        result = "seed_call([" + args + "])[0]"
    else:
        result = "tuple(seed_call([" + args + "]))"
    return (f"class ModelNew(Model):\n"
            f"    \"\"\"The reference's layers (so its weights); forward runs inductor's kernels.\"\"\"\n\n"
            f"    def forward({params}):\n"
            f"        return {result}\n")
