"""The ``uitars`` action set: UI-TARS ``Thought: ... Action: ...`` text.

The model writes a thought (``Thought:``, or ``Reflection:`` + ``Action_Summary:``), then
``Action:`` and one or more calls separated by blank lines, e.g.
``click(start_box='<|box_start|>(640,360)<|box_end|>')``. Each call is read with
``ast.parse(mode="eval")`` and must use keyword arguments with quoted-string values only.
``type``/``finished`` content is taken verbatim between its quotes (so an unescaped ``'`` inside
does no harm) and unescaped like UI-TARS: ``\\n``, ``\\t``, ``\\'``, ``\\"``, ``\\\\``; a trailing
newline means "then press Enter". ``scroll`` understands left/right as well as up/down.

Points may be written ``'(x,y)'``, ``'<|box_start|>(x,y)<|box_end|>'``, ``'[x1,y1,x2,y2]'``
(centre), ``'<point>x y</point>'`` or ``'<bbox>x1 y1 x2 y2</bbox>'``. They live in the model's image
frame and are mapped to screen pixels by ``coordinate_mode``: ``"smart_resize"`` (UI-TARS-1.5 /
Qwen2.5-VL: pixels of the resized screenshot, see :func:`smart_resize`), ``"relative1000"``
(0..1000 on each axis, UI-TARS-1.0) or ``"absolute"`` (screen pixels).

>>> s = UITarsActionSet(screen_size=(1920, 1080))
>>> box = "<|box_start|>(966,546)<|box_end|>"
>>> p = s.parse(f"Thought: open the menu\\nAction: click(start_box='{box}')")
>>> p.primitives, p.thought
((Click(x=960, y=540, button='left', clicks=1),), 'open the menu')
>>> s.parse("Action: type(content='It's done\\\\n')").primitives
(TypeText(text="It's done"), Press(key='enter', presses=1))
>>> s.parse("Action: finished(content='ok')").special
'DONE'
"""

from __future__ import annotations

import ast
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import gymnasium

from osworld_gym.actions.base import (
    ActionSet,
    ActionText,
    ParsedAction,
    Special,
    as_text,
    finish,
    special_of,
)
from osworld_gym.actions.restricted import MAX_SOURCE_CHARS, describe_node, parse_source
from osworld_gym.errors import ActionError
from osworld_gym.protocol.keys import canonical_key
from osworld_gym.protocol.primitives import (
    MAX_SCROLL,
    Click,
    DragTo,
    Hotkey,
    KeyDown,
    KeyUp,
    MoveTo,
    Press,
    Primitive,
    Scroll,
    TypeText,
    validate,
)

log = logging.getLogger(__name__)

CoordinateMode = Literal["smart_resize", "relative1000", "absolute"]
#: Most actions (blank-line separated calls) one answer may contain.
MAX_ACTIONS = 50
#: Qwen2.5-VL image-processor defaults.
IMAGE_FACTOR, MIN_PIXELS, MAX_PIXELS = 28, 56 * 56, 16384 * 28 * 28
#: The ``max_pixels`` ARPO and OSWorld's UI-TARS agent give the processor for screenshots.
ARPO_MAX_PIXELS = 2116800


