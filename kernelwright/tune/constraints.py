"""Template constraints: small arithmetic/boolean expressions, checked without `eval`.

A template (possibly written by an LLM) declares constraints as strings such as
``"BLOCK_M * BLOCK_K * 2 * num_stages <= SMEM"``. They are parsed with `ast` and only a white list
of nodes is accepted (numbers, names, arithmetic, comparisons, and/or/not, if-else, a few pure
functions), so a constraint can never run code. A false constraint explains itself with the
values of both sides, which is what the prune report shows.
"""
from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

from .hardware import LIMIT_NAMES


class ConstraintError(ValueError):
    """A constraint string that is not a valid constraint (syntax, forbidden construct, unknown name)."""


def _next_pow2(x: float) -> int:
    x = int(math.ceil(x))
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def _is_pow2(x: float) -> bool:
    return isinstance(x, int) and x > 0 and (x & (x - 1)) == 0


def _cdiv(a: float, b: float) -> int:
    return -(-int(a) // int(b))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "cdiv": _cdiv,
    "next_pow2": _next_pow2,
    "is_pow2": _is_pow2,
    "log2": math.log2,
    "ceil": math.ceil,
    "floor": math.floor,
}

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_CMP_TEXT = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
             ast.In: "in", ast.NotIn: "not in"}
_MAX_EXPONENT = 64
_MEMO_SIZE = 100_000
_MISSING = object()


@dataclass(frozen=True)
class Constraint:
    """One parsed constraint; `text` is what the template declared."""

    text: str
    tree: ast.Expression
    names: frozenset[str]
    # results by the values of `names`: a space of thousands of configurations repeats few of them
    _memo: dict = field(default_factory=dict, compare=False, repr=False)

    def check(self, env: dict[str, Any]) -> tuple[bool, str]:
        """(holds, explanation). The explanation names the failing comparison with its values."""
        try:
            key = tuple(env.get(name, _MISSING) for name in self.names)  # a frozenset iterates in one order
            found = self._memo.get(key)
        except TypeError:  # an unhashable value: evaluate without the memo
            key, found = None, None
        if found is None:
            found = self._check(env)
            if key is not None and len(self._memo) < _MEMO_SIZE:
                self._memo[key] = found
        return found

    def _check(self, env: dict[str, Any]) -> tuple[bool, str]:
        try:
            value = _eval(self.tree.body, env)
        except (ArithmeticError, TypeError, ValueError) as exc:
            return False, f"constraint {self.text!r} cannot be evaluated: {exc}"
        if value:
            return True, ""
        return False, f"{self.text} is false ({_explain(self.tree.body, env)})"


def parse_constraint(text: str, known_names: set[str] | None = None) -> Constraint:
    """Parse and validate `text`; `known_names` (params, sizes, limits) catches typos early."""
    if not isinstance(text, str) or not text.strip():
        raise ConstraintError(f"a constraint must be a non-empty string, got {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConstraintError(f"constraint {text!r} is not a valid expression: {exc.msg}") from None
    names = set()
    for node in ast.walk(tree):
        _validate_node(node, text)
        if isinstance(node, ast.Name) and not _is_function_name(tree, node):
            names.add(node.id)
    if known_names is not None:
        unknown = names - set(known_names)
        if unknown:
            raise ConstraintError(
                f"constraint {text!r} uses unknown name(s) {', '.join(sorted(unknown))}; it may use the "
                f"parameters, the template's sizes, hardware limits ({', '.join(sorted(_hardware_names()))}) "
                f"and the functions {', '.join(FUNCTIONS)}"
            )
    return Constraint(text=text.strip(), tree=tree, names=frozenset(names))


def _hardware_names() -> set[str]:
    return set(LIMIT_NAMES)


def _is_function_name(tree: ast.AST, name: ast.Name) -> bool:
    return any(isinstance(n, ast.Call) and n.func is name for n in ast.walk(tree))


_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.BinOp,
    ast.Compare, ast.IfExp, ast.Call, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List,
    *_BINOPS, *_CMPOPS,
)


def _validate_node(node: ast.AST, text: str) -> None:
    if not isinstance(node, _ALLOWED):
        raise ConstraintError(f"constraint {text!r} uses {type(node).__name__}, which is not allowed "
                              "(only arithmetic, comparisons, and/or/not, if-else and simple functions)")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ConstraintError(f"constraint {text!r} calls something other than {', '.join(FUNCTIONS)}")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise ConstraintError(f"constraint {text!r}: functions take plain positional arguments only")
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool)):
        raise ConstraintError(f"constraint {text!r} holds a constant of type {type(node.value).__name__}")


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ValueError(f"name {node.id!r} has no value")
        return env[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval(e, env) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env)
        return {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos}[type(node.op)](value)
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponent {right} is larger than {_MAX_EXPONENT}")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, env) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=False):
            right = _eval(comparator, env)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _eval(node.test, env) else _eval(node.orelse, env)
    if isinstance(node, ast.Call):
        return FUNCTIONS[node.func.id](*(_eval(a, env) for a in node.args))
    raise ValueError(f"unsupported expression node {type(node).__name__}")


def _explain(node: ast.AST, env: dict[str, Any]) -> str:
    """The failing part with values: 'BLOCK_M * BLOCK_K * 2 * num_stages = 262144 > SMEM = 232448'."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        for value in node.values:
            if not _eval(value, env):
                return _explain(value, env)
    if isinstance(node, ast.BoolOp):  # every alternative is false: the last says most (a `when` condition)
        return _explain(node.values[-1], env)
    if isinstance(node, ast.Compare):
        left_node = node.left
        for op, right_node in zip(node.ops, node.comparators, strict=False):
            left, right = _eval(left_node, env), _eval(right_node, env)
            if not _CMPOPS[type(op)](left, right):
                return f"{_side(left_node, left)} {_CMP_TEXT[type(op)]} {_side(right_node, right)} does not hold"
            left_node = right_node
    return "evaluates to false"


def _side(node: ast.AST, value: Any) -> str:
    text = ast.unparse(node)
    return text if isinstance(node, ast.Constant) else f"{text} = {value!r}"
