"""A small, safe evaluator for metric formulas, over Python's `ast` (never `eval`).

`parse` reads Intel's language: numbers, names, ``+ - * /``, parentheses, ``min(...)``,
``max(...)``, ``X if COND else Y``, comparisons (``< <= > >= == !=``) and, in thresholds, ``&``
and ``|``. Anything else (attribute access, calls of other functions, subscripts, strings) is a
`FormulaError` naming the formula. perf's language (`autoprof.metrics.perfexpr`) builds its own
trees for the same evaluator, which also knows perf's ``%``, its integer ``| ^ &`` and
``d_ratio``. Values may be numbers or numpy arrays (one value per interval): every operation is
element-wise, a division by zero gives inf or NaN, not an error.
"""

from __future__ import annotations

import ast
import functools
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from autoprof.errors import AutoprofError


class FormulaError(AutoprofError):
    """A formula that does not parse, or names a value that is not given."""


_BINARY_NODES = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_COMPARE_NODES = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
_BOOLEAN_NODES = (ast.And, ast.Or)
_FUNCTION_NAMES = ("min", "max")


@dataclass(frozen=True)
class _Operations:
    binary: dict[type[ast.operator], Callable[..., Any]]
    compare: dict[type[ast.cmpop], Callable[..., Any]]
    boolean: dict[type[ast.boolop], Callable[..., Any]]
    functions: dict[str, Callable[..., Any]]


@functools.cache
def _operations() -> _Operations:
    """numpy's function for each operator, imported at the first evaluation: planning parses
    formulas and evaluates none, and numpy was 0.14 s of every `autoprof profile`'s start."""
    import numpy as np

    def integer(op: Callable[..., Any]) -> Callable[..., Any]:
        """perf's ``(long)a OP (long)b`` (expr.y), NaN when either side is NaN."""

        def apply(left, right):
            left, right = np.asarray(left, np.float64), np.asarray(right, np.float64)
            valid = np.isfinite(left) & np.isfinite(right)
            a = np.where(valid, left, 0).astype(np.int64)
            b = np.where(valid, right, 0).astype(np.int64)
            return np.where(valid, op(a, b), np.nan)

        return apply

    def modulo(left, right):
        """perf's ``(long)a % (long)b``: C's remainder, with the sign of the dividend."""
        return np.fmod(np.trunc(left), np.trunc(right))

    def d_ratio(left, right):
        """perf's ``d_ratio(a, b)``: a / b, and 0 when b is 0 (expr.y)."""
        right = np.asarray(right, np.float64)
        return np.where(right == 0, 0.0, np.divide(left, np.where(right == 0, 1.0, right)))

    compare = (np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal)
    return _Operations(
        binary={
            ast.Add: operator.add,
            ast.Sub: operator.sub,
            ast.Mult: operator.mul,
            ast.Div: np.divide,
            # perf's operators and function (only perfexpr builds trees holding them)
            ast.Mod: modulo,
            ast.BitOr: integer(np.bitwise_or),
            ast.BitAnd: integer(np.bitwise_and),
            ast.BitXor: integer(np.bitwise_xor),
        },
        compare=dict(zip(_COMPARE_NODES, compare, strict=True)),
        boolean={ast.And: np.logical_and, ast.Or: np.logical_or},
        functions={"min": np.minimum, "max": np.maximum, "d_ratio": d_ratio},
    )


_ALLOWED = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.USub,
    ast.UAdd,
    ast.Compare,
    ast.BoolOp,
    ast.IfExp,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Constant,
    *_BINARY_NODES,
    *_COMPARE_NODES,
    *_BOOLEAN_NODES,
)


@dataclass(frozen=True)
class Formula:
    """A parsed formula: its text, its syntax tree and the names it reads."""

    text: str
    tree: ast.Expression
    names: frozenset[str]  # the names it reads (not min/max)

    def needed(self, known: Mapping[str, float]) -> frozenset[str]:
        """The names evaluation reads when the `known` names (constants) have these values:
        a condition made of constants only picks one branch, so ``(b / 2) if smt_on else c``
        needs c alone with SMT off."""
        return frozenset(_needed(self.tree.body, known))

    def __call__(self, values: Mapping[str, object]):
        return evaluate(self, values)


ONE_UNIT = "__one_unit"  # suffix of a name read on one unit (``a[0]``)
_FIRST_UNIT = re.compile(r"\b([A-Za-z_]\w*)\[0\]")
NA = "NA"  # Intel's ``#NA``: a value that does not exist (NaN)
_SPACED_OPERATOR = re.compile(r"([<>!=])\s+=")


