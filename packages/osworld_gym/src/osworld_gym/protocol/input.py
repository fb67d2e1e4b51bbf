"""How input reaches an X desktop, for every backend that injects it: pointer button numbers,
keysyms, and the pacing between events.

The guest injects with XTest and the VNC provider sends RFB events; both press X keysyms and
X button numbers, and both wait the same pauses (which events, and where the pauses go:
:mod:`.events`). Keysym names are resolved with python-xlib's keysym tables (pure data, no X
connection), imported on first use.

>>> X_BUTTONS["right"], [hex(char_keysym(c)) for c in ("a", "é", "Ω", "\\n")]
(3, ['0x61', '0xe9', '0x10003a9', '0xff0d'])
>>> hex(key_keysym("ctrl")), hex(key_keysym("f5"))
('0xffe3', '0xffc2')
"""

from __future__ import annotations

import functools
from types import ModuleType

from osworld_gym.errors import ActionError
from osworld_gym.protocol.keys import X_KEYSYM

#: X pointer button numbers of the button names in :data:`~.primitives.BUTTON_NAMES`.
X_BUTTONS = {"left": 1, "middle": 2, "right": 3}

#: Pause after a button press when the window manager grabs clicks synchronously; also used
#: by the VNC provider, whose desktop's window manager we do not know.
BUTTON_SETTLE_S = 0.025
#: Pause after each wheel click (never grabbed by the window manager; keeps them in order).
WHEEL_SETTLE_S = 0.005
#: Pause between the clicks of a multi-click (well below any double-click interval).
CLICK_GAP_S = 0.03
#: A drag moves the pointer in this many steps, this far apart.
DRAG_STEPS = 12
DRAG_STEP_S = 0.015
#: Pause before pressing again the key just released (server timestamps have 1 ms resolution).
REPEAT_GAP_S = 0.004

#: Pause after each call of an action before the next one, where the desktop's reaction cannot
#: be seen: pyautogui's own ``PAUSE``, which OSWorld's VM waits after every pyautogui call
#: (its agents' code runs in a fresh ``python -c``, where ``PAUSE`` is pyautogui's default).
CALL_PAUSE_S = 0.1
#: Where it can be seen (our guest's settle signal), the pause between two calls lasts until
#: the desktop has reacted to the first, at most this long after it began: an app may defer
#: what a key does (Impress starts text editing on Return from a posted event, which GTK3
#: LibreOffice runs only once no X input is pending), and keys sent before then reach the
#: app's old state. 0.1 s was too short on a loaded machine (Impress, load average 8).
PACE_MAX_S = 1.0
#: At most this long in all is spent pacing one request's calls (an agent that keeps its
#: desktop busy must not make every call of a 50-call action wait ``PACE_MAX_S``).
PACE_BUDGET_S = 5.0

_RETURN, _TAB, _NO_SYMBOL = 0xFF0D, 0xFF09, 0


@functools.cache
def _xk() -> ModuleType:
    from Xlib import XK

    for group in ("xf86", "korean", "katakana", "latin2", "latin3", "latin4", "greek", "cyrillic"):
        XK.load_keysym_group(group)
    return XK


def char_keysym(ch: str) -> int:
    """The X keysym that types ``ch`` (Latin-1 keysyms equal the code point; others are
    Unicode keysyms)."""
    if ch in "\n\r":
        return _RETURN
    if ch == "\t":
        return _TAB
    cp = ord(ch)
    if 0x20 <= cp <= 0x7E or 0xA0 <= cp <= 0xFF:
        return cp
    return 0x01000000 | cp


def key_keysym(name: str) -> int:
    """Keysym of a canonical key name from :data:`osworld_gym.protocol.keys.X_KEYSYM`."""
    sym_name = X_KEYSYM.get(name)
    if sym_name is None:
        raise ActionError(f"unknown key {name!r}")
    xk = _xk()
    ks = xk.string_to_keysym(sym_name)
    if ks == _NO_SYMBOL and sym_name.startswith("XF86"):  # python-xlib spells them XF86_Sleep
        ks = xk.string_to_keysym("XF86_" + sym_name[4:])
    if ks == _NO_SYMBOL and len(sym_name) == 1:
        ks = char_keysym(sym_name)
    if ks == _NO_SYMBOL:
        raise ActionError(f"key {name!r} has no X keysym {sym_name!r} on this system")
    return ks
