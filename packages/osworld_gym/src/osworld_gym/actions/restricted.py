"""Reading agent-written, Python-looking text without ever running it.

The ``pyautogui`` and ``uitars`` action sets receive text that *looks* like Python. This module
turns such text into an :mod:`ast` tree and reads literal values out of it. Nothing here compiles
to code objects, calls ``exec``/``eval`` or imports anything the text names: the tree is only
inspected. Every failure, including the parser's own ``RecursionError``/``MemoryError`` on
pathological nesting, becomes an :class:`~osworld_gym.errors.ActionError` whose message says
what is not allowed.

>>> tree = parse_source("f(1, -2.5, 'a', [1, 2])", mode="eval", what="the action")
>>> [literal(a, where="f") for a in tree.body.args]
[1, -2.5, 'a', [1, 2]]
>>> literal(parse_source("__import__('os')", mode="eval", what="x").body, where="f()")
Traceback (most recent call last):
...
osworld_gym.errors.ActionError: f(): a function call (__import__(...)) is not allowed here; ...
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from typing import Any, Literal

from osworld_gym.errors import ActionError

#: Longest action text accepted, in characters (checked before parsing).
MAX_SOURCE_CHARS = 20_000
#: Literal lists/tuples may nest this deep (``[(1, 2), (3, 4)]`` is depth 2).
MAX_LITERAL_DEPTH = 2
#: Longest literal list/tuple.
MAX_SEQUENCE_ITEMS = 64
#: Largest magnitude of a numeric literal; anything bigger is surely not a coordinate or count.
MAX_NUMBER = 10**9

_FENCE_LANGUAGE = re.compile(r"[A-Za-z0-9_+-]{0,20}")


def strip_code_fence(text: str) -> str:
    """Remove one Markdown code fence around the whole text (```` ```python ... ``` ````).

    >>> strip_code_fence("```python\\npyautogui.click(1, 2)\\n```")
    'pyautogui.click(1, 2)'
    >>> strip_code_fence("  no fence  ")
    '  no fence  '
    """
    s = text.strip()
    if len(s) < 7 or not (s.startswith("```") and s.endswith("```")):
        return text
    newline = s.find("\n")
    # Plain string operations, no regex over the body: linear time on any input.
    if newline < 0 or newline > len(s) - 4 or not _FENCE_LANGUAGE.fullmatch(s[3:newline].strip()):
        return text
    return s[newline + 1 : -3].rstrip()


def parse_source(text: str, *, mode: Literal["exec", "eval"], what: str) -> ast.AST:
    """``ast.parse`` with a size limit, turning every parser failure into :class:`ActionError`.

    >>> parse_source("(" * 500, mode="exec", what="the code")
    Traceback (most recent call last):
    ...
    osworld_gym.errors.ActionError: the code nests brackets more than 64 deep
    """
    if not isinstance(text, str):
        raise ActionError(f"{what} must be a string, got {type(text).__name__}")
    if len(text) > MAX_SOURCE_CHARS:
        raise ActionError(f"{what} is {len(text)} characters long; the limit is {MAX_SOURCE_CHARS}")
    if "\x00" in text:
        raise ActionError(f"{what} contains a null byte")
    _check_nesting(text, what)
    try:
        with warnings.catch_warnings():  # invalid escapes in agent text are not our warnings
            warnings.simplefilter("ignore")
            return ast.parse(text, mode=mode)
    except SyntaxError as e:
        raise ActionError(f"{what} is not valid Python syntax: {e.msg} (line {e.lineno})") from None
    except (RecursionError, MemoryError):
        raise ActionError(f"{what} is nested too deeply to read") from None
    except (ValueError, OverflowError, UnicodeError) as e:
        raise ActionError(f"{what} could not be read: {str(e)[:200]}") from None


#: Brackets may nest this deep, and the source may hold this many operator tokens.
MAX_BRACKET_DEPTH = 64
MAX_OPERATORS = 300
_FLAT_OPS = frozenset("()[]{},:;=")


def _check_nesting(text: str, what: str) -> None:
    """Reject text whose syntax tree would nest deeply, *before* ``ast.parse`` sees it.

    CPython 3.11 up to 3.11.7 corrupts the parser's recursion counter when building a deep tree
    fails ("AST constructor recursion depth mismatch" on later, innocent parses), so one
    hostile action could break parsing for the rest of the process. Tokenizing does not recurse:
    bracket depth and the number of operators (each ``+``, ``-``, ``.``, ... can add a level)
    bound the depth of the tree.

    >>> _check_nesting("pyautogui.click(-1, -2)", "the code")
    >>> _check_nesting("1" + "+1" * 400, "the code")
    Traceback (most recent call last):
    ...
    osworld_gym.errors.ActionError: the code has more than 300 operators; actions are simple calls
    """
    depth = max_depth = operators = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.OP:
                continue
            if tok.string in "([{":
                depth += 1
                max_depth = max(max_depth, depth)
            elif tok.string in ")]}":
                depth = max(0, depth - 1)
            elif tok.string not in _FLAT_OPS:
                operators += 1
            if max_depth > MAX_BRACKET_DEPTH or operators > MAX_OPERATORS:
                break
    except (tokenize.TokenError, SyntaxError):
        pass  # malformed: ast.parse reports it; what was read so far is checked below
    if max_depth > MAX_BRACKET_DEPTH:
        raise ActionError(f"{what} nests brackets more than {MAX_BRACKET_DEPTH} deep")
    if operators > MAX_OPERATORS:
        raise ActionError(
            f"{what} has more than {MAX_OPERATORS} operators; actions are simple calls"
        )


_NODE_NAMES: dict[type, str] = {
    ast.Call: "a function call",
    ast.Name: "a variable name",
    ast.Attribute: "attribute access",
    ast.JoinedStr: "an f-string",
    ast.FormattedValue: "an f-string",
    ast.BinOp: "arithmetic",
    ast.BoolOp: "a boolean operator",
    ast.Compare: "a comparison",
    ast.Subscript: "subscripting",
    ast.Lambda: "a lambda",
    ast.IfExp: "a conditional expression",
    ast.NamedExpr: "':=' (walrus)",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.Starred: "star-arguments",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "a slice",
    ast.UnaryOp: "this operator",
    ast.FunctionDef: "a function definition",
    ast.AsyncFunctionDef: "a function definition",
    ast.ClassDef: "a class definition",
    ast.Return: "return",
    ast.Delete: "del",
    ast.Assign: "an assignment",
    ast.AugAssign: "an assignment",
    ast.AnnAssign: "an assignment",
    ast.For: "a for loop",
    ast.AsyncFor: "a for loop",
    ast.While: "a while loop",
    ast.If: "an if statement",
    ast.With: "a with statement",
    ast.AsyncWith: "a with statement",
    ast.Match: "a match statement",
    ast.Raise: "raise",
    ast.Try: "a try statement",
    ast.Assert: "assert",
    ast.Import: "an import",
    ast.ImportFrom: "a from-import",
    ast.Global: "global",
    ast.Nonlocal: "nonlocal",
    ast.Pass: "pass",
    ast.Break: "break",
    ast.Continue: "continue",
}
if hasattr(ast, "TryStar"):  # pragma: no branch - Python >= 3.11
    _NODE_NAMES[ast.TryStar] = "a try statement"


def describe_node(node: ast.AST) -> str:
    """A short human description of a syntax node, for error messages.

    >>> describe_node(ast.parse("open('/etc/passwd')", mode="eval").body)
    'a function call (open(...))'
    >>> describe_node(ast.parse("pyautogui.__dict__", mode="eval").body)
    'attribute access (pyautogui.__dict__)'
    """
    name = _NODE_NAMES.get(type(node), f"a {type(node).__name__} expression")
    if isinstance(node, ast.Call):
        callee = dotted_name(node.func)
        return f"{name} ({callee}(...))" if callee else name
    if isinstance(node, (ast.Name, ast.Attribute)):
        dotted = dotted_name(node)
        return f"{name} ({dotted})" if dotted else name
    if isinstance(node, ast.Constant):
        return f"a {type(node.value).__name__} literal"
    return name


def dotted_name(node: ast.AST, *, limit: int = 8) -> str | None:
    """``a.b.c`` for a chain of plain attribute lookups on a name, else ``None``.

    >>> dotted_name(ast.parse("pyautogui.click", mode="eval").body)
    'pyautogui.click'
    >>> dotted_name(ast.parse("f().x", mode="eval").body) is None
    True
    """
    parts: list[str] = []
    while isinstance(node, ast.Attribute) and len(parts) < limit:
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))[:120]


_ALLOWED_CONSTANTS = (str, int, float, bool, type(None))
_HINT = "use literal numbers, strings, True/False/None or lists of them"


def literal(node: ast.AST, *, where: str, depth: int = 0) -> Any:
    """The value of a literal expression, or :class:`ActionError` for anything else.

    Accepted: ``str``/``int``/``float``/``bool``/``None`` constants, a unary ``-``/``+`` applied
    directly to a number, and lists/tuples of those (nested at most :data:`MAX_LITERAL_DEPTH`).

    >>> literal(ast.parse("-3", mode="eval").body, where="x")
    -3
    >>> literal(ast.parse("1 + 1", mode="eval").body, where="click()")
    Traceback (most recent call last):
    ...
    osworld_gym.errors.ActionError: click(): arithmetic is not allowed here; use literal ...
    """
    if isinstance(node, ast.Constant):
        v = node.value
        if not isinstance(v, _ALLOWED_CONSTANTS):
            raise ActionError(f"{where}: {describe_node(node)} is not allowed here; {_HINT}")
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_NUMBER:
            # never str(v): a 5,000-digit literal makes str() itself raise ValueError
            raise ActionError(f"{where}: a {v.bit_length()}-bit number is too large")
        return v
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = node.operand
        if (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, (int, float))
            and not isinstance(operand.value, bool)
        ):
            value = literal(operand, where=where, depth=depth)
            return -value if isinstance(node.op, ast.USub) else value
        raise ActionError(f"{where}: '-' and '+' may only precede a number; {_HINT}")
    if isinstance(node, (ast.List, ast.Tuple)):
        if depth >= MAX_LITERAL_DEPTH:
            raise ActionError(f"{where}: lists are nested too deeply")
        if len(node.elts) > MAX_SEQUENCE_ITEMS:
            raise ActionError(f"{where}: a list may hold at most {MAX_SEQUENCE_ITEMS} items")
        items = [literal(e, where=where, depth=depth + 1) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    raise ActionError(f"{where}: {describe_node(node)} is not allowed here; {_HINT}")
