"""The ``pyautogui`` action set: OSWorld's default, a safe subset of pyautogui code.

The agent writes Python such as ``pyautogui.click(100, 200)``. The text is read with
:func:`ast.parse` only and never executed: each statement must be a call to a function in
:data:`FUNCTIONS` (or ``time.sleep``) with literal arguments, optionally preceded by
``import pyautogui`` / ``import time``. Bare string statements (docstrings) are ignored and a
surrounding Markdown code fence is stripped. Arguments bind exactly as pyautogui binds them,
positional or keyword.

Relative motion (``moveRel``/``move``, ``dragRel``/``drag``) and ``None`` for one coordinate
need the pointer position, which a parser cannot know; they are accepted only after an earlier
call in the *same* action text put the pointer somewhere known (``moveTo``, ``click(x, y)``,
...), and are then converted to absolute moves. Otherwise they raise :class:`ActionError`.
``duration``, ``interval`` and ``tween`` (a ``pyautogui.ease*``/``linear`` name) are accepted and
ignored: motion is instantaneous. Typed text is typed exactly (``\\n`` presses Return).

>>> s = PyAutoGUIActionSet()
>>> s.parse("pyautogui.click(100, 200, button='right')").primitives
(Click(x=100, y=200, button='right', clicks=1),)
>>> s.parse("```python\\npyautogui.moveTo(10, 10)\\npyautogui.moveRel(5, -5)\\n```").primitives
(MoveTo(x=10, y=10), MoveTo(x=15, y=5))
>>> s.parse("pyautogui.hotkey('ctrl', 'c'); time.sleep(0.5)").primitives
(Hotkey(keys=('ctrl', 'c')), Wait(seconds=0.5))
>>> s.parse("import os")
Traceback (most recent call last):
...
osworld_gym.errors.ActionError: line 1: only 'import pyautogui' and 'import time' are allowed, ...
"""

from __future__ import annotations

import ast
import inspect
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium

from osworld_gym.actions.base import (
    ActionSet,
    ActionText,
    ParsedAction,
    as_text,
    finish,
    special_of,
)
from osworld_gym.actions.restricted import (
    MAX_SOURCE_CHARS,
    describe_node,
    dotted_name,
    literal,
    parse_source,
    strip_code_fence,
)
from osworld_gym.errors import ActionError
from osworld_gym.protocol.keys import canonical_key
from osworld_gym.protocol.primitives import (
    MAX_TEXT_CHARS,
    MAX_WAIT_S,
    Click,
    DragTo,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    MoveTo,
    Press,
    Primitive,
    Scroll,
    TypeText,
    Wait,
    to_pyautogui_code,
    validate,
)

log = logging.getLogger(__name__)

#: Most function calls one action text may contain.
MAX_CALLS = 50
#: Most primitives one action text may produce (``press(keys, presses=n)`` repeats keys).
MAX_PRIMITIVES = 256

_P = inspect.Parameter
_TWEEN = re.compile(
    r"linear|ease(In|Out|InOut)(Quad|Cubic|Quart|Quint|Sine|Expo|Circ|Elastic|Back|Bounce)"
)
_BUTTON_ALIASES: dict[Any, str] = {
    "primary": "left",
    "secondary": "right",
    1: "left",
    2: "middle",
    3: "right",
}


