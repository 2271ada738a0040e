"""perf's metric expression language (tools/perf/util/expr.l, expr.y), parsed into the same
`Formula` the Intel metrics use, so one evaluator serves every vendor.

The language, as perf's lexer and grammar define it:
- numbers (``64``, ``1e6``, ``.5``), ``NaN``, and identifiers made of ``[0-9a-zA-Z_.:@?]`` and
  the escapes ``\\-`` ``\\,`` ``\\=``; an identifier names an event or another metric, ``@``
  stands for ``/`` so ``cpu@ev\\,cmask\\=0x6@`` is the event ``cpu/ev,cmask=0x6/``;
- ``#name`` literals: values perf reads from the machine (``#slots``, ``#smt_on``,
  ``#num_cpus``, ...);
- ``d_ratio(a, b)`` (a / b, 0 when b is 0), ``min(a, b)``, ``max(a, b)``,
  ``source_count(EVENT)`` (how many counters were summed into EVENT's value),
  ``strcmp_cpuid_str(ID)`` (1 when this CPU's id matches ID, perf's mapfile rule);
- ``X if C else Y`` (C equal to 0 picks Y: NaN picks X), lowest of all;
- binary operators from loosest to tightest: ``|``, ``^``, ``&`` (on the values cast to
  integers), ``<`` ``>``, ``+`` ``-``, ``*`` ``/`` ``%``; then unary ``-``. All are
  left-associative. Note the order: unlike Python, ``a < b | c`` is ``(a < b) | c``.

`parse` returns the formula and the `Symbols` it read, each name replaced by a short alias
(``e0``, ``k1``...) so that any perf identifier is a valid name of the formula.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from autoprof.metrics.formula import NA, Formula, FormulaError

NUMBER = re.compile(r"([0-9]+\.?[0-9]*|[0-9]*\.?[0-9]+)(e-?[0-9]+)?")
SYMBOL = re.compile(r"(\\[-,=]|[0-9a-zA-Z_.:@?])+")
LITERAL = re.compile(r"#[0-9a-zA-Z_\\-]+")
KEYWORDS = {
    "max", "min", "if", "else", "d_ratio", "source_count", "has_event", "strcmp_cpuid_str", "NaN",
}  # fmt: skip
# binary operator -> (binding power, Python AST operator); all left-associative (expr.y)
BINARY: dict[str, tuple[int, ast.operator | ast.cmpop]] = {
    "|": (1, ast.BitOr()),
    "^": (2, ast.BitXor()),
    "&": (3, ast.BitAnd()),
    "<": (4, ast.Lt()),
    ">": (4, ast.Gt()),
    "+": (5, ast.Add()),
    "-": (5, ast.Sub()),
    "*": (6, ast.Mult()),
    "/": (6, ast.Div()),
    "%": (6, ast.Mod()),
}
CALLS = {"min": 2, "max": 2, "d_ratio": 2}
CPUID_TEST = "strcmp_cpuid_str"
SOURCE_COUNT = "source_count"


@dataclass
class Symbols:
    """What a parsed expression reads, by alias: `names` are identifiers (events or other
    metrics: the metric catalog tells which), `counted` the events read as
    ``source_count(...)``, `literals` the ``#`` values and `cpuid` the ``strcmp_cpuid_str``
    arguments."""

    names: dict[str, str] = field(default_factory=dict)
    counted: dict[str, str] = field(default_factory=dict)
    literals: dict[str, str] = field(default_factory=dict)
    cpuid: dict[str, str] = field(default_factory=dict)

    def alias(self, table: dict[str, str], prefix: str, value: str) -> str:
        """The alias of `value` in `table` (one of the four), a new one the first time."""
        for alias, known in table.items():
            if known == value:
                return alias
        alias = f"{prefix}{sum(map(len, (self.names, self.counted, self.literals, self.cpuid)))}"
        table[alias] = value
        return alias

    @property
    def aliases(self) -> frozenset[str]:
        return frozenset().union(self.names, self.counted, self.literals, self.cpuid)


def identifier(text: str) -> str:
    """perf's `normalize` of an identifier: ``@`` is ``/`` and a backslash escapes the next
    character (expr.l)."""
    return re.sub(r"\\(.)", r"\1", text.replace("@", "/"))


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: kind is ``num``, ``id``, ``lit``, a keyword or an operator. As in
    flex, the longest match wins and a tie goes to the earlier rule (keywords, literals,
    numbers, then identifiers)."""
    found: list[tuple[str, str]] = []
    at = 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        candidates = []
        for kind, pattern in (("lit", LITERAL), ("num", NUMBER), ("id", SYMBOL)):
            match = pattern.match(text, at)
            if match and match.end() > at:
                candidates.append((match.end() - at, kind, match.group()))
        if candidates:
            length = max(c[0] for c in candidates)
            kind, word = next((k, w) for n, k, w in candidates if n == length)
            if kind == "id" and word in KEYWORDS:
                kind = word
            found.append((kind, word))
            at += length
        elif text[at] in "|^&<>+-*/%(),":
            found.append((text[at], text[at]))
            at += 1
        else:
            raise FormulaError(f"expression {text!r}: unexpected {text[at]!r} at {at}")
    return found


