"""A small evaluator for the Excel formulas of conditional formatting rules.

OSWorld's ``style`` rule applies a sheet's conditional formatting before comparing styles, and
evaluates each rule's formula with the ``formulas`` package. The formulas those rules hold are
short (``$B2>100``, ``B2=MAX($B$2:$B$20)``, ``NOT(ISERROR(SEARCH("x",A1)))``,
``LEFT(A1,LEN("x"))="x"``), so we evaluate them here with Excel's semantics for what they
use: numbers, strings (compared without regard to case), booleans, references (bound by the
caller), the arithmetic, ``&`` and comparison operators, and the functions in
:data:`FUNCTIONS`. A formula using anything else raises :class:`UnsupportedFormula`: the
caller cannot score it honestly.

>>> compile_formula('NOT(ISERROR(SEARCH("an",A1)))').refs
('A1',)
>>> compile_formula('NOT(ISERROR(SEARCH("an",A1)))')("Banana")
True
>>> compile_formula("B2=MAX($B$2:$B$4)")(7.0, [3.0, 7.0, None])
True
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class UnsupportedFormula(NotImplementedError):
    """A formula this evaluator cannot evaluate (syntax or function not implemented)."""


class XlError(Exception):
    """An Excel error value (``#VALUE!``, ``#DIV/0!``, ``#NUM!``, ``#N/A``) raised while
    evaluating; ``ISERROR`` catches it, a condition that ends in one is false."""


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"]|"")*")
    | (?P<ref>\$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?)(?![\w(])
    | (?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)
    | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
    | (?P<op><>|<=|>=|[-+*/^&=<>(),%])
    )""",
    re.X,
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise UnsupportedFormula(f"cannot read formula {text!r} at {text[pos:]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


Node = tuple[Any, ...]


class _Parser:
    """Precedence climbing over Excel's operators: comparison < ``&`` < ``+ -`` < ``* /`` <
    ``^`` < unary minus < ``%``."""

    LEVELS: tuple[tuple[str, ...], ...] = (("=", "<>", "<", ">", "<=", ">="), ("&",), ("+", "-"))

    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.refs: list[str] = []

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise UnsupportedFormula(f"cannot read formula {self.text!r}: expected {value!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.binary(0)
        if self.peek() is not None:
            raise UnsupportedFormula(f"cannot read formula {self.text!r}: trailing {self.peek()}")
        return node

    def binary(self, level: int) -> Node:
        if level == len(self.LEVELS):
            return self.product()
        node = self.binary(level + 1)
        while (tok := self.peek()) and tok[0] == "op" and tok[1] in self.LEVELS[level]:
            self.take()
            node = ("op", tok[1], node, self.binary(level + 1))
        return node

    def product(self) -> Node:
        node = self.power()
        while (tok := self.peek()) and tok[1] in ("*", "/"):
            self.take()
            node = ("op", tok[1], node, self.power())
        return node

    def power(self) -> Node:
        node = self.unary()
        while (tok := self.peek()) and tok[1] == "^":
            self.take()
            node = ("op", "^", node, self.unary())
        return node

    def unary(self) -> Node:
        tok = self.peek()
        if tok and tok[1] in ("-", "+"):
            self.take()
            inner = self.unary()
            return ("neg", inner) if tok[1] == "-" else inner
        node = self.atom()
        while (tok := self.peek()) and tok[1] == "%":
            self.take()
            node = ("op", "/", node, ("const", 100.0))
        return node

    def atom(self) -> Node:
        kind, value = self.take()
        if kind == "num":
            return ("const", float(value))
        if kind == "str":
            return ("const", value[1:-1].replace('""', '"'))
        if kind == "ref":
            key = value.upper()
            if key not in self.refs:
                self.refs.append(key)
            return ("ref", self.refs.index(key))
        if kind == "name":
            name = value.upper()
            if (tok := self.peek()) and tok[1] == "(":
                self.take("(")
                args: list[Node] = []
                if (tok := self.peek()) and tok[1] == ")":
                    self.take(")")
                else:
                    args.append(self.binary(0))
                    while (tok := self.peek()) and tok[1] == ",":
                        self.take(",")
                        args.append(self.binary(0))
                    self.take(")")
                if name not in FUNCTIONS:
                    raise UnsupportedFormula(f"function {name} in {self.text!r} is not implemented")
                return ("call", name, args)
            if name in ("TRUE", "FALSE"):
                return ("const", name == "TRUE")
            raise UnsupportedFormula(f"name {value!r} in {self.text!r} is not implemented")
        if value == "(":
            node = self.binary(0)
            self.take(")")
            return node
        raise UnsupportedFormula(f"cannot read formula {self.text!r} at {value!r}")


@dataclass(frozen=True)
class Formula:
    """A compiled formula: call it with one value per reference, in :attr:`refs` order (a
    range's value is a list). It returns the formula's value or raises :class:`XlError`."""

    text: str
    refs: tuple[str, ...]
    tree: Node

    def __call__(self, *values: Any) -> Any:
        if len(values) != len(self.refs):
            raise TypeError(f"{self.text!r} takes {len(self.refs)} values, got {len(values)}")
        return _eval(self.tree, values)


def compile_formula(text: str) -> Formula:
    """Parse ``text`` (without the leading ``=``).

    Raises:
        UnsupportedFormula: syntax or a function this evaluator does not implement.
    """
    parser = _Parser(text)
    tree = parser.parse()
    return Formula(text, tuple(parser.refs), tree)


# -- values ---------------------------------------------------------------------------------------


def _scalar(v: Any) -> Any:
    if isinstance(v, list):
        raise XlError("#VALUE!")  # a range where one value is needed
    return v


def _number(v: Any) -> float:
    v = _scalar(v)
    if v is None or v == "":
        return 0.0
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    try:
        return float(str(v))
    except ValueError:
        raise XlError("#VALUE!") from None


def _text(v: Any) -> str:
    v = _scalar(v)
    if v is None:
        return ""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    return str(v)


def _truth(v: Any) -> bool:
    v = _scalar(v)
    if isinstance(v, str):
        if v.upper() in ("TRUE", "FALSE"):
            return v.upper() == "TRUE"
        raise XlError("#VALUE!")
    return bool(_number(v))


def _rank(v: Any) -> tuple[int, Any]:
    """Excel's order across types: numbers < text (no case) < booleans; empty is 0 or ""."""
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, str):
        return (1, v.lower())
    return (0, 0.0 if v is None else float(v))


def _compare(op: str, a: Any, b: Any) -> bool:
    a, b = _scalar(a), _scalar(b)
    if a is None:
        a = "" if isinstance(b, str) else 0.0
    if b is None:
        b = "" if isinstance(a, str) else 0.0
    ra, rb = _rank(a), _rank(b)
    return {
        "=": ra == rb,
        "<>": ra != rb,
        "<": ra < rb,
        ">": ra > rb,
        "<=": ra <= rb,
        ">=": ra >= rb,
    }[op]


def _numbers(args: Sequence[Any]) -> list[float]:
    """Numbers of the arguments as the statistical functions see them: a range's numbers only
    (text, booleans and empty cells skipped), a direct argument converted."""
    out: list[float] = []
    for a in args:
        if isinstance(a, list):
            out.extend(
                float(x) for x in a if isinstance(x, int | float) and not isinstance(x, bool)
            )
        else:
            out.append(_number(a))
    return out


def _arith(op: str, a: Any, b: Any) -> Any:
    if op == "&":
        return _text(a) + _text(b)
    x, y = _number(a), _number(b)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        if y == 0:
            raise XlError("#DIV/0!")
        return x / y
    try:
        return x**y
    except (OverflowError, ZeroDivisionError):
        raise XlError("#NUM!") from None


def _eval(node: Node, values: Sequence[Any]) -> Any:
    kind = node[0]
    if kind == "const":
        return node[1]
    if kind == "ref":
        return values[node[1]]
    if kind == "neg":
        return -_number(_eval(node[1], values))
    if kind == "op":
        op, left, right = node[1], _eval(node[2], values), _eval(node[3], values)
        if op in ("=", "<>", "<", ">", "<=", ">="):
            return _compare(op, left, right)
        return _arith(op, left, right)
    name, args = node[1], node[2]
    if name in _LAZY:
        return _LAZY[name](args, values)
    return FUNCTIONS[name]([_eval(a, values) for a in args])


def _iserror(args: list[Node], values: Sequence[Any]) -> bool:
    try:
        _eval(args[0], values)
    except XlError:
        return True
    return False


def _if(args: list[Node], values: Sequence[Any]) -> Any:
    if _truth(_eval(args[0], values)):
        return _eval(args[1], values)
    return _eval(args[2], values) if len(args) > 2 else False


_LAZY: dict[str, Callable[[list[Node], Sequence[Any]], Any]] = {
    "ISERROR": _iserror,
    "ISERR": _iserror,
    "IF": _if,
}


def _search(a: list[Any], *, case: bool) -> float:
    needle, hay = _text(a[0]), _text(a[1])
    start = int(_number(a[2])) if len(a) > 2 else 1
    if not case:
        needle, hay = needle.lower(), hay.lower()
    found = hay.find(needle, start - 1)
    if found < 0:
        raise XlError("#VALUE!")
    return float(found + 1)


def _kth(a: list[Any], *, largest: bool) -> float:
    nums, k = sorted(_numbers(a[:1]), reverse=largest), int(_number(a[1]))
    if not 1 <= k <= len(nums):
        raise XlError("#NUM!")
    return nums[k - 1]


def _average(a: list[Any]) -> float:
    nums = _numbers(a)
    if not nums:
        raise XlError("#DIV/0!")
    return sum(nums) / len(nums)


def _weekday(a: list[Any]) -> float:
    serial = int(_number(a[0]))  # Excel's 1900 system: serial 1 is Sunday 1900-01-01
    kind = int(_number(a[1])) if len(a) > 1 else 1
    sunday_first = (serial - 1) % 7 + 1  # 1 = Sunday .. 7 = Saturday
    if kind == 1:
        return float(sunday_first)
    if kind == 2:
        return float((sunday_first + 5) % 7 + 1)
    if kind == 3:
        return float((sunday_first + 5) % 7)
    raise XlError("#NUM!")


def _round(a: list[Any]) -> float:
    x, digits = _number(a[0]), int(_number(a[1])) if len(a) > 1 else 0
    scale = 10.0**digits
    return math.copysign(math.floor(abs(x) * scale + 0.5) / scale, x)


#: Functions the evaluator implements (Excel's semantics for the arguments CF rules use).
FUNCTIONS: dict[str, Callable[[list[Any]], Any]] = {
    "AND": lambda a: all(_truth(x) for x in a),
    "OR": lambda a: any(_truth(x) for x in a),
    "NOT": lambda a: not _truth(a[0]),
    "ISERROR": lambda a: False,  # evaluated lazily (see _LAZY)
    "ISERR": lambda a: False,
    "IF": lambda a: None,
    "ISNUMBER": lambda a: isinstance(_scalar(a[0]), int | float) and not isinstance(a[0], bool),
    "ISTEXT": lambda a: isinstance(_scalar(a[0]), str),
    "ISBLANK": lambda a: _scalar(a[0]) is None,
    "SEARCH": lambda a: _search(a, case=False),
    "FIND": lambda a: _search(a, case=True),
    "LEFT": lambda a: _text(a[0])[: int(_number(a[1])) if len(a) > 1 else 1],
    "RIGHT": lambda a: _text(a[0])[-int(_number(a[1])) :] if (len(a) < 2 or _number(a[1])) else "",
    "MID": lambda a: _text(a[0])[
        int(_number(a[1])) - 1 : int(_number(a[1])) - 1 + int(_number(a[2]))
    ],
    "LEN": lambda a: float(len(_text(a[0]))),
    "UPPER": lambda a: _text(a[0]).upper(),
    "LOWER": lambda a: _text(a[0]).lower(),
    "TRIM": lambda a: " ".join(_text(a[0]).split()),
    "EXACT": lambda a: _text(a[0]) == _text(a[1]),
    "MAX": lambda a: max(_numbers(a), default=0.0),
    "MIN": lambda a: min(_numbers(a), default=0.0),
    "SUM": lambda a: sum(_numbers(a)),
    "AVERAGE": _average,
    "LARGE": lambda a: _kth(a, largest=True),
    "SMALL": lambda a: _kth(a, largest=False),
    "ABS": lambda a: abs(_number(a[0])),
    "INT": lambda a: float(math.floor(_number(a[0]))),
    "MOD": lambda a: _number(a[0]) % _number(a[1]) if _number(a[1]) else _arith("/", 1, 0),
    "ROUND": _round,
    "WEEKDAY": _weekday,
}
