"""Gymnasium spaces for desktop observations and actions.

:class:`UnicodeText` is a :class:`gymnasium.spaces.Text` whose members are *any* Unicode string
within the length bounds (instructions and model outputs are not alphanumeric). Sampling draws
from the printable Basic Multilingual Plane; membership accepts every code point except lone
surrogates, which cannot be encoded and so cannot come out of a tokenizer either.

>>> space = UnicodeText(max_length=32)
>>> space.contains("Öffne die Datei ✓ 🙂")
True
>>> space.contains("x" * 33), space.contains(b"bytes")
(False, False)
>>> s = space.sample(); isinstance(s, str) and space.contains(s)
True
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

import numpy as np
from gymnasium.spaces import Text


@cache
def _printable_bmp() -> str:
    chars = [
        chr(c) for c in range(0x20, 0xFFFF) if not 0xD800 <= c <= 0xDFFF and chr(c).isprintable()
    ]
    return "\n\t" + "".join(chars)


@cache
def _charset_tables() -> dict[str, Any]:
    """Text's lookup tables for the sampling charset, built once and shared by every space."""
    proto = Text(1, charset=_printable_bmp())
    return {k: getattr(proto, k) for k in _CHARSET_ATTRS}


_CHARSET_ATTRS = ("_char_set", "_char_list", "_char_index", "_char_str")


class UnicodeText(Text):
    """Text over all of Unicode (see the module docstring).

    The 60k-character sampling tables are shared between instances and left out of pickles and
    copies (vector envs and Ray ship spaces between processes).
    """

    def __init__(
        self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None
    ):
        super().__init__(max_length, min_length=min_length, charset="a", seed=seed)
        self.__dict__.update(_charset_tables())

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in _CHARSET_ATTRS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.update(_charset_tables())

    def contains(self, x: Any) -> bool:
        if not isinstance(x, str) or not self.min_length <= len(x) <= self.max_length:
            return False
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    def __hash__(self) -> int:  # pragma: no cover - spaces are rarely hashed
        return hash((type(self), self.min_length, self.max_length))


#: longest instruction / accessibility tree the observation space admits
MAX_INSTRUCTION_CHARS = 8192
MAX_A11Y_CHARS = sys.maxsize // 2
