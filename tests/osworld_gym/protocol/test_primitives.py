"""The primitive action records: the only agent-derived data that ever reaches a desktop."""

from __future__ import annotations

import pytest
from osworld_gym.errors import ActionError
from osworld_gym.protocol import primitives as P
from osworld_gym.protocol.keys import KEY_NAMES, X_KEYSYM, canonical_key

VALID = [
    P.MoveTo(1, 2),
    P.Click(),
    P.Click(5, 6, "middle", 3),
    P.MouseDown("right", 1, 1),
    P.MouseUp(),
    P.DragTo(100, 200),
    P.Scroll(dy=-3, dx=2, x=4, y=5),
    P.KeyDown("ctrl"),
    P.KeyUp("shift"),
    P.Press("enter", 2),
    P.Hotkey(("ctrl", "alt", "t")),
    P.TypeText("héllo\n✓ 🙂"),
    P.Wait(0.5),
]


@pytest.mark.parametrize("prim", VALID, ids=lambda p: type(p).__name__)
def test_every_primitive_round_trips_through_json(prim):
    assert P.from_dict(P.to_dict(prim)) == prim


@pytest.mark.parametrize(
    "bad, needle",
    [
        ({"type": "click", "x": 1}, "both x and y"),
        ({"type": "click", "x": 1, "y": 2, "clicks": 9}, "clicks"),
        ({"type": "click", "x": float("nan"), "y": 2}, "finite"),
        ({"type": "click", "x": True, "y": 2}, "number"),
        ({"type": "move_to", "x": 10**9, "y": 0}, "out of range"),
        ({"type": "press", "key": "launch_missiles"}, "unknown key"),
        ({"type": "hotkey", "keys": []}, "non-empty"),
        ({"type": "hotkey", "keys": "ctrl"}, "list"),
        ({"type": "type_text", "text": "a\x00b"}, "control characters"),
        ({"type": "type_text", "text": "x" * (P.MAX_TEXT_CHARS + 1)}, "limit"),
        ({"type": "wait", "seconds": 1e9}, "out of range"),
        ({"type": "exec", "code": "print(1)"}, "unknown primitive"),
        ({"type": "click", "x": 1, "y": 2, "command": "rm -rf /"}, "does not take"),
        (["click"], "JSON object"),
        ({"type": "click", "button": "nose"}, "button"),
    ],
)
def test_malformed_primitives_are_action_errors_naming_the_problem(bad, needle):
    with pytest.raises(ActionError, match=needle):
        P.from_dict(bad)


def test_float_coordinates_are_rounded_to_pixels():
    assert P.from_dict({"type": "move_to", "x": 10.6, "y": 3.2}) == P.MoveTo(11, 3)


def test_pyautogui_rendering_quotes_every_string():
    code = P.to_pyautogui_code([P.TypeText("'); import os; os.system('x"), P.Hotkey(("ctrl", "s"))])
    assert code.splitlines() == [
        "pyautogui.write(\"'); import os; os.system('x\")",
        "pyautogui.hotkey('ctrl', 's')",
    ]


def test_key_aliases_map_to_pyautogui_names_with_a_keysym():
    for alias, canon in [
        ("Control", "ctrl"),
        ("ESC", "esc"),
        ("Page_Down", "pagedown"),
        ("super", "win"),
        ("ArrowLeft", "left"),
        ("F11", "f11"),
        ("Return", "return"),
    ]:
        assert canonical_key(alias) == canon
        assert canon in KEY_NAMES and X_KEYSYM[canon]
    assert canonical_key("A") == "A"  # single characters keep their case (shift+a)
