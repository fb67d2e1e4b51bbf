"""A click focuses the window under the pointer, on the real local desktop, with no pause.

Openbox binds no clicks on client windows in our configuration (its synchronous grab froze the
pointer at every press); the guest focuses the clicked window itself before the press. These
tests drive ``env.step`` with one pyautogui action per scenario, so nothing waits between a
click and the typing that follows it, and check where the input went.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import osworld_gym.guest
import pytest
from osworld_gym.guest.windows import openbox_grabs_client_clicks

pytestmark = pytest.mark.desktop

if missing := [
    p
    for p in ("xterm", "mousepad", "wmctrl", "xwininfo", "xdotool", "xprop")
    if shutil.which(p) is None
]:
    pytest.skip(f"desktop programs missing: {missing}", allow_module_level=True)

COLS, ROWS = 60, 10


@dataclass
class Term:
    """An xterm of COLS x ROWS cells, located on screen."""

    title: str
    x: int
    y: int
    w: int
    h: int

    def cell(self, col: int, row: int) -> tuple[int, int]:
        """Screen point at the middle of a 1-based character cell."""
        return (
            round(self.x + (col - 0.5) * self.w / COLS),
            round(self.y + (row - 0.5) * self.h / ROWS),
        )


def wait_for(predicate, what: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def test_the_shipped_openbox_configuration_leaves_client_clicks_to_the_guest():
    # A "Client" mouse binding would bring back the synchronous grab; the guest would notice
    # and pause after every press again (correct, but slow).
    guest = Path(osworld_gym.guest.__file__).parent
    for rc in (
        guest / "skel" / ".config" / "openbox" / "rc.xml",  # the openbox profile
        guest / "profiles" / "ubuntu" / "openbox" / "rc.xml",
    ):  # the ubuntu profile
        assert rc.is_file(), rc
        assert not openbox_grabs_client_clicks(rc.read_text()), rc


@pytest.fixture
def desk(local_env):
    """A freshly reset desktop and its guest client."""
    local_env.reset(options={"task": "os-mkdir-001"})
    return local_env.unwrapped.provider.start()


def xterm(client, title: str, where: str, script: str) -> Term:
    client.launch(
        ["xterm", "-T", title, "-geometry", f"{COLS}x{ROWS}{where}", "-e", "sh", "-c", script]
    )
    wait_for(lambda: title in client.execute(["wmctrl", "-l"])["output"], f"window {title}")
    out = client.execute(["xwininfo", "-name", title])["output"]

    def get(key: str, text: str = out) -> int:
        return int(re.search(rf"{key}:\s+(-?\d+)", text).group(1))

    return Term(
        title,
        get("Absolute upper-left X"),
        get("Absolute upper-left Y"),
        get("Width"),
        get("Height"),
    )


def active_title(client) -> str:
    return client.execute(["xdotool", "getactivewindow", "getwindowname"])["output"].strip()


def window_id(client, title: str) -> str:
    return next(
        line.split()[0]
        for line in client.execute(["wmctrl", "-l"])["output"].splitlines()
        if line.endswith(f" {title}")
    )


def file_text(client, path: str, ending: str = "\n", timeout: float = 10.0) -> str:
    """The text of ``path`` once it ends with ``ending``."""
    deadline = time.monotonic() + timeout
    while not ((data := client.get_file(path)) or b"").endswith(ending.encode()):
        assert time.monotonic() < deadline, f"{path} never ended with {ending!r}: {data!r}"
        time.sleep(0.1)
    return data.decode()


def test_a_click_focuses_an_unfocused_window_and_typing_follows_at_once(local_env, desk):
    a = xterm(desk, "click-a", "+0+0", "cat > ~/a.txt")
    b = xterm(desk, "click-b", "+700+300", "cat > ~/b.txt")
    desk.activate_window("click-a", strict=True)
    calls = []
    for i in range(3):
        calls += [
            f"pyautogui.click{b.cell(30, 5)}",
            f"pyautogui.write('b{i}\\n')",
            f"pyautogui.click{a.cell(30, 5)}",
            f"pyautogui.write('a{i}\\n')",
        ]
    calls.append(f"pyautogui.click{b.cell(30, 5)}")
    _, _, _, _, info = local_env.step("\n".join(calls))
    assert info["action_error"] is None and info["infra_error"] is None
    assert active_title(desk) == "click-b"
    local_env.step("pyautogui.write('done\\n')")
    assert file_text(desk, "~/a.txt") == "a0\na1\na2\n"
    assert file_text(desk, "~/b.txt", "done\n") == "b0\nb1\nb2\ndone\n"


def test_double_and_triple_clicks_select_a_word_and_a_line(local_env, desk):
    t = xterm(
        desk,
        "click-words",
        "+100+100",
        "echo alpha bravo charlie; echo delta echo foxtrot; cat > ~/pasted.txt",
    )
    xterm(desk, "click-other", "+900+100", "cat")  # mapped last, so it is the active one
    wait_for(lambda: active_title(desk) == "click-other", "the second xterm to be active")
    # Double-click "bravo" in the unfocused xterm and paste the selection with the middle
    # button; in the next step (a new click sequence for xterm) triple-click the second line
    # and paste that.
    local_env.step(
        f"pyautogui.doubleClick{t.cell(9, 1)}\n"
        f"pyautogui.middleClick{t.cell(30, 5)}\n"
        "pyautogui.write('\\n')"
    )
    # a model's next turn comes seconds later; the settled observation can come back within
    # xterm's 250 ms multi-click time, so without a pause the triple click would continue the
    # first step's clicks as one sequence
    time.sleep(0.6)
    local_env.step(
        f"pyautogui.tripleClick{t.cell(3, 2)}\n"
        f"pyautogui.middleClick{t.cell(30, 5)}\n"
        "pyautogui.write('\\n')"
    )
    # xterm pastes a selected line with its newline: one more newline ends it
    assert file_text(desk, "~/pasted.txt", "foxtrot\n\n").splitlines() == [
        "bravo",
        "delta echo foxtrot",
        "",
    ]


def test_window_decorations_and_open_menus_behave_as_with_the_window_managers_binding(
    local_env, desk
):
    closing = xterm(desk, "click-close", "+0+0", "cat")
    target = xterm(desk, "click-target", "+0+400", "cat")
    desk.upload("~/Documents/menu.txt", b"menu\n")
    desk.open_file("~/Documents/menu.txt", timeout=30)
    editor = wait_for(
        lambda: "menu.txt" in active_title(desk) and active_title(desk), "mousepad to be active"
    )
    desk.execute(["wmctrl", "-r", editor, "-e", "0,700,300,800,500"])  # clear of the xterms
    # The title bar and its buttons are still openbox's: a click on the close button of an
    # unfocused xterm closes it (frame extents: left, right, top, bottom). The button is the
    # title bar's rightmost, about as wide as the bar is high (after the theme's padding: a
    # half bar height in from the frame's edge is on it in both profiles' themes).
    extents = desk.execute(["xprop", "-id", window_id(desk, "click-close"), "_NET_FRAME_EXTENTS"])[
        "output"
    ]
    _, right, top, _ = (int(v) for v in re.findall(r"\d+", extents.split("=")[-1]))
    local_env.step(
        f"pyautogui.click({closing.x + closing.w + right - top // 2}, {closing.y - top // 2})"
    )
    wait_for(
        lambda: "click-close" not in desk.execute(["wmctrl", "-l"])["output"], "the xterm to close"
    )
    assert active_title(desk) == editor
    # An open menu holds the pointer: a click elsewhere goes to the menu's application and
    # focuses nothing new, as openbox's binding would not fire either. (GTK keeps its menu bar
    # active and the pointer grabbed after such a click, until Escape.)
    local_env.step("pyautogui.hotkey('alt', 'f')")
    local_env.step(f"pyautogui.click{target.cell(30, 5)}")
    assert active_title(desk) == editor
    local_env.step("pyautogui.press('escape')\npyautogui.press('escape')")
    local_env.step(f"pyautogui.click{target.cell(30, 5)}")
    assert active_title(desk) == "click-target"
