"""The data between the seed's stages: what inductor wrote for a problem (`Capture`), and what the
writer made of it (`Seed`). Plain dataclasses, no torch."""
from __future__ import annotations

from dataclasses import dataclass, field

GEMM_MODES = ("auto", "extern", "native", "template")
ORIGIN = "inductor seed"  # the seed file's `# origin:` line (docs/seed.md); reports label results by it


class SeedError(Exception):
    """A problem that cannot be written as a seed, with the reason in one paragraph (nothing is written)."""


@dataclass(frozen=True)
class LaunchConfig:
    """One kernel's fixed launch: its block sizes (constexpr keyword arguments), warps and stages."""

    kwargs: dict[str, object]
    num_warps: int
    num_stages: int
    tuned: bool  # chosen by inductor's autotuner on a GPU (False: inductor's first configuration)


@dataclass(frozen=True)
class Kernel:
    """A Triton kernel inductor wrote: its module source as inductor wrote it, the launch chosen for
    it, and the grid as Python expressions of the launch's arguments (inductor's `GridExpr`)."""

    name: str
    source: str
    config: LaunchConfig
    grid_prefix: tuple[str, ...]
    grid: tuple[str, str, str]
    heuristic: str  # pointwise, reduction, persistent_reduction, template, ...
    grid_args: tuple[str, ...] = ()  # launch arguments the wrapper passes for the grid only (a template's fixed grid)


@dataclass(frozen=True)
class Capture:
    """What torch.compile produced for Model.forward at fixed sizes."""

    wrapper: str  # inductor's wrapper module (Python source)
    kernels: dict[str, Kernel]
    arg_exprs: tuple[str, ...]  # per argument of the wrapper's call: `self.linear.weight`, `x`
    forward_params: tuple[str, ...]  # Model.forward's parameter list, as written
    outputs: str  # "tensor" or "tuple" (the shape of Model.forward's result)
    output_count: int  # tensors Model.forward returns
    device: str  # "cuda" or "cpu"
    gemm: str  # extern, native, template
    versions: dict[str, str] = field(default_factory=dict)  # torch, triton


@dataclass
class Seed:
    """The written file's source and what its header says."""

    source: str
    kernels: list[str]
    torch_calls: list[str]  # torch ops forward's Python still calls (extern kernels, ATen fallbacks)
    rule_sets: dict[str, str]  # rule set -> "" (expected to pass) or why not
    notes: list[str] = field(default_factory=list)

    def passes(self, rules: str) -> bool:
        return self.rule_sets.get(rules, "?") == ""
