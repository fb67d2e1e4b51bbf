"""The calls of one action reach an app as pyautogui's would: each after the app has reacted to
the one before (issue 25).

On OSWorld's VM an agent's pyautogui code pauses 0.1 s after every call. Sent back to back,
``press('enter'); write('a\\nb')`` on a selected Impress placeholder gave ``ab``: Impress
starts text editing on Return from a posted event, GTK3 LibreOffice runs posted events only
once no X input is pending, and every Return typed before then was taken for "start editing".
The guest now waits between calls until the desktop has reacted (``guest/settle_signal.Pacer``),
and inside one ``write`` after each Tab and Return that more keys follow (GTK3 Calc moves its
cell cursor for a Tab from a posted event too).
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import openpyxl
import pytest

pytestmark = [pytest.mark.desktop, pytest.mark.slow, pytest.mark.timeout(600)]

#: Two slides of title and bullets (the built-in decks' generator); Impress opens the first.
DECK = "builtin-asset://office_pptx?deck=travel&seed=1&slides=2"
#: A small table in A1:D3 (the built-in workbooks' generator); F1:H2 is empty.
SHEET = "builtin-asset://office_xlsx?data=sales&seed=1&rows=2"


def _task(app: str, config: list[dict]) -> dict:
    return {
        "id": f"pacing-{app}",
        "instruction": "type",
        "related_apps": [f"libreoffice_{app}"],
        "config": config,
        "evaluator": {"func": "infeasible"},
    }


@pytest.fixture(scope="module")
def env() -> Iterator:
    import gymnasium as gym
    import osworld_gym  # noqa: F401 - registers OSWorld-v0

    e = gym.make("OSWorld-v0", provider="local", tasks=None, provider_kwargs={"profile": "ubuntu"})
    try:
        yield e
    finally:
        e.close()


def _act(env, actions: list[str]) -> list[dict]:
    infos = []
    for action in actions:
        _, _, _, _, info = env.step(action)
        assert info["action_error"] is None and info["infra_error"] is None, info
        infos.append(info)
    return infos


def _copied_text(env) -> str:
    """Select all of what has the focus, copy it, and read the clipboard (LibreOffice offers it
    a moment after Ctrl+C: read until it answers)."""
    _act(env, ["pyautogui.hotkey('ctrl', 'a')", "pyautogui.hotkey('ctrl', 'c')"])
    client = env.unwrapped.provider.start()
    script = "for i in 1 2 3 4 5; do timeout 5 xclip -o -selection clipboard && exit; sleep 1; done"
    return client.execute(["bash", "-c", script])["output"]


def test_return_right_after_the_return_that_starts_editing_an_impress_placeholder(env):
    """Ctrl+M adds a title-and-content slide, Tab Tab selects its (empty) content placeholder,
    and one action presses Return to edit it and types three lines. Sent back to back, the
    two Returns typed were eaten and the placeholder held ``BringChargePack`` in 2 of 3 runs
    (a race with the app: the three built-in Impress oracles that type lists so failed in 10
    of 11 runs)."""
    env.reset(
        options={
            "task": _task(
                "impress",
                [
                    {
                        "type": "download",
                        "parameters": {
                            "files": [{"url": DECK, "path": "/home/user/Desktop/deck.pptx"}]
                        },
                    },
                    {"type": "open", "parameters": {"path": "/home/user/Desktop/deck.pptx"}},
                    {"type": "sleep", "parameters": {"seconds": 1}},
                ],
            )
        }
    )
    _act(
        env,
        [
            "time.sleep(1)",
            "pyautogui.press('end')",
            "pyautogui.hotkey('ctrl', 'm')",
            # the deck's layout has an object placeholder: "Title, Content" from the command
            # search (Shift+Esc), as the built-in Impress oracles choose it
            "pyautogui.hotkey('shift', 'esc'); time.sleep(0.6)",
            "pyautogui.write('Title, Content'); time.sleep(1.2)",
            "pyautogui.press('enter'); time.sleep(0.8)",
            "pyautogui.press('tab'); time.sleep(0.3); pyautogui.press('tab')",
        ],
    )
    (info,) = _act(env, ["pyautogui.press('enter'); pyautogui.write('Bring\\nCharge\\nPack')"])
    assert info["timings"]["pace_ms"] > 0  # one pause, between the two calls
    assert _copied_text(env).splitlines() == ["Bring", "Charge", "Pack"]


def test_tabs_and_returns_inside_one_write_fill_a_calc_table(env):
    """A table typed in one ``write`` into GTK3 Calc: a Tab on a cell not being edited moves
    the cursor from a posted event, so text typed right after it went into the old cell (with
    the keys in one burst, ``a\\t\\tb`` put ``b`` in G1 and left H1 empty: 3 of 3 runs). Typing
    now pauses after each Tab and Return that more keys follow."""
    env.reset(
        options={
            "task": _task(
                "calc",
                [
                    {
                        "type": "download",
                        "parameters": {"files": [{"url": SHEET, "path": "/home/user/t.xlsx"}]},
                    },
                    {"type": "open", "parameters": {"path": "/home/user/t.xlsx"}},
                    {"type": "sleep", "parameters": {"seconds": 1}},
                ],
            )
        }
    )
    _act(
        env,
        [
            "time.sleep(1)",
            # the Name Box (Ctrl+Shift+T) takes the cell to go to
            "pyautogui.hotkey('ctrl', 'shift', 't'); time.sleep(0.3); "
            "pyautogui.hotkey('ctrl', 'a'); pyautogui.write('F1\\n')",
        ],
    )
    (info,) = _act(env, ["pyautogui.write('a\\t\\tb\\nc\\t\\td\\n')"])
    assert info["timings"]["pace_ms"] > 0  # after each Tab and Return but the last
    _act(env, ["pyautogui.hotkey('ctrl', 's'); time.sleep(2)"])
    data = env.unwrapped.provider.start().get_file("/home/user/t.xlsx")
    assert data is not None
    ws = openpyxl.load_workbook(io.BytesIO(data)).active
    assert [[ws.cell(r, c).value for c in (6, 7, 8)] for r in (1, 2)] == [
        ["a", None, "b"],
        ["c", None, "d"],
    ]


def test_tabs_and_returns_inside_one_write_reach_writer(env):
    """Writer never lost them: Tabs inside a line, an empty paragraph (autocorrect capitalises
    the first word)."""
    env.reset(
        options={
            "task": _task(
                "writer",
                [
                    {
                        "type": "launch",
                        "parameters": {"command": ["soffice", "--writer", "--norestore"]},
                    },
                    {"type": "sleep", "parameters": {"seconds": 6}},
                ],
            )
        }
    )
    _act(env, ["pyautogui.write('x\\ty\\n\\nz')"])
    assert _copied_text(env).replace("\r\n", "\n") == "X\ty\n\nz"
