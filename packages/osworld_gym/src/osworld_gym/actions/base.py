"""What every action set shares: the parsed form, the interface, the text action space.

An *action set* is one source of truth for a way agents write actions: the prompt text that
teaches it (:meth:`ActionSet.describe`), the parser (:meth:`ActionSet.parse`, for untrusted
input), the Gymnasium space (:meth:`ActionSet.space`) and a canonical rendering back into its own
syntax (:meth:`ActionSet.render`, for histories and logs). Parsing yields a
:class:`ParsedAction`: validated primitives to execute, then an optional special signal.

>>> ParsedAction((Click(10, 20),), raw="pyautogui.click(10, 20)").primitives
(Click(x=10, y=20, button='left', clicks=1),)
>>> special_of("  DONE\\n"), special_of("done")
('DONE', None)
"""

from __future__ import annotations

import logging
import string
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import gymnasium
import numpy as np

from osworld_gym.errors import ActionError
from osworld_gym.protocol.keys import KEY_NAMES
from osworld_gym.protocol.primitives import (
    BUTTON_NAMES,
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
    validate,
)
from osworld_gym.spaces import UnicodeText

log = logging.getLogger(__name__)

Special = Literal["DONE", "FAIL", "WAIT"]
#: The special signals every action set accepts (as exact strings, surrounding whitespace ok).
SPECIALS: tuple[Special, ...] = ("WAIT", "DONE", "FAIL")


@dataclass(frozen=True)
class ParsedAction:
    """One agent action, parsed and validated.

    Attributes:
        primitives: what to execute, in order (may be empty for a pure special).
        special: ``"DONE"``/``"FAIL"`` end the episode, ``"WAIT"`` sleeps; applies after the
            primitives.
        raw: the agent's output exactly as received.
        thought: the model's reasoning, when the syntax carries one (UI-TARS ``Thought:``).
    """

    primitives: tuple[Primitive, ...]
    special: Special | None = None
    raw: str | dict = ""
    thought: str | None = None


def special_of(text: str) -> Special | None:
    """``"WAIT"``/``"DONE"``/``"FAIL"`` if ``text`` is exactly that (whitespace aside), else
    ``None``."""
    s = text.strip()
    return s if s in SPECIALS else None  # type: ignore[return-value]


def as_text(action: str) -> str:
    """``action`` as an exact ``str`` (a ``str`` subclass could run code in its methods).

    >>> type(as_text(type("S", (str,), {})("x"))) is str
    True
    """
    return action if type(action) is str else str.__str__(action)


def finish(
    primitives: list[Primitive] | tuple[Primitive, ...],
    *,
    special: Special | None = None,
    raw: str | dict = "",
    thought: str | None = None,
) -> ParsedAction:
    """Validate every primitive and build the :class:`ParsedAction`; an action doing nothing is an
    error.

    >>> finish([MoveTo(1.4, 2.6)]).primitives
    (MoveTo(x=1, y=3),)
    >>> finish([])
    Traceback (most recent call last):
    ...
    osworld_gym.errors.ActionError: the action does nothing; give at least one action or ...
    """
    prims = tuple(validate(p) for p in primitives)
    if not prims and special is None:
        raise ActionError("the action does nothing; give at least one action or WAIT/DONE/FAIL")
    return ParsedAction(prims, special, raw, thought)


class ActionSet(ABC):
    """Prompt text, parser, space and renderer for one action syntax (see the module docstring).

    Args:
        screen_size: ``(width, height)`` of the desktop in pixels.
    """

    #: registry name (``make_action_set(name)``)
    name: ClassVar[str]

    def __init__(self, screen_size: tuple[int, int] = (1920, 1080)):
        w, h = screen_size
        if not (isinstance(w, int) and isinstance(h, int) and w > 0 and h > 0):
            raise ValueError(
                f"screen_size must be two positive ints (width, height), got {screen_size!r}"
            )
        self.screen_size = (w, h)

    @abstractmethod
    def describe(self) -> str:
        """Prompt text that teaches a model this action syntax."""

    @abstractmethod
    def parse(self, action: str | dict) -> ParsedAction:
        """Parse untrusted agent output; :class:`ActionError` with a helpful message if invalid."""

    @abstractmethod
    def space(self) -> gymnasium.spaces.Space:
        """The Gymnasium action space; its ``sample()`` is always a valid action of this set."""

    @abstractmethod
    def render(self, parsed: ParsedAction) -> str | dict:
        """Canonical form of ``parsed`` in this set's own syntax; ``parse(render(p))`` gives ``p``
        back.

        Raises :class:`ActionError` for primitives this syntax cannot express.
        """

    @abstractmethod
    def names(self) -> tuple[str, ...]:
        """Every function / action type the parser accepts (read from the parser's own table)."""

    def sample(self, rng: np.random.Generator) -> ParsedAction:
        """A random action this set can express (used by :meth:`space`'s ``sample``)."""
        for _ in range(1000):
            if rng.random() < 0.08:
                parsed = ParsedAction((), SPECIALS[int(rng.integers(len(SPECIALS)))])
            else:
                parsed = ParsedAction((random_primitive(rng, self.screen_size),))
            try:
                self.render(parsed)
            except ActionError:
                continue
            return parsed
        raise RuntimeError(
            f"{self.name}: could not sample an expressible action"
        )  # pragma: no cover

    def __repr__(self) -> str:
        return f"{type(self).__name__}(screen_size={self.screen_size})"


