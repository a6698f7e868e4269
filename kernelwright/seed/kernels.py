"""Inductor's Triton kernels as plain `@triton.jit` source: its autotuning decorator and its imports
dropped, the helpers it calls from `torch._inductor.runtime.triton_helpers` copied beside them
(renamed `triton_helpers_NAME`), and one launcher per kernel with the grid and configuration fixed.

Anything else a kernel's module holds (a name the seed cannot provide, a decorator other than
inductor's heuristics) is a `SeedError` naming it: a seed is never written half translated.
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
from dataclasses import dataclass

from ..problem.pysource import attribute_chain
from .types import Kernel, SeedError

# inductor's decorators whose kernels take (args..., block sizes as constexpr keywords) and a grid
HEURISTICS = {"pointwise", "reduction", "persistent_reduction", "template", "split_scan", "cooperative_reduction"}
# what a kernel's module imports and the seed file provides under the same names
PROVIDED = {"tl", "triton", "libdevice", "tl_math"}
HELPER_PREFIX = "triton_helpers_"
_HELPER_CALL = re.compile(r"\btriton_helpers\.(\w+)")


@dataclass(frozen=True)
class KernelCode:
    name: str
    text: str  # `@triton.jit def ...` (and any jit functions its module defines), helpers renamed
    helpers: frozenset[str]  # names in triton_helpers it calls
    params: tuple[str, ...]  # the launcher's parameters: the kernel's, less the configuration's constexprs


def heuristic_of(name: str, source: str) -> str:
    """`pointwise`, `reduction`, ...: the `triton_heuristics.X(...)` decorator of kernel `name`."""
    fn = _kernel_def(name, _parse(name, source))
    for deco in fn.decorator_list:
        chain = attribute_chain(deco.func if isinstance(deco, ast.Call) else deco)
        if chain.startswith("triton_heuristics."):
            kind = chain.split(".", 1)[1]
            if kind not in HEURISTICS:
                raise SeedError(f"kernel {name} is launched through inductor's {kind!r} heuristic, which the seed "
                                f"does not translate (it handles {', '.join(sorted(HEURISTICS))})")
            return kind
    raise SeedError(f"kernel {name} has no inductor heuristic decorator (a user-defined Triton kernel?); the seed "
                    "translates inductor's own kernels only")


def kernel_code(kernel: Kernel) -> KernelCode:
    """The kernel's module as seed source: its jit functions, decorators and imports dropped."""
    tree = _parse(kernel.name, kernel.source)
    defs = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    for node in tree.body:
        if not (isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef)) or _is_driver_call(node)):
            raise SeedError(f"kernel {kernel.name}'s module holds a statement the seed does not translate "
                            f"(line {node.lineno}: {ast.unparse(node)[:80]})")
    local = {d.name for d in defs}
    helpers: set[str] = set()
    texts = []
    for fn in defs:
        helpers |= _check_names(kernel.name, fn, local)
        segment = ast.get_source_segment(kernel.source, fn)
        texts.append("@triton.jit\n" + _HELPER_CALL.sub(HELPER_PREFIX + r"\1", segment))
    main = _kernel_def(kernel.name, tree)
    params = tuple(a.arg for a in main.args.args if a.arg not in kernel.config.kwargs)
    return KernelCode(kernel.name, "\n\n\n".join(texts), frozenset(helpers), params)


def launcher_source(kernel: Kernel, code: KernelCode) -> str:
    """`def launch_NAME(args)`: the kernel launched on its grid with its fixed configuration."""
    cfg = kernel.config
    options = [f"{k}={v!r}" for k, v in cfg.kwargs.items()] + [f"num_warps={cfg.num_warps}",
                                                              f"num_stages={cfg.num_stages}"]
    args = ", ".join(code.params)
    body = [f"    {line}" for line in kernel.grid_prefix]
    body.append(f"    {kernel.name}[({', '.join(kernel.grid)})]({args}{', ' if args else ''}{', '.join(options)})")
    where = "autotuned by inductor" if cfg.tuned else "inductor's first configuration"
    params = ", ".join(code.params + kernel.grid_args)  # the grid's own arguments come last (FixedGrid)
    return f"def launch_{kernel.name}({params}):\n    \"\"\"{where}\"\"\"\n" + "\n".join(body) + "\n"


def helpers_source(names: set[str] | frozenset[str]) -> str:
    """The triton_helpers functions `names` call (and those they call), renamed `triton_helpers_NAME`."""
    defs, consts, module = _helper_module()
    needed: list[str] = []
    queue = sorted(names)
    while queue:
        name = queue.pop()
        if name in needed:
            continue
        if name not in defs and name not in consts:
            raise SeedError(f"a kernel calls triton_helpers.{name}, which the seed cannot copy")
        needed.append(name)
        if name in defs:
            queue += sorted(_helper_refs(name, defs[name], defs, consts))
    out = []
    for name in sorted(n for n in needed if n in consts):
        value = getattr(module, name)
        literal = f"tl.constexpr({value.value!r})" if hasattr(value, "value") else repr(value)
        out.append(f"{HELPER_PREFIX}{name} = {literal}")
    for name in [n for n in defs if n in needed]:  # the module's order
        out.append(ast.unparse(_Rename(set(defs) | set(consts)).visit(_copy(defs[name]))))
    return "\n\n\n".join(out)


# ---------------------------------------------------------------------------------------------- details

