"""Cheap static checks of a candidate module before it costs a judge run.

Errors make an answer unusable (no ModelNew, no kernel for the backend); warnings point at things
the judge may reject (a PyTorch compute op inside forward, which the rule sets count as torch
work, a side stream, an in-place write to an input). The checks read the AST only: they are hints for the model, while the judge's
dispatch-level op recording stays the authority.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelwright.problem.pysource import dotted_name, import_aliases, imported_modules, qualified

# torch functions that do the reference's heavy lifting; calling them in forward hands work back
_TORCH_COMPUTE = frozenset(
    "matmul mm bmm addmm baddbmm einsum linear conv1d conv2d conv3d conv_transpose1d conv_transpose2d "
    "conv_transpose3d softmax log_softmax layer_norm batch_norm group_norm instance_norm rms_norm "
    "scaled_dot_product_attention max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d "
    "adaptive_avg_pool2d adaptive_max_pool2d sum mean amax amin argmax argmin prod cumsum logsumexp "
    "var std norm relu gelu silu sigmoid tanh exp log lstm gru".split()
)
_NN_LAYER_PREFIXES = ("Conv", "Linear", "BatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "MaxPool",
                      "AvgPool", "AdaptiveAvgPool", "AdaptiveMaxPool", "LSTM", "GRU", "RNN", "Softmax",
                      "MultiheadAttention", "Embedding", "Bilinear")


@dataclass
class CodeCheck:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def check_candidate(source: str, backend: str) -> CodeCheck:
    """Errors and warnings for a candidate module written for `backend` ("triton" or "cuda")."""
    result = CodeCheck()
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        result.errors.append(f"the code has a syntax error at line {exc.lineno}: {exc.msg}")
        return result
    except ValueError as exc:
        result.errors.append(f"the code cannot be parsed: {exc}")
        return result
    model = _top_level_class(tree, "ModelNew")
    if model is None:
        result.errors.append("the module does not define `class ModelNew` at top level")
    elif _method(model, "forward") is None:
        result.errors.append(f"`ModelNew` (line {model.lineno}) has no `forward` method")
    _check_backend(tree, backend, result)
    if model is not None:
        _check_forward(model, import_aliases(tree), result)
    return result


def _top_level_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)


def _check_backend(tree: ast.Module, backend: str, result: CodeCheck) -> None:
    modules, aliases = imported_modules(tree), import_aliases(tree)
    if backend == "triton":
        if not any(m == "triton" or m.startswith("triton.") for m in modules):
            result.errors.append("the triton backend needs `import triton` (and `triton.language as tl`)")
        if not _has_triton_kernel(tree, aliases):
            result.errors.append("no `@triton.jit` kernel found: the work of forward must run in a Triton kernel")
    elif backend == "cuda":
        calls = {qualified(dotted_name(n.func), aliases) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        if "torch.utils.cpp_extension.load_inline" not in calls:
            result.errors.append("the cuda backend compiles its kernels with "
                                 "`torch.utils.cpp_extension.load_inline(...)`; no such call was found")
        if "__global__" not in ast.unparse(tree):
            result.warnings.append("no `__global__` kernel found in the CUDA sources")


def _has_triton_kernel(tree: ast.Module, aliases: dict[str, str]) -> bool:
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if qualified(dotted_name(target), aliases) in ("triton.jit", "triton.runtime.jit.jit"):
                return True
    return False


def _check_forward(model: ast.ClassDef, aliases: dict[str, str], result: CodeCheck) -> None:
    forward = _method(model, "forward")
    if forward is None:
        return
    layers = _nn_layer_attributes(model)
    params = {a.arg for a in forward.args.args[1:]}
    for node in ast.walk(forward):
        message = _forward_issue(node, aliases, layers, params)
        if message and message not in result.warnings:
            result.warnings.append(message)


def _forward_issue(node: ast.AST, aliases: dict[str, str], layers: set[str], params: set[str]) -> str | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return f"line {node.lineno}: `@` in forward runs a PyTorch matmul; do the product in your kernel"
    if not isinstance(node, ast.Call):
        return None
    written = dotted_name(node.func)
    full = qualified(written, aliases).split(".")
    parts = written.split(".")
    if len(full) >= 2 and full[0] == "torch" and full[-1] in _TORCH_COMPUTE:
        return (f"line {node.lineno}: `{written}(...)` in forward is a PyTorch compute op: the judge counts it "
                "as torch work (some rule sets reject any; all reject a forward that hands back all of it)")
    if len(parts) == 2 and parts[0] == "self" and parts[1] in layers:
        return (f"line {node.lineno}: `{written}(...)` runs an nn layer in forward; pass its parameters "
                f"(`{written}.weight`, `{written}.bias`) to your own kernel instead")
    if "Stream" in parts[-1] and "cuda" in full:
        return f"line {node.lineno}: `{written}` creates a side stream; launch on the current stream"
    if len(parts) == 2 and parts[0] in params and parts[1].endswith("_") and not parts[1].startswith("_"):
        return f"line {node.lineno}: `{written}(...)` writes into an input in place; inputs must stay unchanged"
    return None


def _nn_layer_attributes(model: ast.ClassDef) -> set[str]:
    """`self.x` attributes assigned an nn compute layer (nn.Conv2d, nn.Linear, ...) anywhere in the class."""
    layers = set()
    for node in ast.walk(model):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        callee = dotted_name(node.value.func).split(".")[-1]
        if not callee.startswith(_NN_LAYER_PREFIXES):
            continue
        for target in node.targets:
            if isinstance(target, ast.Attribute) and dotted_name(target.value) == "self":
                layers.add(target.attr)
    return layers
