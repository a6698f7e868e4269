"""The built-in template library: Triton templates the team wrote for common patterns, matched to a
problem without an LLM.

Kernel families (one Triton kernel each, generated for the problem's own ops):
- pointwise: fused elementwise chains (activations, scalar arithmetic, bias and residual adds);
- rowwise: reductions over adjacent dims with what surrounds them fused: softmax, log-softmax,
  layer/rms/batch/instance/group norm, logsumexp, sum/mean/max/min, vector norms;
- gemm_epilogue: matmul / bmm / linear / addmm with the following pointwise ops as epilogue;
- pool: max/avg pooling over 1-3 dims (adaptive average pooling too), with an epilogue;
- conv: convolution and transposed convolution over 1-3 dims (groups, stride, padding, dilation) as
  an implicit GEMM, with an epilogue.

`build_template(problem)` exports the reference forward (torch.export), lowers it to pointwise,
reduce and matmul nodes, partitions those into kernels, and writes one template whose default
instance is an ordinary candidate. It raises `NoTemplate` naming the op that no family covers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..hardware import DeviceLimits, detect_limits
from ..template import Template, parse_template
from . import conv, gemm, pointwise, pool, rowwise
from .assemble import embed_reference, forward_source, template_source
from .fuse import partition
from .graph import capture
from .ir import Unsupported
from .layout import check_layouts
from .lower import lower


class NoTemplate(Exception):
    """No built-in template implements the whole forward; the message says why."""


@dataclass
class LibraryMatch:
    template: Template
    families: list[str]
    description: str
    groups: list[str] = field(default_factory=list)  # one line per kernel
    dynamic: bool = True


def build_template(problem, *, allow_tf32: bool = False, limits: DeviceLimits | None = None,
                   seed: int = 0) -> LibraryMatch:
    """A template implementing `problem`'s whole forward with library kernels, or NoTemplate."""
    limits = limits or detect_limits()
    try:
        program = lower(capture(problem, seed))
        groups = partition(program)
        if not groups:
            raise Unsupported("the forward computes nothing a kernel could do (it only reshapes its inputs)")
        check_layouts(groups)
        prefixed = len(groups) > 1
        env = limits.as_env()
        codes = []
        for group in groups:
            prefix = f"g{group.index}_" if prefixed else ""
            if group.kind == "gemm":
                codes.append(gemm.generate(group, prefix, env, allow_tf32=allow_tf32))
            elif group.kind == "reduce":
                codes.append(rowwise.generate(group, prefix, env))
            elif group.kind == "pool":
                codes.append(pool.generate(group, prefix, env))
            elif group.kind == "conv":
                codes.append(conv.generate(group, prefix, env, allow_tf32=allow_tf32))
            else:
                codes.append(pointwise.generate(group, prefix, env))
    except Unsupported as exc:
        raise NoTemplate(f"no built-in template covers {problem.name}: {exc}") from None
    except ValueError as exc:
        raise NoTemplate(f"no built-in template fits {problem.name}: {exc}") from None
    families = [c.family for c in codes]
    lines = [f"kernel {g.index}: {c.family} over {list(g.domain)} ({g.describe()})" for g, c in zip(groups, codes, strict=False)]
    name = "+".join(families)
    description = "Kernels:\n" + "\n".join("- " + line for line in lines)
    kw_tune = {
        "name": name,
        "params": {k: v for c in codes for k, v in c.declared_params().items()},
        "constraints": [x for c in codes for x in c.constraints],
        "defaults": {k: v for c in codes for k, v in c.defaults.items()},
        "sizes": {k: v for c in codes for k, v in c.sizes.items()},
        "backend": "triton",
        "meta": {"library": families, "problem": problem.name, "dynamic_shapes": program.dynamic,
                 "groups": [f"g{g.index}_" if prefixed else "" for g in groups]},
    }
    source = template_source(
        name=name, problem_name=problem.name, description=description, kw_tune=kw_tune,
        reference=embed_reference(problem.source, problem.overrides),
        kernels=[c.kernel for c in codes], launchers=[c.launcher for c in codes],
        forward_args=[n.name for n in program.user_inputs],
        forward_body=forward_source(program, groups, {g.index: c.launcher_name for g, c in zip(groups, codes, strict=False)}),
    )
    template = parse_template(source, name=name)
    return LibraryMatch(template, families, description, lines, program.dynamic)


__all__ = ["LibraryMatch", "NoTemplate", "build_template"]