def _parse(name: str, source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise SeedError(f"kernel {name}'s source does not parse: {exc}") from exc


def _kernel_def(name: str, tree: ast.Module) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise SeedError(f"kernel {name}'s module defines no function of that name")


def _is_driver_call(node: ast.stmt) -> bool:
    """`triton_helpers.set_driver_to_gpu()`: picks Triton's driver in inductor's process; not needed."""
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and attribute_chain(node.value.func).startswith("triton_helpers.set_driver_to_"))


def _bound(fn: ast.FunctionDef) -> set[str]:
    names = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def _check_names(kernel: str, fn: ast.FunctionDef, local: set[str]) -> set[str]:
    """The triton_helpers names `fn` calls; a SeedError for any other name the seed cannot provide."""
    helpers = set()
    nodes = [n for part in [fn.args, *fn.body] for n in ast.walk(part)]  # not its decorators (dropped)
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "triton_helpers":
            helpers.add(node.attr)
    known = _bound(fn) | local | PROVIDED | {"triton_helpers"} | set(dir(builtins))
    unknown = sorted({n.id for n in nodes if isinstance(n, ast.Name) and n.id not in known})
    if unknown:
        raise SeedError(f"kernel {kernel} uses {', '.join(unknown)}, which the seed file cannot provide")
    return helpers


@functools.lru_cache(maxsize=1)
def _helper_module():
    from torch._inductor.runtime import triton_helpers  # noqa: PLC0415 -- torch._inductor / torch._dynamo only while a seed is written (docs/architecture.md, seed/)

    tree = ast.parse(inspect.getsource(triton_helpers))
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    consts = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        consts |= {t.id for t in targets if isinstance(t, ast.Name)}
    return defs, consts, triton_helpers


def _helper_refs(name: str, fn: ast.FunctionDef, defs: dict, consts: set[str]) -> set[str]:
    if [attribute_chain(d) for d in fn.decorator_list] != ["triton.jit"]:
        raise SeedError(f"triton_helpers.{name} is not a plain @triton.jit function; the seed cannot copy it")
    known = _bound(fn) | PROVIDED | {"math"} | set(dir(builtins))
    refs = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in defs or node.id in consts:
                refs.add(node.id)
            elif node.id not in known:
                raise SeedError(f"triton_helpers.{name} uses {node.id}, which the seed file cannot provide")
    return refs - {name}


def _copy(node: ast.FunctionDef) -> ast.FunctionDef:
    return ast.parse(ast.unparse(node)).body[0]


class _Rename(ast.NodeTransformer):
    """Helper names -> triton_helpers_NAME; `math` (triton_helpers' alias of tl.math) -> tl_math."""

    def __init__(self, names: set[str]):
        self.names = names

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:  # noqa: N802 - ast's name
        node.name = HELPER_PREFIX + node.name
        self.generic_visit(node)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        if node.arg in self.names:
            node.arg = HELPER_PREFIX + node.arg
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:  # noqa: N802 - ast's name
        if node.id in self.names:
            node.id = HELPER_PREFIX + node.id
        elif node.id == "math":
            node.id = "tl_math"
        return node


# Triton's interpreter (a CPU) runs no libdevice call: these tl expressions stand in for the libdevice
# functions inductor's kernels use, there only (on a GPU the file calls libdevice). A function
# missing here makes a seed written on a CPU a SeedError naming it.
INTERPRETED_LIBDEVICE = {
    "erf": "tl.math.erf(x)", "exp": "tl.exp(x)", "exp2": "tl.exp2(x)", "log": "tl.log(x)", "log2": "tl.log2(x)",
    "sqrt": "tl.sqrt(x)", "rsqrt": "tl.rsqrt(x)", "sin": "tl.sin(x)", "cos": "tl.cos(x)", "abs": "tl.abs(x)",
    "floor": "tl.floor(x)", "ceil": "tl.ceil(x)", "isnan": "x != x", "isinf": "tl.abs(x) == float('inf')",
    "tanh": "1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)",
    # log(1 + x) scaled by x / ((1 + x) - 1) keeps the digits 1 + x rounds away (Goldberg's trick)
    "log1p": "tl.where(1.0 + x == 1.0, x, tl.log(1.0 + x) * (x / ((1.0 + x) - 1.0)))",
    "expm1": "tl.where(tl.abs(x) < 1e-5, x + 0.5 * x * x, tl.exp(x) - 1.0)",
}
_LIBDEVICE_CALL = re.compile(r"\blibdevice\.(\w+)")


def libdevice_names(*texts: str) -> set[str]:
    """The libdevice functions the texts call."""
    return {m for text in texts for m in _LIBDEVICE_CALL.findall(text)}


def interpreted_libdevice_source(names: set[str]) -> str:
    """jit functions for `names` and the `libdevice` namespace the interpreter uses instead."""
    missing = sorted(names - set(INTERPRETED_LIBDEVICE))
    if missing:
        raise SeedError(f"the kernels call libdevice.{', libdevice.'.join(missing)}, which Triton's interpreter cannot "
                        "run and the seed has no CPU stand-in for: write the seed on a GPU")
    defs = [f"@triton.jit\ndef interpreted_libdevice_{n}(x):\n    return {INTERPRETED_LIBDEVICE[n]}"
            for n in sorted(names)]
    binding = ", ".join(f"{n}=interpreted_libdevice_{n}" for n in sorted(names))
    return "\n\n\n".join(defs) + (
        "\n\n\nif os.environ.get(\"TRITON_INTERPRET\") == \"1\":  # Triton's interpreter runs no libdevice call\n"
        f"    libdevice = types.SimpleNamespace({binding})\n")
