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
    chars = [chr(c) for c in range(0x20, 0xFFFF) if not 0xD800 <= c <= 0xDFFF and chr(c).isprintable()]
    return "\n\t" + "".join(chars)


class UnicodeText(Text):
    """Text over all of Unicode (see the module docstring)."""

    def __init__(self, max_length: int, *, min_length: int = 0,
                 seed: int | np.random.Generator | None = None):
        super().__init__(max_length, min_length=min_length, charset=_printable_bmp(), seed=seed)

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
        return (isinstance(other, UnicodeText) and self.min_length == other.min_length
                and self.max_length == other.max_length)

    def __hash__(self) -> int:  # pragma: no cover - spaces are rarely hashed
        return hash((type(self), self.min_length, self.max_length))


#: longest instruction / accessibility tree the observation space admits
MAX_INSTRUCTION_CHARS = 8192
MAX_A11Y_CHARS = sys.maxsize // 2