def smart_resize(
    height: int,
    width: int,
    factor: int = IMAGE_FACTOR,
    min_pixels: int = MIN_PIXELS,
    max_pixels: int = MAX_PIXELS,
) -> tuple[int, int]:
    """The ``(height, width)`` Qwen2.5-VL resizes an image to: multiples of ``factor``, area within
    bounds.

    Each side is rounded to the nearest multiple of ``factor`` (a side under half a factor
    rounds to 0); if the area then exceeds ``max_pixels`` (or falls below ``min_pixels``, as it
    does for a 0) both sides are scaled by the same ratio and floored (ceiled) to multiples of
    ``factor``. This is transformers' rule (``qwen2_vl``'s image processor), so the frame the
    model sees and the frame its coordinates are mapped from are one function; the test in
    ``tests/arpo_trainer/test_smart_resize.py`` compares the two.

    >>> smart_resize(1080, 1920, max_pixels=2116800)
    (1092, 1932)
    >>> smart_resize(2160, 3840, max_pixels=2116800)
    (1064, 1932)
    >>> smart_resize(10, 10)
    (56, 56)
    >>> smart_resize(4, 640, max_pixels=1003520)  # 4 px rounds to 0, then both scale up
    (28, 728)
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {height}x{width}")
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"aspect ratio of {height}x{width} exceeds 200")
    h = round(height / factor) * factor
    w = round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


# -- points --------------------------------------------------------------------------------------

_N = r"\s*(\d{1,9}(?:\.\d{1,9})?)\s*"
_POINT_FORMS = [
    re.compile(rf"[(\[]?{_N},{_N}[)\]]?"),
    re.compile(rf"[(\[]{_N},{_N},{_N},{_N}[)\]]"),
    re.compile(r"<point>\s*(\d{1,9}(?:\.\d{1,9})?)[\s,]+(\d{1,9}(?:\.\d{1,9})?)\s*</point>"),
    re.compile(r"<bbox>" + r"[\s,]*(\d{1,9}(?:\.\d{1,9})?)" * 4 + r"\s*</bbox>"),
]
_BOX_TOKENS = re.compile(r"<\|box_start\|>|<\|box_end\|>")


def read_point(box: str) -> tuple[Fraction, Fraction]:
    """The point a UI-TARS box string denotes (a box's centre), in the model's frame.

    >>> [tuple(map(float, read_point(b))) for b in ("(10,20)", "[0,0,10,20]", "<point>3 4</point>")]
    [(10.0, 20.0), (5.0, 10.0), (3.0, 4.0)]
    """
    if len(box) > 200:
        raise ActionError("a box string is at most 200 characters")
    s = _BOX_TOKENS.sub("", box).strip()
    for form in _POINT_FORMS:
        m = form.fullmatch(s)
        if m:
            v = [Fraction(g) for g in m.groups()]
            return (v[0], v[1]) if len(v) == 2 else ((v[0] + v[2]) / 2, (v[1] + v[3]) / 2)
    raise ActionError(
        f"cannot read a point from {box[:60]!r}; write "
        "'<|box_start|>(x,y)<|box_end|>' with non-negative numbers"
    )


def _unescape(content: str) -> str:
    """UI-TARS content escapes: ``\\n``, ``\\t``, ``\\'``, ``\\"``, ``\\\\``; other backslashes
    stay."""
    table = {"n": "\n", "t": "\t", "'": "'", '"': '"', "\\": "\\"}
    return re.sub(r"\\([nt'\"\\])", lambda m: table[m.group(1)], content)


def _escape(content: str) -> str:
    return (
        content.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("'", "\\'")
    )


# -- the table -----------------------------------------------------------------------------------

Build = Callable[["UITarsActionSet", dict[str, str]], "list[Primitive] | Special"]
_BOX = "'<|box_start|>(x1,y1)<|box_end|>'"


@dataclass(frozen=True)
class UITarsAction:
    """One accepted call: keyword parameters, the prompt line (``None``: an alias), the builder."""

    name: str
    params: tuple[str, ...]
    required: tuple[str, ...]
    usage: str
    comment: str | None
    build: Build


def _clicker(button: str, clicks: int) -> Build:
    return lambda s, a: [Click(*s.point(a["start_box"]), button=button, clicks=clicks)]


def _drag(s: UITarsActionSet, a: dict[str, str]) -> list[Primitive]:
    return [MoveTo(*s.point(a["start_box"])), DragTo(*s.point(a["end_box"]))]


def _hotkey(s: UITarsActionSet, a: dict[str, str]) -> list[Primitive]:
    tokens = [p for t in a["key"].split() for p in (t.split("+") if len(t) > 1 else [t]) if p]
    if not tokens:
        raise ActionError("hotkey needs keys, e.g. hotkey(key='ctrl c')")
    return [Hotkey(tuple(canonical_key(t) for t in tokens))]


def _type(s: UITarsActionSet, a: dict[str, str]) -> list[Primitive]:
    text = a["content"]
    if text.endswith("\n"):
        stripped = text.rstrip("\n")
        return [TypeText(stripped), Press("enter")] if stripped else [Press("enter")]
    return [TypeText(text)]


def _scroll(s: UITarsActionSet, a: dict[str, str]) -> list[Primitive]:
    x, y = s.point(a["start_box"]) if "start_box" in a else (None, None)
    direction = a["direction"].strip().lower()
    n = s.scroll_amount
    steps = {"up": (n, 0), "down": (-n, 0), "left": (0, -n), "right": (0, n)}
    if direction not in steps:
        raise ActionError(
            f"scroll direction must be 'up', 'down', 'left' or 'right', got {a['direction'][:30]!r}"
        )
    dy, dx = steps[direction]
    return [Scroll(dy=dy, dx=dx, x=x, y=y)]


_ACTIONS = [
    UITarsAction(
        "click", ("start_box",), ("start_box",), f"click(start_box={_BOX})", "", _clicker("left", 1)
    ),
    UITarsAction(
        "left_double",
        ("start_box",),
        ("start_box",),
        f"left_double(start_box={_BOX})",
        "",
        _clicker("left", 2),
    ),
    UITarsAction(
        "right_single",
        ("start_box",),
        ("start_box",),
        f"right_single(start_box={_BOX})",
        "",
        _clicker("right", 1),
    ),
    UITarsAction(
        "drag",
        ("start_box", "end_box"),
        ("start_box", "end_box"),
        f"drag(start_box={_BOX}, end_box='<|box_start|>(x3,y3)<|box_end|>')",
        "",
        _drag,
    ),
    UITarsAction(
        "hotkey",
        ("key",),
        ("key",),
        "hotkey(key='')",
        "keys separated by spaces, lowercase, e.g. 'ctrl c'",
        _hotkey,
    ),
    UITarsAction(
        "type",
        ("content",),
        ("content",),
        "type(content='')",
        "write ' \" and newlines as \\', \\\" and \\n; end content with \\n to submit it",
        _type,
    ),
    UITarsAction(
        "scroll",
        ("start_box", "direction"),
        ("direction",),
        f"scroll(start_box={_BOX}, direction='down or up or right or left')",
        "",
        _scroll,
    ),
    UITarsAction(
        "wait", (), (), "wait()", "pause, then look at a fresh screenshot", lambda s, a: "WAIT"
    ),
    UITarsAction(
        "finished",
        ("content",),
        (),
        "finished(content='xxx')",
        "the task is complete; content escaped as in type()",
        lambda s, a: "DONE",
    ),
    # Accepted but not advertised in the UI-TARS computer prompt:
    UITarsAction(
        "left_single",
        ("start_box",),
        ("start_box",),
        "left_single(start_box=...)",
        None,
        _clicker("left", 1),
    ),
    UITarsAction(
        "select",
        ("start_box", "end_box"),
        ("start_box", "end_box"),
        "select(start_box=..., end_box=...)",
        None,
        _drag,
    ),
    UITarsAction(
        "hover",
        ("start_box",),
        ("start_box",),
        "hover(start_box=...)",
        None,
        lambda s, a: [MoveTo(*s.point(a["start_box"]))],
    ),
    UITarsAction(
        "press",
        ("key",),
        ("key",),
        "press(key=...)",
        None,
        lambda s, a: [Press(canonical_key(a["key"]))],
    ),
    UITarsAction(
        "keydown",
        ("key",),
        ("key",),
        "keydown(key=...)",
        None,
        lambda s, a: [KeyDown(canonical_key(a["key"]))],
    ),
    UITarsAction(
        "keyup",
        ("key",),
        ("key",),
        "keyup(key=...)",
        None,
        lambda s, a: [KeyUp(canonical_key(a["key"]))],
    ),
    UITarsAction("call_user", (), (), "call_user()", None, lambda s, a: "FAIL"),
    UITarsAction("error_env", (), (), "error_env()", None, lambda s, a: "FAIL"),
]
#: Every accepted call by name; the parser, :meth:`UITarsActionSet.describe` and tests read it.
UITARS_ACTIONS: dict[str, UITarsAction] = {a.name: a for a in _ACTIONS}
_KW_ALIASES = {"point": "start_box", "start_point": "start_box", "end_point": "end_box"}
_CONTENT_CALL = re.compile(r"(type|finished)\(\s*content\s*=\s*(['\"])(.*)\2\s*\)", re.DOTALL)
_ACTION_AT_LINE_START = re.compile(r"^[ \t]*Action:[ \t]*", re.MULTILINE)
_ACTION_ANYWHERE = re.compile(r"Action:[ \t]*")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def _thought(head: str) -> str | None:
    h = head.strip()
    for label in ("Thought:", "Action_Summary:"):
        if h.startswith(label):
            return h[len(label) :].strip() or None
    return h or None


def _split(body: str) -> list[str]:
    """Split on blank lines, re-joining pieces until each ends with ')' (content may hold blank
    lines)."""
    chunks: list[str] = []
    start = 0
    for m in _BLANK_LINE.finditer(body):
        if body[start : m.start()].rstrip().endswith(")"):
            chunks.append(body[start : m.start()].strip())
            start = m.end()
    chunks.append(body[start:].strip())
    return [c for c in chunks if c]


def _read_call(chunk: str) -> tuple[UITarsAction, dict[str, str]]:
    m = _CONTENT_CALL.fullmatch(chunk)
    if m:
        return UITARS_ACTIONS[m.group(1)], {"content": _unescape(m.group(3))}
    call = parse_source(chunk, mode="eval", what=f"the action {chunk[:40]!r}").body  # type: ignore[attr-defined]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        raise ActionError(
            f"each action must be one call such as click(start_box='(x,y)'), "
            f"not {describe_node(call)}"
        )
    spec = UITARS_ACTIONS.get(call.func.id)
    if spec is None:
        raise ActionError(
            f"unknown action {call.func.id[:40]!r}; use one of {', '.join(UITARS_ACTIONS)}"
        )
    if call.args:
        raise ActionError(f"{spec.name}: use keyword arguments, e.g. {spec.usage}")
    kwargs: dict[str, str] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise ActionError(f"{spec.name}: keyword unpacking (**) is not allowed")
        key = _KW_ALIASES.get(kw.arg, kw.arg)
        if key not in spec.params:
            takes = ", ".join(spec.params) or "no arguments"
            raise ActionError(f"{spec.name}() does not take {kw.arg[:40]!r}; it takes {takes}")
        if not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)):
            raise ActionError(
                f"{spec.name}: {kw.arg} must be a quoted string, not {describe_node(kw.value)}"
            )
        if key in kwargs:
            raise ActionError(f"{spec.name}: {key} given twice")
        kwargs[key] = kw.value.value
    missing = [p for p in spec.required if p not in kwargs]
    if missing:
        raise ActionError(f"{spec.name}: missing {', '.join(missing)}; write {spec.usage}")
    return spec, kwargs


_PROMPT_HEAD = """You control a computer through its graphical interface to carry out a task. \
Each turn you \
get the task, the actions taken so far and screenshots; reply with the next action.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space
"""
_PROMPT_TAIL = """
## Note
- Write `Thought` and `Action` in English.
- In `Thought`, make a short plan, then state in one sentence the next action and \
the element it targets.

## User Instruction
{instruction}
"""


class UITarsActionSet(ActionSet):
    """UI-TARS text actions (see the module docstring).

    Args:
        screen_size: ``(width, height)`` of the desktop.
        coordinate_mode: how model coordinates map to the screen.
        max_pixels / min_pixels / factor: the image processor's settings for ``"smart_resize"``;
            they must match what produced the screenshots the model saw (ARPO: 2116800).
        scroll_amount: wheel clicks per ``scroll`` action (ARPO: 5).
    """

    name = "uitars"

    def __init__(
        self,
        screen_size: tuple[int, int] = (1920, 1080),
        *,
        coordinate_mode: CoordinateMode = "smart_resize",
        max_pixels: int = ARPO_MAX_PIXELS,
        min_pixels: int = MIN_PIXELS,
        factor: int = IMAGE_FACTOR,
        scroll_amount: int = 5,
    ):
        super().__init__(screen_size)
        w, h = self.screen_size
        match coordinate_mode:
            case "smart_resize":
                fh, fw = smart_resize(h, w, factor, min_pixels, max_pixels)
            case "relative1000":
                fh, fw = 1000, 1000
            case "absolute":
                fh, fw = h, w
            case _:
                raise ValueError(
                    f"coordinate_mode must be 'smart_resize', 'relative1000' or 'absolute', "
                    f"got {coordinate_mode!r}"
                )
        if (
            isinstance(scroll_amount, bool)
            or not isinstance(scroll_amount, int)
            or not 1 <= scroll_amount <= MAX_SCROLL
        ):
            raise ValueError(
                f"scroll_amount must be an int in [1, {MAX_SCROLL}], got {scroll_amount!r}"
            )
        self.coordinate_mode = coordinate_mode
        self.frame = (fw, fh)
        self.scroll_amount = scroll_amount

    def point(self, box: str) -> tuple[int, int]:
        """Screen pixel for a box string in the model's frame."""
        mx, my = read_point(box)
        fw, fh = self.frame
        if mx > fw or my > fh:
            raise ActionError(
                f"point ({float(mx):g},{float(my):g}) lies outside the model's "
                f"{fw}x{fh} image frame"
            )
        w, h = self.screen_size
        return (
            min(w - 1, math.floor(mx * w / fw + Fraction(1, 2))),
            min(h - 1, math.floor(my * h / fh + Fraction(1, 2))),
        )

    def box(self, x: int, y: int) -> str:
        """The box string that :meth:`point` maps back to ``(x, y)``."""
        (w, h), (fw, fh) = self.screen_size, self.frame
        mx, my = (
            math.floor(Fraction(x * fw, w) + Fraction(1, 2)),
            math.floor(Fraction(y * fh, h) + Fraction(1, 2)),
        )
        return f"<|box_start|>({mx},{my})<|box_end|>"

    def names(self) -> tuple[str, ...]:
        return tuple(UITARS_ACTIONS)

    def describe(self) -> str:
        """The UI-TARS computer-use prompt, with an ``{instruction}`` slot (see :meth:`prompt`)."""
        lines = [
            a.usage + (f"  # {a.comment}" if a.comment else "")
            for a in _ACTIONS
            if a.comment is not None
        ]
        extra = ", ".join(a.usage for a in _ACTIONS if a.comment is None)
        lines.append(f"(also understood: {extra})")
        if self.coordinate_mode == "relative1000":
            lines.append("Coordinates are relative, from 0 to 1000 on each axis of the screenshot.")
        return _PROMPT_HEAD + "\n".join(lines) + "\n" + _PROMPT_TAIL

    def prompt(self, instruction: str) -> str:
        """:meth:`describe` with the task instruction filled in."""
        return self.describe().replace("{instruction}", instruction)

    def parse(self, action: str | dict) -> ParsedAction:
        if not isinstance(action, str):
            raise ActionError(f"a UI-TARS action must be text, got {type(action).__name__}")
        action = as_text(action)
        if len(action) > MAX_SOURCE_CHARS:
            raise ActionError(
                f"the answer is {len(action)} characters long; the limit is {MAX_SOURCE_CHARS}"
            )
        if "\x00" in action:
            raise ActionError("the answer contains a null byte")
        if (special := special_of(action)) is not None:
            return ParsedAction((), special, action)
        m = _ACTION_AT_LINE_START.search(action) or _ACTION_ANYWHERE.search(action)
        if m is None:
            raise ActionError(
                "no 'Action:' found; answer with 'Thought: ...' and then 'Action: ...'"
            )
        thought = _thought(action[: m.start()])
        chunks = _split(action[m.end() :])
        if not chunks:
            raise ActionError(
                "'Action:' is followed by nothing; write e.g. Action: click(start_box='(x,y)')"
            )
        if len(chunks) > MAX_ACTIONS:
            raise ActionError(f"{len(chunks)} actions in one answer; the limit is {MAX_ACTIONS}")
        prims: list[Primitive] = []
        special: Special | None = None
        for chunk in chunks:
            if special is not None:
                raise ActionError(
                    "wait(), finished(), call_user() and error_env() must be the last action"
                )
            spec, kwargs = _read_call(chunk)
            result = spec.build(self, kwargs)
            if isinstance(result, str):
                special = result  # type: ignore[assignment]
            else:
                prims.extend(result)
        log.debug(
            "uitars action: %d calls -> %d primitives, special=%s", len(chunks), len(prims), special
        )
        return finish(prims, special=special, raw=action, thought=thought)

    def render(self, parsed: ParsedAction) -> str:
        calls: list[str] = []
        prims = [validate(p) for p in parsed.primitives]
        i = 0
        while i < len(prims):
            p, nxt = prims[i], prims[i + 1] if i + 1 < len(prims) else None
            match p, nxt:
                case MoveTo(x, y), DragTo(ex, ey, "left"):
                    calls.append(
                        f"drag(start_box='{self.box(x, y)}', end_box='{self.box(ex, ey)}')"
                    )
                    i += 1
                case TypeText(text), Press("enter", 1) if not text.endswith("\n"):
                    calls.append(f"type(content='{_escape(text)}\\n')")
                    i += 1
                case _:
                    calls.append(self._render_one(p))
            i += 1
        special_call = {"WAIT": "wait()", "DONE": "finished(content='')", "FAIL": "call_user()"}
        if parsed.special is not None:
            calls.append(special_call[parsed.special])
        if not calls:
            raise ActionError("nothing to render")
        head = f"Thought: {parsed.thought}\n" if parsed.thought else ""
        return head + "Action: " + "\n\n".join(calls)

    def _render_one(self, p: Primitive) -> str:
        n = self.scroll_amount
        match p:
            case Click(x, y, "left", 1) if x is not None and y is not None:
                return f"click(start_box='{self.box(x, y)}')"
            case Click(x, y, "left", 2) if x is not None and y is not None:
                return f"left_double(start_box='{self.box(x, y)}')"
            case Click(x, y, "right", 1) if x is not None and y is not None:
                return f"right_single(start_box='{self.box(x, y)}')"
            case MoveTo(x, y):
                return f"hover(start_box='{self.box(x, y)}')"
            case Hotkey(keys):
                names = {" ": "space", "\n": "enter", "\r": "enter", "\t": "tab"}
                return f"hotkey(key={' '.join(names.get(k, k) for k in keys)!r})"
            case Press(key, 1):
                return f"press(key={key!r})"
            case KeyDown(key):
                return f"keydown(key={key!r})"
            case KeyUp(key):
                return f"keyup(key={key!r})"
            case TypeText(text) if not text.endswith("\n"):
                return f"type(content='{_escape(text)}')"
            case Scroll(dy, dx, x, y) if (abs(dy), abs(dx)) in ((n, 0), (0, n)):
                direction = {n: "up", -n: "down"}[dy] if dy else {n: "right", -n: "left"}[dx]
                at = f"start_box='{self.box(x, y)}', " if x is not None and y is not None else ""
                return f"scroll({at}direction='{direction}')"
        raise ActionError(f"UI-TARS actions cannot express {p!r}")

    def space(self) -> gymnasium.spaces.Space:
        return ActionText(self, MAX_SOURCE_CHARS)
