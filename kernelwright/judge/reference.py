"""The reference's side of a judgement when the reference is a kernel itself (Triton or CUDA C++).

The reference runs in the worker before any candidate code, as always; what changes:
- its own C++/CUDA extension builds through the judge's build cache (installed before the problem
  is loaded), so it is built once per content hash and a broken build is reported with the
  compiler's first errors, apart from the candidate's builds (`build_note`, `reference_build`);
- a CUDA reference cannot run without a CUDA device: on the CPU the judge says so at once
  (`cannot_run_here`) instead of failing in a compiler;
- the verdict records what the reference is made of (`record`): its kind, kernels, Triton
  launches of one forward, ATen compute ops, the inputs it writes in place, whether the backward
  pass counts. The rules read it: the reference's own kernels are the work to beat;
- the torch-op guard cannot compare a candidate's ATen ops with a reference that has (almost) none:
  for a kernel reference every candidate op that does work (a compute kind, elementwise arithmetic,
  or a gather/scatter/sort/selection; not allocation or filling) is PyTorch doing the reference
  kernels' work (`torch_work_hits`), judged under the run's torch-op policy like any other.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..problem.ops import compute_ops, op_kind
from ..problem.reference import ReferenceInfo, scan_source


def cannot_run_here(source: str, device: str) -> str | None:
    """Why this problem cannot be judged on `device`, or None."""
    info = scan_source(source)
    if info.device_code and not str(device).startswith("cuda"):
        kernels = f" ({', '.join(info.cuda_kernels)})" if info.cuda_kernels else ""
        return (f"the reference is a CUDA C++ extension built with load_inline{kernels}; it needs a CUDA GPU and "
                f"this judgement runs on {device}: judge this problem on a GPU machine")
    return None


def build_note(recorder) -> str:
    """The first compiler errors of the reference's own extension build, as a sentence ('' if none)."""
    result = reference_build(recorder)
    if not result or result.get("ok", True):
        return ""
    errors = " | ".join(result.get("errors") or [])[:1500]
    return f" The reference's own extension did not build: {errors}" if errors else ""


def reference_build(recorder) -> dict[str, Any] | None:
    """What the build cache did for the reference's extensions (None when it built nothing)."""
    if recorder is None or not getattr(recorder, "records", None):
        return None
    try:
        return asdict(recorder.result())
    except Exception:  # noqa: BLE001 - a recorder problem must not cost the verdict
        return None


def record(info: ReferenceInfo, launches: dict[str, int], ref_ops: dict[str, int], mutated: list[int],
           build: dict[str, Any] | None) -> dict[str, Any]:
    """`Verdict.reference`: the ReferenceInfo filled with what running the reference showed."""
    info.launches = dict(launches)
    info.compute_ops = sorted(compute_ops(ref_ops))
    info.mutated_inputs = sorted(mutated)
    data = info.to_dict()
    data["build"] = build
    return data


# ops a candidate of a kernel reference may still run through torch: allocation and filling
_GLUE = frozenset({"fill", "zero"})
# gathers, scatters, sorts and selections: the work of many hand-written kernels (permutations, paged
# caches, routing), though op kinds do not count them as compute
DATA_MOVEMENT = frozenset(
    "index index_select gather scatter scatter_add scatter_reduce index_put index_add index_copy index_fill "
    "sort topk argsort msort kthvalue bincount histc searchsorted bucketize unique _unique2 unique_consecutive "
    "nonzero masked_select masked_scatter take take_along_dim repeat_interleave embedding put".split())


def torch_work_hits(reference: dict[str, Any] | None, candidate_ops) -> list[str]:
    """For a reference whose work is its own kernels: the candidate's ATen ops that do work (any op
    kind, or a gather/scatter/sort/selection; not allocation or filling); [] for a PyTorch reference
    (the usual guard applies)."""
    if not reference or reference.get("kind", "torch") == "torch":
        return []
    return sorted(name for name in candidate_ops
                  if name.rstrip("_") not in _GLUE and (op_kind(name) is not None or name.rstrip("_") in DATA_MOVEMENT))
