"""Check, before writing a template, that each kernel can address its operands.

The launchers merge dimensions at run time (runtime.kw_merge); here the same merges run on the
example shapes with contiguous strides, so a broadcast pattern the kernels cannot express (a
per-channel weight inside merged batch-and-channel rows, say) declines the template with a
reason instead of producing an instance that fails in the judge.
"""
from __future__ import annotations

import torch

from .fuse import FULL, Group
from .ir import Unsupported
from .runtime import kw_merge, kw_row_layout


def _strides(shape, domain) -> list[int]:
    t = torch.empty(shape, device="meta")
    return list(t.expand(domain).stride()) if t.dim() else [0] * len(domain)


def _merge(domain, strides, dims, max_dims, what: str, group: Group) -> list[int]:
    try:
        return kw_merge(domain, strides, list(dims), max_dims)[0]
    except ValueError as exc:
        raise Unsupported(f"kernel {group.index} ({group.describe()}): {what}: {exc}") from None


def check_layouts(groups: list[Group]) -> None:
    for group in groups:
        domain = tuple(group.domain)
        if group.kind == "pointwise":
            strides = [_strides(x.shape, domain) for x in group.inputs]
            _merge(domain, strides, range(len(domain)), 3, "operands broadcast in more than 3 ways", group)
        elif group.kind == "reduce":
            _check_reduce(group, domain)
        elif group.kind == "pool":
            _check_pool(group, domain)
        elif group.kind == "gemm":
            _check_gemm(group)


def _check_reduce(group: Group, domain) -> None:
    strides = [_strides(x.shape, domain) for x in group.inputs]
    for out in group.outputs:
        shape = domain if group.shape_class(out.shape) == FULL else group.keep_shape
        strides.append(_strides(shape, domain))
    dims = group.dims
    p_dims, q_dims = kw_row_layout(domain, dims)
    _merge(domain, strides, p_dims, 2, "the kept dims do not merge", group)
    _merge(domain, strides, dims, 2, "the reduced dims do not merge", group)
    _merge(domain, strides, q_dims, 2, "the kept dims do not merge", group)


def _check_pool(group: Group, domain) -> None:
    x = group.anchor.args[0]
    lead = tuple(x.shape[: len(x.shape) - len(group.anchor.params["kernel"])])
    _merge(lead, [_strides(lead, lead)], range(len(lead)), 2, "the dims before the window do not merge", group)
    epilogue = [_strides(i.shape, domain) for i in group.inputs if i is not x]
    _merge(domain, epilogue, range(len(domain)), 3, "epilogue operands broadcast in more than 3 ways", group)


def _check_gemm(group: Group) -> None:
    a, b = group.matmul.args
    batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    if not batch:
        return
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    strides = [_strides(a.shape, batch + (m, k))[:len(batch)], _strides(b.shape, batch + (k, n))[:len(batch)]]
    out = batch + (m, n)
    strides += [_strides(x.shape, out)[:len(batch)] for x in group.inputs if x is not a and x is not b]
    _merge(out, strides, range(len(batch)), 1, "batch dims do not merge", group)