class _Parser:
    """Precedence climbing over expr.y's grammar."""

    def __init__(self, text: str):
        self.text = text
        self.toks = tokens(text)
        self.at = 0
        self.symbols = Symbols()

    def peek(self) -> str | None:
        return self.toks[self.at][0] if self.at < len(self.toks) else None

    def take(self, kind: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.toks):
            raise self.error("ends early")
        tok = self.toks[self.at]
        if kind is not None and tok[0] != kind:
            raise self.error(f"expected {kind!r}, found {tok[1]!r}")
        self.at += 1
        return tok

    def error(self, what: str) -> FormulaError:
        return FormulaError(f"expression {self.text!r} does not parse: {what}")

    def if_expr(self) -> ast.expr:
        """``expr IF expr ELSE if_expr`` or ``expr``."""
        body = self.expr(0)
        if self.peek() != "if":
            return body
        self.take("if")
        test = self.expr(0)
        self.take("else")
        return ast.IfExp(test=test, body=body, orelse=self.if_expr())

    def expr(self, floor: int) -> ast.expr:
        left = self.unary()
        while (op := self.peek()) in BINARY and BINARY[op][0] > floor:
            power, node = BINARY[self.take()[0]]
            right = self.expr(power)
            if isinstance(node, ast.cmpop):
                left = ast.Compare(left=left, ops=[node], comparators=[right])
            elif isinstance(node, ast.operator):
                left = ast.BinOp(left=left, op=node, right=right)
        return left

    def unary(self) -> ast.expr:
        kind, word = self.take()
        if kind == "-":
            return ast.UnaryOp(op=ast.USub(), operand=self.expr(len(BINARY)))
        if kind == "num":
            return ast.Constant(float(word))
        if kind == "NaN":
            return ast.Name(NA, ast.Load())
        if kind == "(":
            inner = self.if_expr()
            self.take(")")
            return inner
        if kind == "lit":
            s = self.symbols
            return self._name(s.alias(s.literals, "k", word.lower()))  # strcasecmp
        if kind == "id":
            s = self.symbols
            return self._name(s.alias(s.names, "e", identifier(word)))
        if kind in CALLS:
            self.take("(")
            args = [self.expr(0)]
            for _ in range(CALLS[kind] - 1):
                self.take(",")
                args.append(self.expr(0))
            self.take(")")
            return ast.Call(func=ast.Name(kind, ast.Load()), args=args, keywords=[])
        if kind in (SOURCE_COUNT, CPUID_TEST):
            self.take("(")
            word = identifier(self.take("id")[1])
            self.take(")")
            s = self.symbols
            if kind == CPUID_TEST:
                return self._name(s.alias(s.cpuid, "k", word))
            return self._name(s.alias(s.counted, "n", word))
        if kind == "has_event":
            raise self.error("has_event() is not supported (no event list at evaluation)")
        raise self.error(f"unexpected {word!r}")

    @staticmethod
    def _name(alias: str) -> ast.Name:
        return ast.Name(alias, ast.Load())


def parse(text: str) -> tuple[Formula, Symbols]:
    """A perf metric expression as a `Formula` over aliases, and what each alias stands for."""
    parser = _Parser(str(text))
    if not parser.toks:
        raise FormulaError("empty expression")
    body = parser.if_expr()
    if parser.at != len(parser.toks):
        raise parser.error(f"unexpected {parser.toks[parser.at][1]!r}")
    tree = ast.fix_missing_locations(ast.Expression(body=body))
    return Formula(str(text), tree, parser.symbols.aliases), parser.symbols
