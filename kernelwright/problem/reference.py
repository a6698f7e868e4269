"""What a problem's reference is made of: PyTorch ops, or kernels of its own (Triton, CUDA C++).

Most KernelBench references are PyTorch ops, and the dispatcher records their work (ops.py). A
reference taken from a real project is often a kernel already: a Triton `@triton.jit` function,
or a CUDA C++ extension built with `load_inline`. Its work never reaches the dispatcher, so its op
record shows little more than allocations; the judge, the baselines, the agents and the rules
must treat the reference's own kernels as the work a candidate has to beat.

This module reads, without running anything:
- `reference_kind(source)`: "cuda" (it builds a C++/CUDA extension; `device_code` says whether
  the extension has CUDA sources), "triton" (it defines Triton kernels) or "torch" (neither);
- the kernels it defines (`scan_source`): Triton functions, extension names, `__global__`
  functions of its CUDA sources;
- the problem's declarations about the work (`declared_work`): module-level `KW_BACKWARD = True`
  or a `get_grad_outputs()` function make the backward pass part of it; `KW_GRAD_INPUTS`
  (indices into `get_inputs()`) restricts which inputs' gradients are checked.

`TritonLaunchRecorder` counts the Triton launches of a forward at run time (the dispatcher does
not see them); extension calls are not counted (nothing in torch sees them either).
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from .pysource import attribute_chain, import_aliases, qualified

KINDS = ("torch", "triton", "cuda")
_TRITON_DECORATORS = ("jit", "autotune", "heuristics")
_EXTENSION_BUILDERS = ("load_inline", "load")
_GLOBAL_FN = re.compile(r"__global__\s+[\w:<>,\s*&]*?\b(\w+)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")


@dataclass
class ReferenceInfo:
    """The reference's make-up and the work it declares; plain data for verdicts and prompts."""

    kind: str = "torch"  # "torch" | "triton" | "cuda"
    triton_kernels: list[str] = field(default_factory=list)  # @triton.jit functions it defines
    extensions: list[str] = field(default_factory=list)  # load_inline / load extension names
    cuda_kernels: list[str] = field(default_factory=list)  # __global__ functions of its CUDA sources
    device_code: bool = False  # its extension has CUDA sources (a C++-only extension runs on the CPU)
    backward: bool = False  # the backward pass is part of the work (gradients checked and timed)
    grad_inputs: list[int] | None = None  # inputs whose gradients count (None: every floating input)
    custom_grad_outputs: bool = False  # the problem defines get_grad_outputs()
    # filled by the judge when it runs the reference:
    launches: dict[str, int] = field(default_factory=dict)  # Triton launches of one forward, by kernel
    compute_ops: list[str] = field(default_factory=list)  # ATen compute ops among its op record
    mutated_inputs: list[int] = field(default_factory=list)  # inputs its forward writes in place

    @property
    def is_kernel(self) -> bool:
        """The reference's work is (mostly) in its own kernels, not in PyTorch ops."""
        return self.kind != "torch"

    @property
    def kernels(self) -> list[str]:
        return self.triton_kernels + self.cuda_kernels

    def baseline_label(self) -> str:
        """What the "eager" baseline times for this reference, in words."""
        return {"torch": "eager PyTorch", "triton": "reference kernel (Triton)",
                "cuda": "reference kernel (CUDA)"}[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "ReferenceInfo":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


def _resolve(node: ast.AST, imported: dict[str, str]) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    return qualified(attribute_chain(node), imported)


def _is_triton_decorator(name: str) -> bool:
    head, _, last = name.rpartition(".")
    return head.split(".")[0] == "triton" and last in _TRITON_DECORATORS


def _is_extension_builder(name: str) -> bool:
    head, _, last = name.rpartition(".")
    return last in _EXTENSION_BUILDERS and "cpp_extension" in head


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def scan_source(source: str) -> ReferenceInfo:
    """Kind and kernels of a reference program, read from its syntax tree (comments and strings
    that merely mention triton do not count); an unparsable source reads as "torch"."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ReferenceInfo()
    imported = import_aliases(tree)
    info = ReferenceInfo()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            if any(_is_triton_decorator(_resolve(d, imported)) for d in node.decorator_list):
                info.triton_kernels.append(node.name)
        elif isinstance(node, ast.Call) and _is_extension_builder(_resolve(node, imported)):
            name = next((k.value for k in node.keywords if k.arg == "name"), None)
            label = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "extension"
            info.extensions.append(label)
            info.device_code |= _builds_cuda(node)
    cuda_text = _LAUNCH_BOUNDS.sub(" ", "\n".join(s for s in _strings(tree) if "__global__" in s))
    info.cuda_kernels = sorted(set(_GLOBAL_FN.findall(cuda_text)))
    info.device_code |= bool(info.cuda_kernels)
    info.kind = "cuda" if info.extensions else "triton" if info.triton_kernels else "torch"
    info.backward, info.custom_grad_outputs = _declared_backward(tree)
    return info


def _builds_cuda(call: ast.Call) -> bool:
    """An extension build call with CUDA sources (`cuda_sources=`, `with_cuda=True`, a .cu file)."""
    for keyword in call.keywords:
        if keyword.arg == "cuda_sources" and not (isinstance(keyword.value, ast.Constant) and not keyword.value.value):
            return True
        if keyword.arg == "with_cuda" and isinstance(keyword.value, ast.Constant) and keyword.value.value:
            return True
    return any(s.endswith((".cu", ".cuh")) for s in _strings(call))


def _declared_backward(tree: ast.Module) -> tuple[bool, bool]:
    """(backward declared, get_grad_outputs defined), from the module's top-level statements."""
    custom = any(isinstance(n, ast.FunctionDef) and n.name == "get_grad_outputs" for n in tree.body)
    flag = False
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KW_BACKWARD" for t in node.targets):
            flag = isinstance(node.value, ast.Constant) and bool(node.value.value)
    return flag or custom, custom


def reference_kind(source: str) -> str:
    """"cuda", "triton" or "torch": what the reference's work runs as."""
    return scan_source(source).kind


def declared_work(module) -> tuple[bool, list[int] | None, bool]:
    """(backward is part of the work, inputs whose gradients count, get_grad_outputs defined)."""
    custom = callable(getattr(module, "get_grad_outputs", None))
    backward = bool(getattr(module, "KW_BACKWARD", False)) or custom
    chosen = getattr(module, "KW_GRAD_INPUTS", None)
    grad_inputs = None if chosen is None else sorted({int(i) for i in chosen})
    return backward, grad_inputs, custom


def describe_reference(problem) -> ReferenceInfo:
    """ReferenceInfo of a loaded Problem: the source scan, with its declarations as the module
    holds them (nothing is run)."""
    info = scan_source(problem.source)
    info.backward, info.grad_inputs, info.custom_grad_outputs = declared_work(problem.module)
    return info


class TritonLaunchRecorder:
    """Counts Triton kernel launches (compiled or interpreted) by kernel name while active.

    Launches go through `JITFunction.run` (and `InterpretedFunction.run` under TRITON_INTERPRET);
    both are wrapped at class level for the duration and put back on exit. Without triton it
    records nothing.
    """

    def __init__(self):
        self.counts: Counter[str] = Counter()
        self._saved: list[tuple[type, Any]] = []

    def __enter__(self) -> "TritonLaunchRecorder":
        for cls in launch_classes():
            original = cls.__dict__.get("run")
            if original is None:
                continue
            self._saved.append((cls, original))
            cls.run = self._counting(original)
        return self

    def __exit__(self, *exc) -> None:
        for cls, original in reversed(self._saved):
            cls.run = original
        self._saved.clear()

    def _counting(self, original):
        counts = self.counts

        def run(kernel, *args, **kwargs):
            if not kwargs.get("warmup"):
                fn = getattr(kernel, "fn", None)
                counts[getattr(fn, "__name__", None) or type(kernel).__name__] += 1
            return original(kernel, *args, **kwargs)

        return run


def launch_classes() -> list[type]:
    classes = []
    try:
        from triton.runtime.jit import JITFunction  # noqa: PLC0415 -- triton may be missing or broken (CUDA-less installs): then there is nothing to record

        classes.append(JITFunction)
    except Exception:  # noqa: BLE001 - no (working) triton: nothing to record
        return classes
    try:
        from triton.runtime.interpreter import InterpretedFunction  # noqa: PLC0415 -- an older triton has no interpreter class

        classes.append(InterpretedFunction)
    except Exception:  # noqa: BLE001 - older triton without the interpreter class
        pass
    return classes
