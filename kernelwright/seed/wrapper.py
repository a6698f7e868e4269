"""Inductor's wrapper module rewritten as plain Python: its `call(args)` becomes `seed_call(args)`,
with every construct it uses replaced by one the seed file defines or by the torch op it stands for.

    buf0 = empty_strided_cuda(size, stride, dtype)  ->  buf0 = alloc(size, stride, dtype, seed_device)
    triton_poi_fused_0.run(a, b, n, stream=stream0) ->  launch_triton_poi_fused_0(a, b, n)
    extern_kernels.addmm(bias, x, w, out=buf0)      ->  torch.addmm(bias, x, w, out=buf0)
    with torch.cuda._DeviceGuard(0): ...            ->  its body (the inputs' device is used)
    stream0 = get_raw_stream(0), args.clear()       ->  dropped

The allocations follow the device of the call's first argument, so a seed written on a CPU runs on
a GPU (and the reverse) with the same code. A name the rewrite does not know is a `SeedError` naming
it, never a file that fails when run.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from dataclasses import dataclass, field

import torch

from ..problem.pysource import attribute_chain
from .types import SeedError

ALLOCATORS = {"empty_strided_cpu", "empty_strided_cuda", "empty_strided_xpu", "empty_strided_mtia",
              "empty_strided_cpu_pinned", "empty_strided"}
# what the seed file defines for the rewritten call (seed/render.py writes them)
PROVIDED = {"torch", "aten", "math", "inf", "nan", "alloc", "reinterpret_tensor", "assert_size_stride",
            "assert_alignment", "device", "args"}
# torch calls that only allocate or view: free under every rule set
FREE_TORCH = {"torch.empty", "torch.empty_strided", "torch.as_strided", "aten.view", "aten.as_strided",
              "aten.reshape", "aten._reinterpret_tensor", "aten.empty", "aten.empty_strided", "aten.copy_"}


@dataclass
class CallCode:
    text: str  # `def seed_call(args): ...`
    outputs: int  # how many tensors it returns
    torch_calls: list[str] = field(default_factory=list)  # torch ops it still calls, in order (may repeat)
    extern_helpers: dict[str, str] = field(default_factory=dict)  # name -> source of copied extern functions
    inputs: int | None = None  # how many arguments it unpacks from `args` (None: not a plain unpack)


def kernel_sources(wrapper: str) -> dict[str, str]:
    """Each `NAME = async_compile.triton('NAME', '''source''', ...)` of the wrapper; any other kind of
    kernel (C++, CUDA, a multi-kernel) is a SeedError naming it."""
    found = {}
    for node in _parse(wrapper).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        chain = attribute_chain(node.value.func)
        if not chain.startswith("async_compile."):
            continue
        name = node.targets[0].id if isinstance(node.targets[0], ast.Name) else "?"
        kind = chain.split(".", 1)[1]
        if kind != "triton":
            raise SeedError(f"inductor wrote {name} as a {kind!r} kernel; the seed translates Triton kernels only "
                            "(on a CPU it asks inductor for Triton with cpu_backend='triton')")
        source = node.value.args[1]
        if not (isinstance(source, ast.Constant) and isinstance(source.value, str)):
            raise SeedError(f"kernel {name}: its source is not a string literal in inductor's wrapper")
        found[name] = source.value
    return found


def rewrite_call(wrapper: str, kernels: set[str]) -> CallCode:
    """The wrapper's `call(args)` as `seed_call(args)`, checked for names the seed cannot provide."""
    fn = _call_def(_parse(wrapper))
    rewriter = _Rewriter(kernels)
    body = rewriter.statements(fn.body)
    body.insert(0, ast.parse("seed_device = args[0].device if args else torch.device('cpu')").body[0])
    out = ast.FunctionDef(name="seed_call", args=ast.arguments(posonlyargs=[], args=[ast.arg("args")], kwonlyargs=[],
                                                                kw_defaults=[], defaults=[]),
                          body=body, decorator_list=[], returns=None, type_params=[])
    ast.fix_missing_locations(out)
    _check_names(out, kernels, set(rewriter.extern_helpers))
    returns = [n for n in ast.walk(out) if isinstance(n, ast.Return)]
    if len(returns) != 1 or not isinstance(returns[0].value, (ast.Tuple, ast.List)):
        raise SeedError("inductor's call does not end in one `return (outputs...)`; the seed cannot read its outputs")
    return CallCode(ast.unparse(out), len(returns[0].value.elts), rewriter.torch_calls, rewriter.extern_helpers,
                    _arguments(fn))


# ---------------------------------------------------------------------------------------------- details

def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise SeedError(f"inductor's wrapper does not parse: {exc}") from exc


