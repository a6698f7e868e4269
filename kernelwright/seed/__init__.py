"""`kernelwright seed`: torch.compile's own kernels for a problem as a standalone `ModelNew`.

inductor compiles the problem's Model once (`capture`); its Triton kernels become plain
`@triton.jit` functions with fixed launches (`kernels`), its wrapper's `call` becomes forward's code
(`wrapper`), the reference's Model is copied so the weights match (`reference`), and the file is
checked before it is written (`check`): no torch._inductor / dynamo at run time, the same weights
and outputs as the reference. What cannot be exported is a `SeedError` with the reason; nothing is
written then. docs/seed.md.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import rules as rule_sets
from ..files import atomic_write
from .types import GEMM_MODES, ORIGIN, Seed, SeedError

__all__ = ["GEMM_MODES", "ORIGIN", "Seed", "SeedError", "SeedOptions", "seed_problem"]


@dataclass(frozen=True)
class SeedOptions:
    rules: str = rule_sets.DEFAULT  # the rule set the seed must be expected to pass under
    gemm: str = "auto"  # extern (inductor's cuBLAS/ATen calls kept), native (tl.dot), template, auto
    overrides: dict[str, Any] | None = None
    device: str = "auto"  # auto, cuda, cpu
    check: bool = True  # load the written file and compare it with the reference before keeping it


def seed_problem(problem_path: str | Path, out: str | Path, options: SeedOptions = SeedOptions()) -> Seed:
    """Write the seed of `problem_path` to `out` and return what it holds; SeedError when it cannot be
    written (the reason names the construct or the rule), leaving `out` untouched."""
    from ..problem import ProblemError, load_problem  # noqa: PLC0415 -- report/collect.py imports seed.types, which runs this package first: its start stays stdlib-only
    from .capture import capture  # noqa: PLC0415 -- report/collect.py imports seed.types, which runs this package first: its start stays stdlib-only
    from .check import check_seed  # noqa: PLC0415 -- report/collect.py imports seed.types, which runs this package first: its start stays stdlib-only
    from .kernels import kernel_code  # noqa: PLC0415 -- report/collect.py imports seed.types, which runs this package first: its start stays stdlib-only
    from .reference import reference_source  # noqa: PLC0415 -- report/collect.py imports seed.types, which runs this package first: its start stays stdlib-only
    from .render import RESERVED, render  # noqa: PLC0415 -- report/collect.py imports seed.types, which runs this package first: its start stays stdlib-only
    from .wrapper import rewrite_call  # noqa: PLC0415 -- report/collect.py imports seed.types, which runs this package first: its start stays stdlib-only

    rules = rule_sets.get(options.rules).name
    device = _device(options.device)
    gemm = _gemm(options.gemm, rules)
    try:  # the sizes the judge loads it with: shrunk on a CPU
        problem = load_problem(problem_path, options.overrides, shrink=device == "cpu")
    except ProblemError as exc:
        raise SeedError(str(exc)) from exc
    captured = capture(problem, gemm, device)
    codes = [kernel_code(k) for k in captured.kernels.values()]
    call = rewrite_call(captured.wrapper, set(captured.kernels))
    if not codes:
        raise SeedError(_no_kernel(call.torch_calls, gemm))
    if call.inputs is not None and call.inputs != len(captured.arg_exprs):
        raise SeedError(f"inductor's call takes {call.inputs} arguments for the {len(captured.arg_exprs)} tensors of "
                        "dynamo's graph (a tensor passed twice, e.g. tied weights, is deduplicated outside inductor); "
                        "the seed cannot map them")
    if call.outputs != captured.output_count:
        raise SeedError(f"inductor's call returns {call.outputs} tensors and Model.forward {captured.output_count} "
                        "(an output that is a view of an input is rebuilt outside inductor's code); the seed "
                        "cannot map them")
    expected = expected_rule_sets(call.torch_calls)
    if expected[rules]:
        hint = (" (--gemm native writes matmuls as Triton kernels)" if gemm == "extern" else
                " (inductor writes matmuls as Triton kernels on a GPU only: write this seed there)" if device == "cpu"
                else "")
        raise SeedError(f"the seed would not pass under the {rules} rule set: {expected[rules]}{hint}")
    reserved = RESERVED | set(call.extern_helpers) | {f"launch_{c.name}" for c in codes} | {c.name for c in codes}
    source = render(str(problem_path), _sizes(problem), captured, reference_source(problem, reserved), codes, call,
                    expected)
    with tempfile.TemporaryDirectory(prefix="kw-seed-") as folder:
        trial = Path(folder) / f"{Path(problem_path).stem}_seed.py"
        trial.write_text(source)
        if options.check:
            check_seed(problem, trial, device)
    atomic_write(Path(out), source)
    return Seed(source, [c.name for c in codes], list(call.torch_calls), expected,
                notes=[] if all(k.config.tuned for k in captured.kernels.values())
                else ["launch configurations are inductor's first, not timed (written on a CPU)"])


def expected_rule_sets(torch_calls: list[str]) -> dict[str, str]:
    """Per rule set, "" where the seed is expected to pass, else why not: forward's Python may call
    torch compute only where the set allows it (kernelbench). The judge decides; this is what the
    header says before it does."""
    compute = sorted(set(torch_calls))
    return {name: (f"forward's Python calls {', '.join(compute)}" if compute and not rule_sets.get(name).python_torch_work
                   else "") for name in rule_sets.NAMES}


def _device(device: str) -> str:
    if device == "auto":
        import torch  # noqa: PLC0415 -- report/collect.py imports seed.types, which runs this package first: its start stays stdlib-only

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cuda", "cpu"):
        raise SeedError(f"unknown device {device!r}; choose auto, cuda or cpu")
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise SeedError("on a CPU the seed's Triton kernels run only under the interpreter: set TRITON_INTERPRET=1 "
                        "(the `kernelwright seed` command does)")
    return device


def _gemm(gemm: str, rules: str) -> str:
    if gemm not in GEMM_MODES:
        raise SeedError(f"unknown --gemm {gemm!r}; choose one of {', '.join(GEMM_MODES)}")
    if gemm == "auto":
        return "extern" if rule_sets.get(rules).python_torch_work else "native"
    return gemm


def _sizes(problem) -> str:
    sizes = ", ".join(f"{k}={v!r}" for k, v in problem.constants.items() if isinstance(v, (int, float, tuple)))
    return sizes + (" (shrunk for the CPU)" if problem.shrunk else "")


def _no_kernel(torch_calls: list[str], gemm: str) -> str:
    calls = ", ".join(dict.fromkeys(torch_calls)) or "no op at all"
    matmuls = {"torch.mm", "torch.addmm", "torch.bmm", "torch.baddbmm"} & set(torch_calls)
    hint = "; --gemm native (on a GPU) asks inductor to write matmuls as Triton kernels" \
        if gemm == "extern" and matmuls else ""
    return (f"inductor's code for this problem launches no Triton kernel (it calls {calls}): a seed would fail the "
            f"own-kernel rule under every rule set{hint}")
