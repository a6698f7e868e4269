"""What a GPU kernel did, from its name alone: the work kind of a kernel the candidate did not write.

The runner's profiler (CUPTI, every thread of the process) names every kernel that ran; the
candidate's own kernels are known by name (its Triton functions, the `__global__` functions of its
extension sources). Every other kernel is torch's or a vendor library's, and `kernel_kind` sorts it
into the work kinds the rule sets count (`problem.ops.work_kind`'s: matmul, conv, softmax, norm,
pool, reduction, attention, elementwise), or None for kernels that do no arithmetic on values
(copies, casts, fills, concatenation: free, as the free ATen ops are). Unknown names count as
work ("other"): a rule errs towards counting torch work, never towards hiding it.

Stdlib only.
"""
from __future__ import annotations

import re

_FREE = re.compile(r"copy|Copy|fill|Fill|memset|Memset|memcpy|Memcpy|CatArray|cat_|_cat|zero|Zero|"
                   r"index_elementwise_kernel.*copy|cast|Cast|convert|Convert|pad|Pad|arange|Arange",)
_KINDS = (
    ("attention", re.compile(r"flash|fmha|attention|Attention|sdpa", re.IGNORECASE)),
    ("conv", re.compile(r"conv(?!ert)|fprop|dgrad|wgrad|winograd|cudnn|im2col|col2im", re.IGNORECASE)),
    ("matmul", re.compile(r"gemm|xmma|nvjet|sgemm|hgemm|s884|s1688|s16816|h884|cublas|cutlass|gemv|"
                          r"matmul|splitKreduce|wgmma", re.IGNORECASE)),
    ("softmax", re.compile(r"softmax", re.IGNORECASE)),
    ("norm", re.compile(r"norm", re.IGNORECASE)),
    ("pool", re.compile(r"pool", re.IGNORECASE)),
    ("reduction", re.compile(r"reduce|Reduce|scan|Scan|cumsum|argmax|argmin")),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|pointwise|Functor|_kernel_impl|activation",
                               re.IGNORECASE)),
)
_GLOBAL = re.compile(r"__global__\s+(?:[\w:<>,\s\*&]+?\s+)?(\w+)\s*\(")
_TEMPLATE_GLOBAL = re.compile(r"__global__[^;{]*?\b(\w+)\s*\(")


def function_name(kernel: str) -> str:
    """The function a (possibly demangled, templated) kernel name names: `void ns::k<float>(int)` -> `k`."""
    text = re.sub(r"^\s*void\s+", "", kernel.strip())
    depth, out = 0, []
    for ch in text:
        if ch == "(" and depth == 0:
            break
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    return name.split("::")[-1].strip() or kernel.strip()


def kernel_kind(name: str) -> str | None:
    """The work kind of a foreign kernel, "other" for an unknown one, None for a free one."""
    for kind, pattern in _KINDS[:3]:  # products and convolutions first: their names mention "copy" too
        if pattern.search(name):
            return kind
    if _FREE.search(name):
        return None
    for kind, pattern in _KINDS[3:]:
        if pattern.search(name):
            return kind
    return "other"


def extension_kernels(source: str) -> set[str]:
    """Names of the `__global__` functions a candidate's C++/CUDA sources define."""
    return {m.group(1) for pattern in (_GLOBAL, _TEMPLATE_GLOBAL) for m in pattern.finditer(source)}


def is_own(kernel: str, triton: set[str], extension: set[str]) -> bool:
    """Whether a kernel is one the candidate wrote: one of its Triton functions (by name, with the
    suffixes Triton may add) or a `__global__` function of its extension sources."""
    base = function_name(kernel)
    if base in extension or kernel.strip() in triton:
        return True
    return any(base == t or base.startswith(t + "_") for t in triton)