def _call_def(tree: ast.Module) -> ast.FunctionDef:
    """`def call(args)` at module level, or `Runner.call(self, args)` (torch >= 2.8)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
        if isinstance(node, ast.ClassDef) and node.name == "Runner":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
    raise SeedError("inductor's wrapper defines no call(args) function")


def _arguments(fn: ast.FunctionDef) -> int | None:
    """`arg0_1, arg1_1 = args` -> 2."""
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id == "args":
            target = stmt.targets[0]
            return len(target.elts) if isinstance(target, (ast.Tuple, ast.List)) else None
    return None


class _Rewriter:
    def __init__(self, kernels: set[str]):
        self.kernels = kernels
        self.torch_calls: list[str] = []
        self.extern_helpers: dict[str, str] = {}

    def statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            out += self.statement(stmt)
        return out

    def statement(self, stmt: ast.stmt) -> list[ast.stmt]:
        if isinstance(stmt, ast.With) and all(attribute_chain(i.context_expr.func if isinstance(i.context_expr, ast.Call)
                                                               else i.context_expr) == "torch.cuda._DeviceGuard"
                                              for i in stmt.items):
            return self.statements(stmt.body)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            chain = attribute_chain(stmt.value.func)
            if chain in ("args.clear", "torch.cuda.set_device"):
                return []
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) \
                and attribute_chain(stmt.value.func) == "get_raw_stream":
            return []
        return [self.expression(stmt)]

    def expression(self, node: ast.AST) -> ast.AST:
        for child in ast.walk(node):
            if isinstance(child, ast.Call):
                self._call(child)
        return node

    def _call(self, call: ast.Call) -> None:
        chain = attribute_chain(call.func)
        if isinstance(call.func, ast.Attribute) and call.func.attr == "run" and chain.split(".")[0] in self.kernels:
            call.func = ast.Name(f"launch_{chain.split('.')[0]}", ast.Load())
            call.keywords = [k for k in call.keywords if k.arg != "stream"]
        elif chain in ALLOCATORS:
            call.func = ast.Name("alloc", ast.Load())
            call.args = call.args[:3] + [ast.Name("seed_device", ast.Load())]
            call.keywords = [k for k in call.keywords if k.arg not in ("device", "dtype")]
        elif chain.startswith("extern_kernels."):
            call.func = self._extern(chain.split(".", 1)[1])
        elif chain.startswith(("torch.", "aten.")) and not chain.startswith("torch.cuda."):
            name = chain.replace("torch.ops.aten.", "aten.")
            if ".".join(name.split(".")[:2]) not in FREE_TORCH:
                self.torch_calls.append(name.removesuffix(".default"))

    def _extern(self, name: str) -> ast.expr:
        """extern_kernels.NAME as the torch function it is, or a copy of inductor's Python helper."""
        from torch._inductor.select_algorithm import extern_kernels  # noqa: PLC0415 -- torch._inductor / torch._dynamo only while a seed is written (docs/architecture.md, seed/)

        fn = getattr(extern_kernels, name, None)
        if fn is not None and getattr(torch, name, None) is fn:
            self.torch_calls.append(f"torch.{name}")
            return ast.parse(f"torch.{name}", mode="eval").body
        if inspect.isfunction(fn):
            self.extern_helpers[f"extern_{name}"] = _copy_extern(name, fn)
            self.torch_calls.append(f"extern_kernels.{name}")
            return ast.Name(f"extern_{name}", ast.Load())
        raise SeedError(f"inductor calls extern_kernels.{name}, which is no public torch function the seed can call")


def _copy_extern(name: str, fn) -> str:
    """A Python helper of inductor (`bias_addmm`) copied as `extern_NAME`, if it uses torch only."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef) or node.decorator_list:
        raise SeedError(f"extern_kernels.{name} is not a plain function the seed can copy")
    bound = {a.arg for a in node.args.args + node.args.kwonlyargs} | {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    unknown = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - bound - {"torch"} - set(dir(builtins))
    if unknown:
        raise SeedError(f"extern_kernels.{name} uses {', '.join(sorted(unknown))}, which the seed cannot provide")
    node.name = f"extern_{name}"
    return ast.unparse(node)


def _check_names(fn: ast.FunctionDef, kernels: set[str], helpers: set[str]) -> None:
    bound = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    known = bound | PROVIDED | helpers | {f"launch_{k}" for k in kernels} | set(dir(builtins))
    unknown = sorted({n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id not in known})
    if unknown:
        raise SeedError(f"inductor's call uses {', '.join(unknown)}, which the seed does not translate")
    for node in ast.walk(fn):
        chain = attribute_chain(node) if isinstance(node, ast.Attribute) else ""
        if chain.startswith(("torch._inductor", "torch._dynamo", "torch._C._dynamo", "torch.compile")):
            raise SeedError(f"inductor's call uses {chain}, which a candidate may not call")