@dataclass
class _Script:
    """State while reading one action text: the known pointer position and running totals."""

    pos: tuple[int, int] | None = None
    typed: int = 0
    slept: float = 0.0
    out: list[Primitive] = field(default_factory=list)

    def emit(self, p: Primitive) -> None:
        if len(self.out) >= MAX_PRIMITIVES:
            raise ActionError(f"the action expands to more than {MAX_PRIMITIVES} primitive actions")
        p = validate(p)
        match p:
            case MoveTo(x, y) | DragTo(x, y):
                self.pos = (x, y)
            # validate() has checked that x and y are given together or not at all
            case Click(x, y) | MouseDown(_, x, y) | MouseUp(_, x, y) | Scroll(_, _, x, y) if (
                x is not None and y is not None
            ):
                self.pos = (x, y)
            case TypeText(text):
                self.typed += len(text)
                if self.typed > MAX_TEXT_CHARS:
                    raise ActionError(
                        f"the action types {self.typed}+ characters; the limit is {MAX_TEXT_CHARS}"
                    )
            case Wait(seconds):
                self.slept += seconds
                if self.slept > MAX_WAIT_S:
                    raise ActionError(
                        f"the action sleeps {self.slept:g} s in all; the limit is {MAX_WAIT_S:g} s"
                    )
        self.out.append(p)

    def point(self, fn: str, x: Any, y: Any) -> tuple[int, int] | None:
        """Resolve pyautogui's ``x, y`` arguments (a pair in ``x``, or ``None`` = current)."""
        if isinstance(x, (tuple, list)):
            if y is not None or len(x) != 2:
                raise ActionError(f"{fn}: give the position as x, y or as one (x, y) pair")
            x, y = x
        if isinstance(x, str) or isinstance(y, str):
            raise ActionError(
                f"{fn}: locating an image on screen is not supported; give numeric x, y"
            )
        if x is None and y is None:
            return None
        if x is None or y is None:
            if self.pos is None:
                raise ActionError(
                    f"{fn}: x and y are both needed (the pointer position is unknown)"
                )
            x = self.pos[0] if x is None else x
            y = self.pos[1] if y is None else y
        m = validate(MoveTo(x, y))
        return m.x, m.y

    def offset(self, fn: str, dx: Any, dy: Any) -> tuple[int, int]:
        """Absolute target of a relative move, from the position known in this action text."""
        if isinstance(dx, (tuple, list)):
            if dy is not None or len(dx) != 2:
                raise ActionError(f"{fn}: give the offset as xOffset, yOffset or as one pair")
            dx, dy = dx
        if self.pos is None:
            raise ActionError(
                f"{fn}: relative moves need the pointer position, which is unknown here; "
                "use pyautogui.moveTo(x, y) / dragTo(x, y) with absolute coordinates"
            )
        d = validate(MoveTo(dx or 0, dy or 0))
        return self.pos[0] + d.x, self.pos[1] + d.y


def _button(fn: str, v: Any) -> str:
    b = _BUTTON_ALIASES.get(v, v) if isinstance(v, (str, int)) and not isinstance(v, bool) else v
    if b not in ("left", "right", "middle"):
        raise ActionError(f"{fn}: button must be 'left', 'right' or 'middle', got {v!r}")
    return b