class ActionText(UnicodeText):
    """The action space of a text action set: any Unicode string up to ``max_length`` characters.

    ``sample()`` (without a mask) draws a random *valid* action in the set's syntax, so
    ``env.action_space.sample()`` drives a random agent; with a mask it samples characters like
    :class:`gymnasium.spaces.Text`.
    """

    def __init__(
        self,
        action_set: ActionSet,
        max_length: int,
        *,
        seed: int | np.random.Generator | None = None,
    ):
        super().__init__(max_length, min_length=1, seed=seed)
        self.action_set = action_set

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        text = self.action_set.render(self.action_set.sample(self.np_random))
        assert isinstance(text, str)
        return text

    def __repr__(self) -> str:
        return f"ActionText({self.action_set.name!r}, max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ActionText)
            and self.max_length == other.max_length
            and repr(self.action_set) == repr(other.action_set)
            and self.action_set.name == other.action_set.name
        )

    def __hash__(self) -> int:  # pragma: no cover - spaces are rarely hashed
        return hash((type(self), self.action_set.name, self.max_length))


_SAMPLE_CHARS = string.ascii_letters + string.digits + " .,-_/:'\"<>()\n" + "äéß中文ё🙂"
_SAMPLE_KEYS = tuple(sorted(KEY_NAMES))
_COMMON_KEYS = (
    "enter",
    "tab",
    "esc",
    "backspace",
    "delete",
    "up",
    "down",
    "left",
    "right",
    "home",
    "end",
    "pageup",
    "pagedown",
    "f5",
    "a",
    "c",
    "v",
    "x",
    "z",
    "s",
    "t",
)
_MODIFIERS = ("ctrl", "shift", "alt", "win")


def random_primitive(rng: np.random.Generator, screen_size: tuple[int, int]) -> Primitive:
    """A random valid primitive on a ``screen_size`` screen (for space sampling and tests).

    >>> p = random_primitive(np.random.default_rng(0), (1920, 1080))
    >>> validate(p) == p
    True
    """
    w, h = screen_size

    def xy() -> tuple[int, int]:
        return int(rng.integers(w)), int(rng.integers(h))

    def key() -> str:
        return (
            _COMMON_KEYS[int(rng.integers(len(_COMMON_KEYS)))]
            if rng.random() < 0.7
            else _SAMPLE_KEYS[int(rng.integers(len(_SAMPLE_KEYS)))]
        )

    def button() -> str:
        return "left" if rng.random() < 0.6 else BUTTON_NAMES[int(rng.integers(len(BUTTON_NAMES)))]

    kind = int(rng.integers(12))
    match kind:
        case 0:
            return MoveTo(*xy())
        case 1:
            at = xy() if rng.random() < 0.9 else (None, None)
            return Click(*at, button=button(), clicks=int(rng.choice([1, 1, 1, 2, 3])))
        case 2:
            return MouseDown(button()) if rng.random() < 0.5 else MouseUp(button())
        case 3:
            return DragTo(*xy(), button="left" if rng.random() < 0.8 else button())
        case 4:
            at = xy() if rng.random() < 0.5 else (None, None)
            step = int(rng.choice([5, 5, 5, 1, 3, 10]))
            if rng.random() < 0.7:
                return Scroll(dy=step * int(rng.choice([-1, 1])), x=at[0], y=at[1])
            return Scroll(dx=step * int(rng.choice([-1, 1])), x=at[0], y=at[1])
        case 5:
            return KeyDown(key()) if rng.random() < 0.5 else KeyUp(key())
        case 6 | 7:
            return Press(key(), presses=1 if rng.random() < 0.85 else int(rng.integers(1, 5)))
        case 8:
            mods = rng.choice(_MODIFIERS, size=int(rng.integers(1, 3)), replace=False)
            return Hotkey((*map(str, mods), _COMMON_KEYS[int(rng.integers(len(_COMMON_KEYS)))]))
        case 9 | 10:
            n = int(rng.integers(0, 24))
            text = "".join(_SAMPLE_CHARS[int(i)] for i in rng.integers(len(_SAMPLE_CHARS), size=n))
            return TypeText(text.rstrip("\n") or "x")
        case _:
            return Wait(float(rng.choice([0.5, 1.0, 2.0])))
