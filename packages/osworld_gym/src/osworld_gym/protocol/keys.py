"""Key names: pyautogui's vocabulary, the aliases models emit, and the X keysym behind each.

One table serves the parsers (is this a key?) and the guest server (which keysym to press).

>>> canonical_key("Control"), canonical_key("ArrowUp"), canonical_key("A")
('ctrl', 'up', 'A')
>>> X_KEYSYM["ctrl"], X_KEYSYM["enter"], X_KEYSYM["a"]
('Control_L', 'Return', 'a')
"""

from __future__ import annotations

import string

from osworld_gym.errors import ActionError

# Named (multi-character) keys of pyautogui's KEYBOARD_KEYS with the X keysym each presses.
_NAMED: dict[str, str] = {
    "alt": "Alt_L",
    "altleft": "Alt_L",
    "altright": "Alt_R",
    "ctrl": "Control_L",
    "ctrlleft": "Control_L",
    "ctrlright": "Control_R",
    "shift": "Shift_L",
    "shiftleft": "Shift_L",
    "shiftright": "Shift_R",
    "win": "Super_L",
    "winleft": "Super_L",
    "winright": "Super_R",
    "command": "Super_L",
    "option": "Alt_L",
    "optionleft": "Alt_L",
    "optionright": "Alt_R",
    "fn": "Super_R",
    "enter": "Return",
    "return": "Return",
    "tab": "Tab",
    "space": "space",
    "backspace": "BackSpace",
    "delete": "Delete",
    "del": "Delete",
    "insert": "Insert",
    "esc": "Escape",
    "escape": "Escape",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "Prior",
    "pagedown": "Next",
    "pgup": "Prior",
    "pgdn": "Next",
    "capslock": "Caps_Lock",
    "numlock": "Num_Lock",
    "scrolllock": "Scroll_Lock",
    "pause": "Pause",
    "print": "Print",
    "printscreen": "Print",
    "prntscrn": "Print",
    "prtsc": "Print",
    "prtscr": "Print",
    "apps": "Menu",
    "menu": "Menu",
    "clear": "Clear",
    "help": "Help",
    "select": "Select",
    "execute": "Execute",
    "sleep": "XF86Sleep",
    "add": "KP_Add",
    "subtract": "KP_Subtract",
    "multiply": "KP_Multiply",
    "divide": "KP_Divide",
    "decimal": "KP_Decimal",
    "separator": "KP_Separator",
    "volumeup": "XF86AudioRaiseVolume",
    "volumedown": "XF86AudioLowerVolume",
    "volumemute": "XF86AudioMute",
    "playpause": "XF86AudioPlay",
    "stop": "XF86AudioStop",
    "nexttrack": "XF86AudioNext",
    "prevtrack": "XF86AudioPrev",
    "browserback": "XF86Back",
    "browserforward": "XF86Forward",
    "browserrefresh": "XF86Refresh",
    "browserhome": "XF86HomePage",
    "browsersearch": "XF86Search",
    "browserstop": "XF86Stop",
    "browserfavorites": "XF86Favorites",
    "launchmail": "XF86Mail",
    "launchmediaselect": "XF86AudioMedia",
    "launchapp1": "XF86Launch0",
    "launchapp2": "XF86Launch1",
    "hangul": "Hangul",
    "hanguel": "Hangul",
    "hanja": "Hangul_Hanja",
    "kana": "Katakana",
    "kanji": "Kanji",
    "junja": "Hangul_Jeonja",
    "final": "Hangul_End",
    "modechange": "Mode_switch",
    "convert": "Henkan",
    "nonconvert": "Muhenkan",
    "accept": "Execute",
    "yen": "yen",
    **{f"f{i}": f"F{i}" for i in range(1, 25)},
    **{f"num{i}": f"KP_{i}" for i in range(10)},
}

# Spellings models produce for the same keys (UI-TARS, Claude, xdotool habits).
_ALIASES: dict[str, str] = {
    "control": "ctrl",
    "ctl": "ctrl",
    "lctrl": "ctrl",
    "rctrl": "ctrlright",
    "control_l": "ctrl",
    "control_r": "ctrlright",
    "super": "win",
    "meta": "win",
    "cmd": "command",
    "windows": "win",
    "super_l": "win",
    "alt_l": "alt",
    "alt_r": "altright",
    "shift_l": "shift",
    "shift_r": "shiftright",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
    "page_up": "pageup",
    "page_down": "pagedown",
    "prior": "pageup",
    "next": "pagedown",
    "back_space": "backspace",
    "bksp": "backspace",
    "ins": "insert",
    "spacebar": "space",
    "caps_lock": "capslock",
    "num_lock": "numlock",
    "scroll_lock": "scrolllock",
    "kp_enter": "enter",
}

# Printable ASCII characters and their keysym names.
_CHAR_KEYSYM: dict[str, str] = {
    **{c: c for c in string.ascii_letters + string.digits},
    " ": "space",
    "!": "exclam",
    '"': "quotedbl",
    "#": "numbersign",
    "$": "dollar",
    "%": "percent",
    "&": "ampersand",
    "'": "apostrophe",
    "(": "parenleft",
    ")": "parenright",
    "*": "asterisk",
    "+": "plus",
    ",": "comma",
    "-": "minus",
    ".": "period",
    "/": "slash",
    ":": "colon",
    ";": "semicolon",
    "<": "less",
    "=": "equal",
    ">": "greater",
    "?": "question",
    "@": "at",
    "[": "bracketleft",
    "\\": "backslash",
    "]": "bracketright",
    "^": "asciicircum",
    "_": "underscore",
    "`": "grave",
    "{": "braceleft",
    "|": "bar",
    "}": "braceright",
    "~": "asciitilde",
    "\n": "Return",
    "\r": "Return",
    "\t": "Tab",
}

#: canonical key name -> X keysym name
X_KEYSYM: dict[str, str] = {**_NAMED, **_CHAR_KEYSYM}

#: pyautogui's KEYBOARD_KEYS, in our canonical spelling (the action space the prompt describes).
KEY_NAMES: frozenset[str] = frozenset(X_KEYSYM)


def canonical_key(name: object) -> str:
    """Map a key name (any common spelling) to its canonical pyautogui name; else ActionError."""
    if not isinstance(name, str) or not name:
        raise ActionError(f"a key name must be a non-empty string, got {name!r}")
    if len(name) == 1:
        if name in _CHAR_KEYSYM:
            return name
        raise ActionError(
            f"unknown key {name!r}; to enter arbitrary characters use typing, not a key press"
        )
    low = name.strip().lower()
    low = _ALIASES.get(low, low)
    if low in _NAMED:
        return low
    if len(low) == 1 and low in _CHAR_KEYSYM:
        return low
    raise ActionError(
        f"unknown key {name!r}; valid keys are pyautogui's names such as "
        "'enter', 'ctrl', 'shift', 'alt', 'tab', 'esc', 'up', 'f5', 'a'"
    )