def parse(text: str, what: str = "formula") -> Formula:
    """Parse a formula, checking that it uses only the allowed constructs."""
    source = _SPACED_OPERATOR.sub(r"\1=", str(text).strip())  # Intel writes `> =` at times
    source = source.replace("#NA", NA)  # "not available" (a branch never taken)
    source = _FIRST_UNIT.sub(r"\1" + ONE_UNIT, source)  # a[0]: event a on its first unit
    # `&` and `|` join comparisons (``a > 10 & b > 15``): Python's `and`/`or` have that
    # precedence, its `&`/`|` would bind tighter than `>`
    source = source.replace("&&", "&").replace("||", "|")  # GRR writes C's operators
    source = source.replace("&", " and ").replace("|", " or ")
    if not source:
        raise FormulaError(f"empty {what}")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as err:
        raise FormulaError(f"{what} {text!r} does not parse: {err.msg}") from None
    nodes = list(ast.walk(tree))  # walked once: a metric set parses hundreds of formulas
    for node in nodes:
        if not isinstance(node, _ALLOWED):
            raise FormulaError(f"{what} {text!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            raise FormulaError(f"{what} {text!r}: constant {node.value!r} is not a number")
        if isinstance(node, ast.Call) and (
            not isinstance(node.func, ast.Name)
            or node.func.id not in _FUNCTION_NAMES
            or node.keywords
            or len(node.args) < 2
        ):
            raise FormulaError(f"{what} {text!r}: only min(a, b, ...) and max(a, b, ...) calls")
    functions = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    names = frozenset(
        n.id for n in nodes if isinstance(n, ast.Name) and n.id != NA and id(n) not in functions
    )
    return Formula(str(text), tree, names)


def evaluate(formula: Formula, values: Mapping[str, object]):
    """The formula's value (a float, or an array for array inputs; NaN for 0/0)."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        result = _eval(formula.tree.body, values, formula.text)
    return result.item() if isinstance(result, np.ndarray) and result.ndim == 0 else result


def _eval(node: ast.AST, values: Mapping[str, object], text: str):
    import numpy as np

    ops = _operations()
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return np.float64(node.value)
    if isinstance(node, ast.Name):
        if node.id == NA:
            return np.float64(np.nan)
        if node.id not in values:
            raise FormulaError(f"formula {text!r}: no value for {node.id!r}")
        return np.asarray(values[node.id], dtype=np.float64)
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, values, text)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, values, text)
        right = _eval(node.right, values, text)
        return np.asarray(ops.binary[type(node.op)](left, right), dtype=np.float64)
    if isinstance(node, ast.Compare):
        result, left = None, _eval(node.left, values, text)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, values, text)
            step = ops.compare[type(op)](left, right)
            result = step if result is None else np.logical_and(result, step)
            left = right
        return np.asarray(result, dtype=np.float64)
    if isinstance(node, ast.BoolOp):
        result = _eval(node.values[0], values, text)
        for operand in node.values[1:]:
            result = ops.boolean[type(node.op)](result, _eval(operand, values, text))
        return np.asarray(result, dtype=np.float64)
    if isinstance(node, ast.IfExp):
        test = _eval(node.test, values, text)
        if test.ndim == 0:  # a constant condition: only the branch taken is evaluated
            return _eval(node.body if test else node.orelse, values, text)
        body = _eval(node.body, values, text)
        orelse = _eval(node.orelse, values, text)
        return np.where(test != 0, body, orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [_eval(a, values, text) for a in node.args]
        function = ops.functions[node.func.id]
        if node.func.id not in _FUNCTION_NAMES:  # perf's d_ratio(a, b)
            return np.asarray(function(*args), dtype=np.float64)
        result = args[0]
        for arg in args[1:]:
            result = function(result, arg)
        return result
    raise FormulaError(f"formula {text!r}: cannot evaluate {type(node).__name__}")


def _needed(node: ast.AST, known: Mapping[str, float]) -> set[str]:
    if isinstance(node, ast.IfExp):
        test_names = _needed(node.test, known)
        if test_names <= set(known):
            import numpy as np

            with np.errstate(all="ignore"):
                taken = _eval(node.test, known, "")
            if taken.ndim == 0:
                return _needed(node.body if taken else node.orelse, known)
        return test_names | _needed(node.body, known) | _needed(node.orelse, known)
    if isinstance(node, ast.Name):
        return set() if node.id == NA else {node.id}
    names: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(node, ast.Call) and child is node.func:
            continue
        names |= _needed(child, known)
    return names