def _ignored_number(fn: str, name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ActionError(f"{fn}: {name} must be a non-negative number, got {v!r}")


def _keys(fn: str, v: Any) -> list[str]:
    if isinstance(v, str):
        return [canonical_key(v)]
    if isinstance(v, (list, tuple)) and v:
        return [canonical_key(k) for k in v]
    raise ActionError(f"{fn}: expected a key name or a non-empty list of key names, got {v!r}")


# -- the table: name -> signature (as pyautogui's) and builder ------------------------------------

Builder = Callable[[_Script, dict[str, Any]], None]


@dataclass(frozen=True)
class Function:
    """One accepted call: its pyautogui signature, a one-line summary, how to build primitives."""

    module: str
    name: str
    signature: inspect.Signature
    summary: str
    build: Builder


def _sig(*params: str, var: str | None = None, kwonly: tuple[str, ...] = ()) -> inspect.Signature:
    """pyautogui's signature for the listed parameters (a trailing ``!`` marks one required)."""
    defaults = {
        "x": None,
        "y": None,
        "xOffset": None,
        "yOffset": None,
        "clicks": 1,
        "interval": 0.0,
        "button": "left",
        "duration": 0.0,
        "tween": None,
        "presses": 1,
        "mouseDownUp": True,
    }
    ps = [
        _P(
            p.rstrip("!"),
            _P.POSITIONAL_OR_KEYWORD,
            default=_P.empty if p.endswith("!") else defaults.get(p, _P.empty),
        )
        for p in params
    ]
    if var:
        ps.append(_P(var, _P.VAR_POSITIONAL))
    ps += [_P(p, _P.KEYWORD_ONLY, default=defaults[p]) for p in kwonly]
    return inspect.Signature(ps)


def _clicker(button: str | None, clicks: int | None) -> Builder:
    def build(s: _Script, a: dict[str, Any]) -> None:
        fn = a["__fn__"]
        at = s.point(fn, a["x"], a["y"])
        b = _button(fn, a.get("button", "left")) if button is None else button
        n = a.get("clicks", 1) if clicks is None else clicks
        x, y = at if at else (None, None)
        s.emit(Click(x, y, b, n))

    return build


def _move_to(s: _Script, a: dict[str, Any]) -> None:
    at = s.point(a["__fn__"], a["x"], a["y"])
    if at is None:
        raise ActionError(f"{a['__fn__']}: needs x and y")
    s.emit(MoveTo(*at))


def _move_rel(s: _Script, a: dict[str, Any]) -> None:
    s.emit(MoveTo(*s.offset(a["__fn__"], a["xOffset"], a["yOffset"])))


def _button_updown(cls: type[MouseDown | MouseUp]) -> Builder:
    def build(s: _Script, a: dict[str, Any]) -> None:
        at = s.point(a["__fn__"], a["x"], a["y"])
        x, y = at if at else (None, None)
        s.emit(cls(_button(a["__fn__"], a["button"]), x, y))

    return build


def _drag(relative: bool) -> Builder:
    def build(s: _Script, a: dict[str, Any]) -> None:
        fn = a["__fn__"]
        at = s.offset(fn, a["xOffset"], a["yOffset"]) if relative else s.point(fn, a["x"], a["y"])
        if at is None:
            raise ActionError(f"{fn}: needs x and y")
        if not isinstance(a["mouseDownUp"], bool):
            raise ActionError(f"{fn}: mouseDownUp must be True or False")
        s.emit(DragTo(*at, _button(fn, a["button"])) if a["mouseDownUp"] else MoveTo(*at))

    return build


def _scroller(axis: str) -> Builder:
    def build(s: _Script, a: dict[str, Any]) -> None:
        at = s.point(a["__fn__"], a["x"], a["y"])
        x, y = at if at else (None, None)
        n = a["clicks"]
        s.emit(Scroll(dx=n, x=x, y=y) if axis == "x" else Scroll(dy=n, x=x, y=y))

    return build


def _press(s: _Script, a: dict[str, Any]) -> None:
    keys = _keys(a["__fn__"], a["keys"])
    presses = a["presses"]
    if len(keys) == 1:
        s.emit(Press(keys[0], presses))
        return
    validate(Press(keys[0], presses))  # bounds-check presses before repeating
    for _ in range(presses):
        for k in keys:
            s.emit(Press(k))


def _key(cls: type[KeyDown | KeyUp]) -> Builder:
    return lambda s, a: s.emit(cls(a["key"]))


def _hotkey(s: _Script, a: dict[str, Any]) -> None:
    keys = a["args"]
    if len(keys) == 1 and isinstance(keys[0], (list, tuple)):
        keys = keys[0]
    s.emit(Hotkey(tuple(keys)))


def _typewrite(s: _Script, a: dict[str, Any]) -> None:
    msg = a["message"]
    if isinstance(msg, str):
        s.emit(TypeText(msg.replace("\r\n", "\n").replace("\r", "\n")))
    elif isinstance(msg, (list, tuple)):
        for k in msg:
            s.emit(Press(canonical_key(k)))
    else:
        raise ActionError(f"{a['__fn__']}: message must be a string or a list of key names")


def _sleep(s: _Script, a: dict[str, Any]) -> None:
    s.emit(Wait(a["secs"]))


_XY = ("x", "y")
_TABLE: list[tuple[str, str, inspect.Signature, str, Builder]] = [
    (
        "pyautogui",
        "moveTo",
        _sig(*_XY, "duration", "tween"),
        "move the pointer to (x, y)",
        _move_to,
    ),
    (
        "pyautogui",
        "moveRel",
        _sig("xOffset", "yOffset", "duration", "tween"),
        "move the pointer by an offset (only after an absolute move in the same action)",
        _move_rel,
    ),
    (
        "pyautogui",
        "move",
        _sig("xOffset", "yOffset", "duration", "tween"),
        "same as moveRel",
        _move_rel,
    ),
    (
        "pyautogui",
        "click",
        _sig(*_XY, "clicks", "interval", "button", "duration", "tween"),
        "click at (x, y), or where the pointer is if x, y are omitted",
        _clicker(None, None),
    ),
    (
        "pyautogui",
        "doubleClick",
        _sig(*_XY, "interval", "button", "duration", "tween"),
        "double-click",
        _clicker(None, 2),
    ),
    (
        "pyautogui",
        "tripleClick",
        _sig(*_XY, "interval", "button", "duration", "tween"),
        "triple-click",
        _clicker(None, 3),
    ),
    (
        "pyautogui",
        "rightClick",
        _sig(*_XY, "duration", "tween"),
        "right-click",
        _clicker("right", 1),
    ),
    (
        "pyautogui",
        "middleClick",
        _sig(*_XY, "duration", "tween"),
        "middle-click",
        _clicker("middle", 1),
    ),
    (
        "pyautogui",
        "mouseDown",
        _sig(*_XY, "button", "duration", "tween"),
        "press a mouse button (at x, y if given)",
        _button_updown(MouseDown),
    ),
    (
        "pyautogui",
        "mouseUp",
        _sig(*_XY, "button", "duration", "tween"),
        "release a mouse button (at x, y if given)",
        _button_updown(MouseUp),
    ),
    (
        "pyautogui",
        "dragTo",
        _sig(*_XY, "duration", "tween", "button", "mouseDownUp"),
        "drag from the pointer to (x, y) holding a button",
        _drag(False),
    ),
    (
        "pyautogui",
        "dragRel",
        _sig("xOffset", "yOffset", "duration", "tween", "button", "mouseDownUp"),
        "drag by an offset (only after an absolute move in the same action)",
        _drag(True),
    ),
    (
        "pyautogui",
        "drag",
        _sig("xOffset", "yOffset", "duration", "tween", "button", "mouseDownUp"),
        "same as dragRel",
        _drag(True),
    ),
    (
        "pyautogui",
        "scroll",
        _sig("clicks!", *_XY),
        "scroll vertically; positive = up",
        _scroller("y"),
    ),
    ("pyautogui", "vscroll", _sig("clicks!", *_XY), "same as scroll", _scroller("y")),
    (
        "pyautogui",
        "hscroll",
        _sig("clicks!", *_XY),
        "scroll horizontally; positive = right",
        _scroller("x"),
    ),
    (
        "pyautogui",
        "press",
        _sig("keys", "presses", "interval"),
        "press and release a key (or each key of a list) `presses` times",
        _press,
    ),
    ("pyautogui", "keyDown", _sig("key"), "hold a key down", _key(KeyDown)),
    ("pyautogui", "keyUp", _sig("key"), "release a held key", _key(KeyUp)),
    (
        "pyautogui",
        "hotkey",
        _sig(var="args", kwonly=("interval",)),
        "press keys together, e.g. hotkey('ctrl', 'c')",
        _hotkey,
    ),
    (
        "pyautogui",
        "typewrite",
        _sig("message", "interval"),
        "type a string exactly (\\n presses Return), or press each key of a list",
        _typewrite,
    ),
    ("pyautogui", "write", _sig("message", "interval"), "same as typewrite", _typewrite),
    ("pyautogui", "sleep", _sig("secs"), f"wait up to {MAX_WAIT_S:g} s", _sleep),
    ("time", "sleep", _sig("secs"), f"wait up to {MAX_WAIT_S:g} s", _sleep),
]

#: Every accepted call, keyed by ``"module.name"`` (the parser and :meth:`describe` both read it).
FUNCTIONS: dict[str, Function] = {
    f"{m}.{n}": Function(m, n, sig, doc, b) for m, n, sig, doc, b in _TABLE
}
_IMPORTABLE = frozenset(f.module for f in FUNCTIONS.values())
_IGNORED_NUMBERS = ("duration", "interval")


def _bind(fn: Function, call: ast.Call) -> dict[str, Any]:
    """Bind the call's literal arguments to ``fn``'s signature, as Python would."""
    where = f"{fn.module}.{fn.name}()"
    for a in call.args:
        if isinstance(a, ast.Starred):
            raise ActionError(f"{where}: star-arguments (*args) are not allowed")
    for k in call.keywords:
        if k.arg is None:
            raise ActionError(f"{where}: keyword unpacking (**kwargs) is not allowed")
    try:
        bound = fn.signature.bind(*call.args, **{k.arg: k.value for k in call.keywords if k.arg})
    except TypeError as e:
        raise ActionError(f"{where}: {e}; the signature is {fn.name}{fn.signature}") from None
    values: dict[str, Any] = {}
    for name, node in bound.arguments.items():
        if name == "tween":
            dotted = dotted_name(node) if not isinstance(node, ast.Constant) else None
            if not (isinstance(node, ast.Constant) and node.value is None) and not (
                dotted and dotted.startswith("pyautogui.") and _TWEEN.fullmatch(dotted[10:])
            ):
                raise ActionError(
                    f"{where}: tween must be pyautogui.linear or a pyautogui.ease* function"
                )
            values[name] = None
        elif name == "args":
            values[name] = tuple(literal(n, where=where) for n in node)
        else:
            values[name] = literal(node, where=where)
    bound.arguments.update(values)
    bound.apply_defaults()
    args = dict(bound.arguments)
    for name in _IGNORED_NUMBERS:
        if name in args:
            _ignored_number(where, name, args[name])
    args["__fn__"] = where
    return args


def _statement(s: _Script, stmt: ast.stmt) -> None:
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.name not in _IMPORTABLE or alias.asname:
                shown = alias.name + (f" as {alias.asname}" if alias.asname else "")
                raise ActionError(
                    f"only 'import pyautogui' and 'import time' are allowed, not 'import {shown}'"
                )
        return
    if (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    ):
        return  # a docstring or comment-like string
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        what = describe_node(stmt.value if isinstance(stmt, ast.Expr) else stmt)
        raise ActionError(
            f"{what} is not allowed; write only pyautogui.<function>(...) "
            "calls with literal arguments"
        )
    call = stmt.value
    dotted = dotted_name(call.func)
    fn = FUNCTIONS.get(dotted or "")
    if fn is None:
        if dotted and "." in dotted and dotted.split(".")[0] in _IMPORTABLE and "__" not in dotted:
            hint = f"{dotted}() is not supported; supported: " + ", ".join(sorted(FUNCTIONS))
        else:
            hint = (
                f"{describe_node(call)} is not allowed; only pyautogui.<function>(...) and "
                "time.sleep(...) may be called"
            )
        raise ActionError(hint)
    args = _bind(fn, call)
    try:
        fn.build(s, args)
    except ActionError as e:
        if str(e).startswith(args["__fn__"]):
            raise
        raise ActionError(f"{args['__fn__']}: {e}") from None


class PyAutoGUIActionSet(ActionSet):
    """OSWorld's ``pyautogui`` action space, parsed safely (see the module docstring)."""

    name = "pyautogui"

    def names(self) -> tuple[str, ...]:
        return tuple(FUNCTIONS)

    def describe(self) -> str:
        w, h = self.screen_size
        lines = [
            (
                f"Act by writing Python code that uses pyautogui. The screen is {w}x{h} pixels; "
                "(0, 0) is the top-left corner."
            ),
            (
                "Write one call per line; arguments must be literal numbers, strings, "
                "True/False/None "
                "or lists of them (no variables, loops or other code). You may start with "
                "'import pyautogui' and 'import time'."
            ),
            (
                f"At most {MAX_CALLS} calls, {MAX_TEXT_CHARS} typed characters and "
                f"{MAX_WAIT_S:g} s of "
                "sleeping per action. duration, interval and tween are accepted and "
                "ignored (motion is "
                "instantaneous). Available functions:"
            ),
        ]
        lines += [f"- {key}{f.signature}: {f.summary}" for key, f in FUNCTIONS.items()]
        lines.append(
            "Instead of code you may answer with exactly one of: WAIT (wait for the screen "
            "to change), DONE (the task is complete), FAIL (the task cannot be done)."
        )
        return "\n".join(lines)

    def parse(self, action: str | dict) -> ParsedAction:
        if type(action) is dict and isinstance(action.get("command"), str):
            action = action["command"]  # OSWorld also accepts {"command": code}
        if not isinstance(action, str):
            raise ActionError(
                f"a pyautogui action must be a string of code, got {type(action).__name__}"
            )
        action = as_text(action)
        raw = action
        if len(action) > MAX_SOURCE_CHARS:
            raise ActionError(
                f"the action is {len(action)} characters long; the limit is {MAX_SOURCE_CHARS}"
            )
        code = strip_code_fence(action)
        if (special := special_of(code)) is not None:
            return ParsedAction((), special, raw)
        tree = parse_source(code, mode="exec", what="the code")
        assert isinstance(tree, ast.Module)
        calls = sum(isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) for st in tree.body)
        if calls > MAX_CALLS:
            raise ActionError(f"the action makes {calls} calls; the limit is {MAX_CALLS}")
        script = _Script()
        for stmt in tree.body:
            try:
                _statement(script, stmt)
            except ActionError as e:
                if str(e).startswith("line "):
                    raise
                raise ActionError(f"line {stmt.lineno}: {e}") from None
        if not script.out:
            raise ActionError(
                "the code contains no pyautogui call; write e.g. pyautogui.click(x, y), "
                "or answer WAIT, DONE or FAIL"
            )
        log.debug("pyautogui action: %d calls -> %d primitives", calls, len(script.out))
        return finish(script.out, raw=raw)

    def render(self, parsed: ParsedAction) -> str:
        if parsed.special is not None:
            if parsed.primitives:
                raise ActionError("pyautogui text carries either code or WAIT/DONE/FAIL, not both")
            return parsed.special
        if not parsed.primitives:
            raise ActionError("nothing to render")
        lines = [_render_one(validate(p)) for p in parsed.primitives]
        return "\n".join(lines)

    def space(self) -> gymnasium.spaces.Space:
        return ActionText(self, MAX_SOURCE_CHARS)


def _render_one(p: Primitive) -> str:
    match p:
        case Scroll(dy, dx, x, y) if dy and dx:
            raise ActionError(
                "a diagonal scroll has no single pyautogui call; split it into scroll and hscroll"
            )
        case Scroll(_, dx, x, y) if dx:
            at = f", x={x}, y={y}" if x is not None else ""
            return f"pyautogui.hscroll({dx}{at})"
        case Scroll(dy, _, x, y):
            at = f", x={x}, y={y}" if x is not None else ""
            return f"pyautogui.scroll({dy}{at})"
        case TypeText(text):
            return f"pyautogui.write({text!r})"
        case Wait(seconds):
            return f"time.sleep({seconds!r})"
    return to_pyautogui_code([p])
