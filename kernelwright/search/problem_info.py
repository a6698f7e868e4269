"""What the engine knows about the problem: plain data, gathered once by the driver.

`describe_problem` does the I/O (loads and shrinks the problem, records the reference's ATen
ops, looks at the local GPU); the engine only ever sees the resulting `ProblemInfo`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.problem import ProblemError, load_problem
from kernelwright.problem.loader import read_source
from kernelwright.problem.reference import describe_reference, scan_source

BACKENDS = ("triton", "cuda")


@dataclass
class ProblemInfo:
    name: str
    source: str  # the reference program as written (GPU sizes): what agents read
    path: str = ""
    backend: str = "triton"
    device: str = "cpu"  # where candidates will be judged, in words ("cuda: NVIDIA H100", "cpu")
    op_kinds: list[str] = field(default_factory=list)
    gpu: str | None = None  # e.g. "sm_90"; None on CPU
    overrides: dict[str, Any] = field(default_factory=dict)
    # what the reference is made of (problem.reference.ReferenceInfo as a dict): its own Triton/CUDA
    # kernels or PyTorch ops, inputs it writes in place, whether the backward pass is part of the work
    reference: dict[str, Any] = field(default_factory=dict)
    rules: str = "kernelbench"  # the rule set candidates are judged by (kernelwright.rules): agents are told
    # the reference's torch work per kind, as the rule sets count it (problem.ops.work_counts)
    work: dict[str, int] = field(default_factory=dict)
    dtypes: list[str] = field(default_factory=list)  # floating dtypes of inputs and parameters, most elements first
    flops: float | None = None  # one forward at the sizes judged on a GPU (the floor's FLOPs)
    bytes: float | None = None  # what one timed call moves at least (problem/footprint.py; the floor's bytes)
    # 128 x 128 output tiles of the matrix product (or convolution as an implicit GEMM) doing the most
    # FLOPs, at the judged sizes: whether split-K or a persistent grid can pay (skills' `tiles`)
    product_tiles: int | None = None
    # layers whose result depends on training vs eval mode, each with what it does in the mode the
    # judge runs models in (training: it never calls .eval()), e.g. "`bn` (BatchNorm2d): normalises ..."
    mode_layers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend {self.backend!r} is not one of {', '.join(BACKENDS)}")

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ProblemInfo":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def describe_problem(path: str | Path, backend: str = "triton",
                     overrides: dict[str, Any] | None = None, device: str = "auto") -> ProblemInfo:
    """Load the problem (shrunk when judged on a CPU) and describe it; ProblemError when broken.

    `device` is the judge's setting ("auto", "cuda", "cpu"): agents are told where their code runs.
    A reference that is a kernel itself (Triton, CUDA) is not run here: its work is invisible to the
    op recorder, and its kernels run in the judge's sandbox only (a CUDA one builds there).
    """
    import torch  # noqa: PLC0415 -- search/ stays torch-free at import (the engine's process, the CLI's start): loaded when the problem is loaded and described

    on_gpu = torch.cuda.is_available() and device != "cpu"
    _, source = read_source(path)
    reference = scan_source(source)
    if reference.device_code and not on_gpu:
        raise ProblemError("the reference is a CUDA C++ extension (load_inline): it needs a CUDA GPU, and candidates "
                           "are judged on the CPU here", path=path)
    name, kinds, work, modes = Path(path).stem, [], {}, []
    if reference.kind != "cuda":  # loading a CUDA reference builds its extension: only the judge does that
        problem = load_problem(path, overrides=overrides, shrink=not on_gpu)
        name, source, reference = problem.name, problem.source, describe_reference(problem)
        if reference.kind == "torch":
            kinds, reference.mutated_inputs, work = _run_reference(problem, path)
            modes = mode_layers(problem.make_model(seed=0))
    device, gpu = "cpu", None
    if on_gpu:
        major, minor = torch.cuda.get_device_capability()
        device, gpu = f"cuda: {torch.cuda.get_device_name()}", f"sm_{major}{minor}"
    dtypes, flops, nbytes = footprint(path, overrides) if reference.kind != "cuda" else ([], None, None)
    tiles = product_tiles(path, overrides) if reference.kind == "torch" else None
    return ProblemInfo(name=name, source=source, path=str(Path(path).resolve()),
                       backend=backend, device=device, op_kinds=kinds, gpu=gpu,
                       overrides=dict(overrides or {}), reference=reference.to_dict(), work=work,
                       dtypes=dtypes, flops=flops, bytes=nbytes, product_tiles=tiles, mode_layers=modes)


def _run_reference(problem, path) -> tuple[list[str], list[int], dict[str, int]]:
    """(op kinds, inputs written in place, work per kind) of one forward of a PyTorch reference on
    the CPU."""
    from kernelwright.judge.check import fingerprint  # noqa: PLC0415 -- the engine's process loads no judge code (tests/search/test_engine.py): loaded where the search meets the judge's results
    from kernelwright.problem.ops import op_kinds, record_aten_ops, work_counts  # noqa: PLC0415 -- it imports torch at its top: search/ stays torch-free at import (the engine's process, the CLI's start)

    try:
        model = problem.make_model(seed=0)
        inputs = problem.make_inputs(seed=0)
        before = [fingerprint(x) for x in inputs]
        ops = record_aten_ops(model, *inputs)
        kinds = sorted(op_kinds(ops))
    except Exception as exc:  # noqa: BLE001 -- the op kinds only steer skills; the judge will report a broken reference
        raise ProblemError(f"the reference could not run on its inputs: {type(exc).__name__}: {exc}",
                           path=path) from None
    mutated = [i for i, (x, b) in enumerate(zip(inputs, before, strict=True)) if fingerprint(x) != b]
    return kinds, mutated, dict(sorted(work_counts(ops).items()))



def footprint(path: str | Path, overrides: dict[str, Any] | None) -> tuple[list[str], float | None, float | None]:
    """(floating dtypes by element count, FLOPs, bytes) of one forward at full size, on the meta
    device (nothing is allocated); unknowns are empty or None."""
    import torch  # noqa: PLC0415 -- search/ stays torch-free at import (the engine's process, the CLI's start): loaded when the problem is loaded and described

    from kernelwright.problem.footprint import measure  # noqa: PLC0415 -- it imports torch at its top: search/ stays torch-free at import (the engine's process, the CLI's start)

    try:
        full = load_problem(path, overrides=overrides, shrink=False)
        counts: dict[str, int] = {}
        with torch.device("meta"):
            torch.manual_seed(0)
            tensors = [x for x in full.module.get_inputs() if isinstance(x, torch.Tensor)]
            tensors += list(full.Model(*full.module.get_init_inputs()).state_dict().values())
        for tensor in tensors:
            if tensor.is_floating_point():
                name = str(tensor.dtype).removeprefix("torch.")
                counts[name] = counts.get(name, 0) + tensor.numel()
        found = measure(full)
    except Exception:  # noqa: BLE001 - the footprint only steers prompts; the judge measures for real
        return [], None, None
    dtypes = sorted(counts, key=lambda d: -counts[d])
    return dtypes, (found.flops or None), (found.bytes if found.complete else None)


TILE = 128  # the output tile the count is made in (a typical tensor-core GEMM tile)
_MM_OPS = {"mm": 0, "addmm": 1, "bmm": 0, "baddbmm": 1}  # op -> position of the left operand


def product_tiles(path: str | Path, overrides: dict[str, Any] | None) -> int | None:
    """128 x 128 output tiles of the reference's heaviest matrix product at full size, on the meta
    device: a GEMM's M x N output (times its batch), a convolution's N*spatial x C_out per group as
    an implicit GEMM. None when the forward has no product or cannot run on meta."""
    import torch  # noqa: PLC0415 -- search/ stays torch-free at import (the engine's process, the CLI's start): loaded when the problem is loaded and described
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415 -- search/ stays torch-free at import (the engine's process, the CLI's start): loaded when the problem is loaded and described

    products: list[tuple[float, int]] = []  # (FLOPs, tiles) per product op

    class Products(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            try:
                products.append(_product(func.overloadpacket.__name__, args, out))
            except (AttributeError, IndexError, TypeError, ValueError):
                pass
            return out

    try:
        full = load_problem(path, overrides=overrides, shrink=False)
        with torch.device("meta"), torch.no_grad():
            torch.manual_seed(0)
            model = full.Model(*full.module.get_init_inputs())
            inputs = list(full.module.get_inputs())
            with Products():
                model(*inputs)
    except Exception:  # noqa: BLE001 - the count only steers skills; a forward meta cannot run has none
        return None
    products = [p for p in products if p is not None]
    return max(products)[1] if products else None


def _product(name: str, args, out) -> tuple[float, int] | None:
    """(FLOPs, output tiles) of one dispatched op, None when it is no matrix product."""
    def tiles(rows: int, cols: int) -> int:
        return math.ceil(rows / TILE) * math.ceil(cols / TILE)

    if name in _MM_OPS:
        left = args[_MM_OPS[name]]
        rows, cols = out.shape[-2], out.shape[-1]
        batch = math.prod(out.shape[:-2])
        return 2.0 * batch * rows * cols * left.shape[-1], batch * tiles(rows, cols)
    if name == "convolution":
        weight, groups = args[1], int(args[8])
        rows = out.shape[0] * math.prod(out.shape[2:])
        per_group = out.shape[1] // groups
        depth = weight.shape[1] * math.prod(weight.shape[2:])  # reduction length of the implicit GEMM
        return 2.0 * rows * out.shape[1] * depth, groups * tiles(rows, per_group)
    return None


def mode_layers(model) -> list[str]:
    """The layers of `model` whose result depends on their `training` flag, each with what it does in
    the mode it is in as constructed, the mode the judge runs it in (the judge builds models and never
    calls `.train()` or `.eval()`: training mode unless the problem's own code switched a layer)."""
    import torch.nn as nn  # noqa: PLC0415 -- search/ stays torch-free at import (the engine's process, the CLI's start): loaded when the problem is loaded and described
    from torch.nn.modules.batchnorm import _BatchNorm  # noqa: PLC0415 -- search/ stays torch-free at import (the engine's process, the CLI's start): loaded when the problem is loaded and described
    from torch.nn.modules.instancenorm import _InstanceNorm  # noqa: PLC0415 -- search/ stays torch-free at import (the engine's process, the CLI's start): loaded when the problem is loaded and described

    found = []
    for name, module in model.named_modules():
        kind = type(module).__name__
        evaluating = "" if module.training else ", in eval mode as constructed"
        if isinstance(module, _InstanceNorm):
            if module.track_running_stats:
                found.append(f"`{name}` ({kind}{evaluating}): " + (
                    "normalises with each instance's own statistics, not its running statistics" if module.training
                    else "normalises with its running statistics, not each instance's own"))
        elif isinstance(module, _BatchNorm):
            if module.training or not module.track_running_stats:
                found.append(f"`{name}` ({kind}{evaluating}): normalises with the current batch's mean and biased "
                             "variance" + (" (its running statistics are only updated, never used)"
                                           if module.track_running_stats else " (it keeps no running statistics)"))
            else:
                found.append(f"`{name}` ({kind}{evaluating}): normalises with its running mean and variance "
                             "(fixed per channel: an affine map per channel), not the batch's")
        elif isinstance(module, (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
                                 nn.FeatureAlphaDropout)):
            found.append(f"`{name}` ({kind}, p={module.p:g}{evaluating}): " + (
                "draws a new random mask on every call" if module.training and module.p > 0 else "is the identity"
                + (" (p = 0)" if module.p == 0 else "")))
    return found
