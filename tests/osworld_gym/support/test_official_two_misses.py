"""The two official tasks a correct answer once scored 0 on (issue 25), solved and not.

* ``2b9493d7`` (force-quit LibreOffice Writer from a terminal): its postconfig ends the terminal
  (``killall gnome-terminal-server``) and the evaluator greps ``~/.bash_history``, which the
  shell writes as it dies. The judge's hold used to freeze the shell first (0 in 3 of 8 runs).
* ``ce88f674`` (slides to portrait): its postconfig activates Impress and presses Ctrl+S.

Each case runs ``OSWORLD_TWO_MISSES_RUNS`` times (default 1; the issue's check is 10) on the
default ``ubuntu`` desktop, with stand-in files (``standins.py``): the evaluator of both tasks
reads only what the agent did, so a stand-in input proves the 1 as well as the 0.

Ctrl+S with keyboard focus in Impress's sidebar saves nothing in LibreOffice 7.3 and 7.4 on
any widget toolkit: the sidebar passes only Undo and Redo on to the document
(``SidebarDockingWindow::EventNotify``), and OSWorld's image runs LibreOffice 7.3, so a
Portrait change left with the focus there scores 0 on OSWorld's VM too. The case is kept as a
test of that behaviour (see docs/fidelity.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from osworld_examples import OFFICIAL, SKIP_REASON
from osworld_gym.tasks.task import Task
from standins import fill_cache

pytestmark = [pytest.mark.desktop, pytest.mark.timeout(3600)]

RUNS = int(os.environ.get("OSWORLD_TWO_MISSES_RUNS", "1"))

KILL_WRITER = "2b9493d7-49b8-493a-a71b-56cd1f4d6908"
PORTRAIT = "ce88f674-ab7a-43da-9201-468d38539e4a"

#: Impress at 1920x1080 on the ubuntu profile (GTK3): Slide menu, its "Slide Properties...",
#: the dialog's Portrait button and OK; the sidebar's Orientation box and its Portrait entry.
SLIDE_MENU, SLIDE_PROPERTIES = (331, 70), (394, 271)
DIALOG_PORTRAIT, DIALOG_OK = (702, 493), (1354, 878)
SIDEBAR_ORIENTATION, SIDEBAR_PORTRAIT = (1747, 264), (1690, 317)
#: Grey space beside the slide, inside the document's edit view.
BESIDE_THE_SLIDE = (1400, 700)


def click(xy: tuple[int, int]) -> str:
    return f"pyautogui.click({xy[0]}, {xy[1]})"


#: (task, case, actions, expected reward). ``WAIT`` first: Impress paints its window after
#: the reset's first frame.
CASES: list[tuple[str, str, list[str], float]] = [
    (KILL_WRITER, "pkill from the terminal", ["pyautogui.write('pkill soffice\\n')"], 1.0),
    (KILL_WRITER, "killall from the terminal", ["pyautogui.write('killall soffice.bin\\n')"], 1.0),
    (
        KILL_WRITER,
        "looked it up, killed nothing",
        ["pyautogui.write('ps aux | grep soffice\\n')"],
        0.0,
    ),
    (KILL_WRITER, "nothing done", [], 0.0),
    (
        PORTRAIT,
        "Slide Properties dialog",
        ["WAIT", *map(click, (SLIDE_MENU, SLIDE_PROPERTIES, DIALOG_PORTRAIT, DIALOG_OK))],
        1.0,
    ),
    (
        PORTRAIT,
        "sidebar, then back to the slide",
        ["WAIT", *map(click, (SIDEBAR_ORIENTATION, SIDEBAR_PORTRAIT, BESIDE_THE_SLIDE))],
        1.0,
    ),
    (
        PORTRAIT,
        "sidebar, focus left there (OSWorld's LibreOffice saves nothing either)",
        ["WAIT", *map(click, (SIDEBAR_ORIENTATION, SIDEBAR_PORTRAIT))],
        0.0,
    ),
    (PORTRAIT, "nothing done", ["WAIT"], 0.0),
]


def _official(task_id: str) -> tuple[str, dict[str, Any]]:
    for path in (OFFICIAL / "examples").glob(f"*/{task_id}.json"):
        return path.parent.name, json.loads(path.read_text())
    pytest.skip(SKIP_REASON)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator:
    import gymnasium as gym
    import osworld_gym  # noqa: F401 - registers OSWorld-v0

    cache = tmp_path_factory.mktemp("osworld-cache")
    e = gym.make(
        "OSWorld-v0",
        provider="local",
        tasks=None,
        cache_dir=cache,
        provider_kwargs={"profile": "ubuntu"},
    )
    e.unwrapped.standin_cache = cache
    try:
        yield e
    finally:
        e.close()


@pytest.mark.parametrize(
    ("task_id", "case", "actions", "expected"),
    CASES,
    ids=[f"{t[:8]}-{c.split(',')[0].replace(' ', '-')}" for t, c, _, _ in CASES],
)
def test_official_task_scores_as_solved(env, task_id, case, actions, expected):
    if not (OFFICIAL / "test_all.json").is_file():
        pytest.skip(SKIP_REASON)
    domain, raw = _official(task_id)
    fill_cache(raw, env.unwrapped.standin_cache)
    task = Task.from_dict(raw, domain)
    rewards = []
    for _ in range(RUNS):
        env.reset(options={"task": task})
        for action in actions:
            _, _, terminated, _, info = env.step(action)
            assert not terminated and info["action_error"] is None, info
        _, reward, terminated, _, info = env.step("DONE")
        assert terminated and info["infra_error"] is None, info
        rewards.append(reward)
    assert rewards == [expected] * RUNS, f"{case}: {rewards}"
