"""Hand-written solutions to official OSWorld tasks: a correct one and a plausible wrong one each.

The stand-in run (:mod:`standins`) proves that doing nothing scores 0. These prove the other
half: that a task *solved* on our desktop scores 1 through our setup, getters and metrics, and
that a near miss an agent could make still scores 0. Each :class:`Solution` is played through
``env.step`` on a real local desktop (``test_official_solutions.py``), as an agent's actions:
pyautogui text, keyboard and terminal where possible so a widget theme does not move them.

OSWorld's task files are on a hub these machines cannot reach, so a solution brings the
files its task needs where the generic stand-in would not do: an input with the structure the
instruction speaks of, and the gold file a correct answer produces (``files``, keyed by the
file's name in OSWorld's cache layout: the guest file name of a ``download`` step, the
``dest`` of a ``cloud_file``). The checker scripts some tasks download (``eval.sh``) are ours,
written from the instruction; OSWorld's own are not public. Everything else comes from the
generic stand-ins.

``after`` names what must be merged before a solution can score as expected (known misses of
our desktop, reported, never worked around here).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

Files = dict[str, Callable[[], bytes]]


@dataclass(frozen=True)
class Solution:
    """How to solve one official task, and how to plausibly fail it."""

    #: The task's id (a unique prefix is enough).
    task: str
    #: Actions that solve it (pyautogui text, WAIT, ...); DONE (FAIL) is added at the end.
    correct: list[str]
    #: Actions an agent could plausibly take that leave it unsolved.
    wrong: list[str]
    #: What the wrong answer gets wrong.
    wrong_because: str
    #: Files the task reads from the cache, by name (see the module docstring).
    files: Files = field(default_factory=dict)
    #: The final action of the correct answer (``FAIL`` for an infeasible task).
    final: str = "DONE"
    #: The final action of the wrong answer.
    wrong_final: str = "DONE"
    #: What must land before this solution scores as expected ("" if nothing).
    after: str = ""
    #: A window whose title contains this is waited for (up to :data:`READY_S`) before the
    #: first action, as an agent watching the screen waits for the task's app to open.
    ready: str = ""


#: How long a solution waits for a window before acting anyway.
READY_S = 90.0
#: A script item ``WAIT_PREFIX + title`` is no action: the agent waits there until a window
#: titled like that is open (see :func:`wait_for`).
WAIT_PREFIX = "#wait-for-window:"
#: ``wait_for(NEW_WINDOW + title)``: a window that was not open before the previous action.
NEW_WINDOW = "new:"


# -- action helpers --------------------------------------------------------------------------------


def write(text: str) -> str:
    return f"pyautogui.write({text!r})"


def keys(*names: str) -> str:
    return f"pyautogui.hotkey({', '.join(repr(n) for n in names)})"


def press(name: str, times: int = 1) -> str:
    return (
        f"pyautogui.press({name!r}, presses={times})" if times > 1 else f"pyautogui.press({name!r})"
    )


def wait_for(title: str) -> str:
    """Wait (no step) until a window whose title contains ``title`` is open."""
    return WAIT_PREFIX + title


def sleep(seconds: float) -> str:
    return f"time.sleep({seconds})"


def terminal(*commands: str, open_it: bool = True) -> list[str]:
    """Type ``commands`` into a terminal (opened with Ctrl+Alt+T unless one is focused)."""
    opening = (
        [keys("ctrl", "alt", "t"), wait_for(NEW_WINDOW + "Terminal"), sleep(1)]
        if open_it
        else [sleep(0.5)]
    )
    return [*opening, *(write(c + "\n") for c in commands), sleep(2)]


def command(name: str) -> list[str]:
    """Run a LibreOffice command by name from its command popup (Shift+Esc, LibreOffice 7.2+)."""
    return [keys("shift", "esc"), sleep(2), write(name), sleep(1.5), press("enter"), sleep(1.5)]


def gimp_action(name: str) -> list[str]:
    """Run a GIMP action by name from its action search ("/"; slow to open the first time)."""
    return [
        sleep(3),
        press("/"),
        wait_for("Search Actions"),
        sleep(1),
        write(name),
        sleep(2),
        press("enter"),
        sleep(3),
    ]


def slide_properties() -> list[str]:
    """Open Impress's Slide > Slide Properties dialog from the keyboard (menu mnemonics)."""
    return [sleep(4), keys("alt", "l"), sleep(1.5), press("p"), sleep(3)]


def vlc_dismiss_privacy() -> list[str]:
    """Accept VLC's first-run privacy dialog if it is up (Enter is its Continue button; with
    no dialog, Enter does nothing in VLC's empty main window)."""
    return [sleep(2), press("enter"), sleep(1.5)]


def ctrl_scroll(clicks: int) -> list[str]:
    """Zoom with Ctrl and the mouse wheel (negative: out) where the pointer is."""
    return [
        "pyautogui.keyDown('ctrl')",
        f"pyautogui.scroll({clicks})",
        "pyautogui.keyUp('ctrl')",
        sleep(1),
    ]


def stop(name: str) -> str:
    """A command line ending the processes named like ``name`` and waiting until they are
    gone (apps write their settings while they exit)."""
    return f"pkill {name}; while pgrep {name} >/dev/null; do sleep 0.5; done"


def py(code: str) -> str:
    """A ``python3`` run of ``code`` from a quoted here-document (no shell quoting inside)."""
    return f"python3 - <<'PY'\n{code}\nPY"


# -- files -----------------------------------------------------------------------------------------


def xlsx(rows: list[list[Any]], edit: Callable[[Any], None] | None = None) -> Callable[[], bytes]:
    def make() -> bytes:
        from openpyxl import Workbook

        wb = Workbook()
        ws = wb.active
        ws.title = "Sheet1"
        for row in rows:
            ws.append(row)
        if edit:
            edit(ws)
        buf = io.BytesIO()
        wb.save(buf)
        return buf.getvalue()

    return make


def docx(paragraphs: list[str], page_breaks_after: tuple[int, ...] = ()) -> Callable[[], bytes]:
    """A document of ``paragraphs``; a page break ends each paragraph index listed."""

    def make() -> bytes:
        from docx import Document
        from docx.enum.text import WD_BREAK

        doc = Document()
        for i, text in enumerate(paragraphs):
            p = doc.add_paragraph(text)
            if i in page_breaks_after:
                p.add_run().add_break(WD_BREAK.PAGE)
        buf = io.BytesIO()
        doc.save(buf)
        return buf.getvalue()

    return make


def pptx_landscape() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    prs.slide_width, prs.slide_height = Inches(10), Inches(7.5)
    slide = prs.slides.add_slide(prs.slide_layouts[0])
    slide.shapes.title.text = "Thank you"
    slide.placeholders[1].text = "Questions?"
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def text(body: str) -> Callable[[], bytes]:
    return lambda: body.encode()


def jpeg(seed: int) -> Callable[[], bytes]:
    def make() -> bytes:
        import numpy as np
        from PIL import Image

        rng = np.random.default_rng(seed)
        base = np.linspace(0, 255, 320)[None, :, None] * np.ones((240, 1, 3))
        noise = rng.integers(0, 40, (240, 320, 3))
        img = Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8))
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=92)
        return buf.getvalue()

    return make


def video(seconds: float) -> Callable[[], bytes]:
    """A stand-in video long enough to still be playing when the episode is scored."""

    def make() -> bytes:
        import tempfile
        from pathlib import Path

        from standins import write_standin

        with tempfile.TemporaryDirectory() as tmp:
            dest = Path(tmp) / "video.mp4"
            write_standin(dest, "solution video", seconds=seconds)
            return dest.read_bytes()

    return make


def _time_sheet(ws: Any) -> None:
    ws["C3"].number_format = "[HH]:MM"


def _zoomed(ws: Any) -> None:
    ws.sheet_view.zoomScale = 300


def _frozen_c2(ws: Any) -> None:
    ws.freeze_panes = "C2"


FREEZE_ROWS = [["Name", "Region", "Q1", "Q2"], ["Ann", "North", 10, 12], ["Bo", "South", 7, 9]]
ZOOM_ROWS = [["Item", "Count"], ["pens", 4], ["pads", 9], ["ink", 2]]
HOURS_ROWS = [
    ["Work hours"],
    ["Week", "", "Total Hours", "Hourly Rate", "Total Earned"],
    ["1", "", 38 / 24 + 20 / 1440, 5, None],
]
#: ~/.config/libreoffice/4/user/registrymodifications.xcu, edited with LibreOffice stopped
XCU = "pathlib.Path.home()/'.config/libreoffice/4/user/registrymodifications.xcu'"


def xcu_item(path: str, prop: str, value: str) -> str:
    item = (
        f"<item oor:path='{path}'><prop oor:name='{prop}' oor:op='fuse'>"
        f"<value>{value}</value></prop></item>"
    )
    return py(
        f"import pathlib; p={XCU}; s=p.read_text(); "
        f"p.write_text(s.replace('</oor:items>', {item!r} + '</oor:items>'))"
    )


def prefs_js(*lines: str) -> list[str]:
    """Stop Thunderbird, append ``user_pref`` lines to the profile's prefs.js (what the
    preferences dialogs write), and start it again (the task's postconfig closes it)."""
    profile = "~/.thunderbird/t5q2a5hp.default-release"
    assert not any("'" in line for line in lines), lines
    appended = " && ".join(f"echo '{line}' >> {profile}/prefs.js" for line in lines)
    return terminal(
        stop("thunderbird"),
        appended,
        "setsid thunderbird >/dev/null 2>&1 &",
    ) + [sleep(12)]


def vlcrc(*settings: str) -> list[str]:
    """Set ``key=value`` lines in VLC's ~/.config/vlc/vlcrc (what its preferences write)."""
    edits = "; ".join(
        f"sed -i '/^#\\?{s.split('=')[0]}=/d' ~/.config/vlc/vlcrc; echo {s} >> ~/.config/vlc/vlcrc"
        for s in settings
    )
    return terminal(f"mkdir -p ~/.config/vlc && touch ~/.config/vlc/vlcrc; {edits}")


CHROME_PREFS = "pathlib.Path.home()/'.config/google-chrome/Default/Preferences'"


def chrome_profile_name(name: str) -> list[str]:
    """Quit Chrome and set the profile's name in its Preferences (created if Chrome has not
    written it yet: a fresh profile has none for its first seconds)."""
    code = (
        f"import json, pathlib; p = {CHROME_PREFS}; "
        "d = json.loads(p.read_text()) if p.exists() else {}; "
        f"d.setdefault('profile', {{}})['name'] = {name!r}; p.write_text(json.dumps(d))"
    )
    return [sleep(6), *terminal(stop("chrom"), py(code))]


LOCAL_FOLDERS = "~/.thunderbird/t5q2a5hp.default-release/Mail/'Local Folders'"
RICK = "Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"

# -- the solutions ---------------------------------------------------------------------------------

SOLUTIONS: list[Solution] = [
    # os ------------------------------------------------------------------------------------------
    Solution(
        "e0df059f",
        terminal("mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2"),
        terminal("mv ~/Desktop/todo_list_Jan_1 ~/todo_list_Jan_2"),
        "renamed it but moved it off the Desktop",
    ),
    Solution(
        "5ced85fc",
        terminal(r"printf '1\n2\n3\n' | sed 's|$|<br/>|' > output.txt", open_it=False),
        terminal(r"printf '1\n2\n3\n' | sed 's|^|<br/>|' > output.txt", open_it=False),
        "prepended <br/> instead of appending it",
        files={
            "eval.sh": text(
                "printf '1<br/>\\n2<br/>\\n3<br/>\\n' | cmp -s - ~/output.txt "
                "&& echo 'Success: The task has been completed correctly.' "
                "|| echo 'Failure: output.txt is not as asked.'\n"
            )
        },
    ),
    Solution(
        "4d117223",
        terminal("find . -type f -exec chmod 644 {} +", open_it=False),
        terminal("chmod 644 *", open_it=False),
        "changed only the files at the top of the tree",
        files={
            "setup.sh": text(
                "mkdir -p testDir/sub/deep && cd testDir && touch a.txt b.sh sub/c.txt sub/deep/d "
                "&& chmod 600 a.txt && chmod 755 b.sh && chmod 777 sub/c.txt "
                "&& chmod 640 sub/deep/d\n"
            ),
            "eval.sh": text(
                'cd ~/testDir && [ -z "$(find . -type f ! -perm 644)" ] '
                "&& echo 'All files have the correct permissions.' "
                "|| echo 'Some files have other permissions.'\n"
            ),
        },
    ),
    Solution(
        "23393935",
        terminal("find ~/Desktop/photos -name '*.jpg' -exec cp {} ~/Desktop/cpjpg/ \\;"),
        terminal("cp ~/Desktop/photos/*/*.jpg ~/Desktop/cpjpg/"),
        "copied only the .jpg files one level down, not recursively",
    ),
    # chrome --------------------------------------------------------------------------------------
    Solution(
        "12086550",
        [
            sleep(2),
            keys("ctrl", "l"),
            sleep(0.5),
            write("chrome://password-manager/passwords\n"),
            sleep(3),
        ],
        [sleep(2), keys("ctrl", "l"), sleep(0.5), write("chrome://settings/privacy\n"), sleep(3)],
        "opened privacy settings, not the password manager",
    ),
    Solution(
        "2ae9ba84",
        chrome_profile_name("Thomas"),
        chrome_profile_name("thomas"),
        "wrote the name in lower case",
    ),
    Solution("480bcfea", [sleep(1)], [sleep(1)], "claims done", final="FAIL"),
    # gimp ----------------------------------------------------------------------------------------
    Solution(
        "a746add2",
        gimp_action("vignette"),
        gimp_action("gaussian blur"),
        "opened the Gaussian Blur filter instead",
    ),
    Solution(
        "d52d6308",
        gimp_action("hide docks"),
        gimp_action("single-window mode"),
        "switched to single-window mode instead of hiding the docks",
    ),
    Solution(
        "77b8ab4d",
        terminal("cp ~/Desktop/The_Lost_River_Of_Dreams.jpg ~/Desktop/export.jpg"),
        terminal("cp ~/Desktop/The_Lost_River_Of_Dreams.jpg ~/Desktop/export.jpeg"),
        "saved it as export.jpeg, not export.jpg",
        files={"The_Lost_River_Of_Dreams.jpg": jpeg(1)},
    ),
    Solution("e19bd559", [sleep(1)], [sleep(1)], "claims done", final="FAIL"),
    # libreoffice_calc ----------------------------------------------------------------------------
    Solution(
        "357ef137",
        [
            sleep(3),
            keys("ctrl", "home"),
            press("down", 2),
            press("right", 4),
            write("=C3*24*D3\n"),
            sleep(1),
        ],
        [
            sleep(3),
            keys("ctrl", "home"),
            press("down", 2),
            press("right", 4),
            write("=C3*D3\n"),
            sleep(1),
        ],
        "multiplied the time value (a fraction of a day) by the rate",
        files={"Multiply_Time_Number.xlsx": xlsx(HOURS_ROWS, _time_sheet)},
    ),
    Solution(
        "1334ca3e",
        [sleep(3), *ctrl_scroll(-5)],
        [sleep(3), *ctrl_scroll(3)],
        "zoomed in",
        files={
            "Zoom_Out_Oversized_Cells.xlsx": xlsx(ZOOM_ROWS, _zoomed),
            "Zoom_Out_Oversized_Cells_gold.xlsx": xlsx(ZOOM_ROWS),
        },
    ),
    Solution(
        "4188d3a4",
        [
            sleep(3),
            keys("ctrl", "home"),
            press("right", 2),
            press("down"),
            *command("Freeze Rows and Columns"),
        ],
        [sleep(3), *command("Freeze First Row")],
        "froze the first row only, not columns A and B",
        files={
            "Freeze_row_column.xlsx": xlsx(FREEZE_ROWS),
            "Freeze_row_column_gold.xlsx": xlsx(FREEZE_ROWS, _frozen_c2),
        },
    ),
    # libreoffice_impress -------------------------------------------------------------------------
    Solution(
        "ce88f674",
        [*slide_properties(), keys("alt", "p"), sleep(1), press("enter"), sleep(2)],
        [*slide_properties(), keys("alt", "p"), sleep(1), press("esc"), sleep(2)],
        "chose Portrait but closed the dialog with Escape",
        files={"AM_Last_Page_Template.pptx": pptx_landscape},
    ),
    Solution(
        "0f84bef9",
        terminal(
            stop("soffice"),
            xcu_item("/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen", "false"),
        ),
        terminal(
            stop("soffice"),
            xcu_item("/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen", "true"),
        ),
        "left the presenter console on",
    ),
    Solution(
        "2cd43775",
        terminal(
            stop("soffice"),
            xcu_item("/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall", "3"),
        ),
        terminal(
            stop("soffice"),
            xcu_item("/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall", "30"),
        ),
        "set 30 minutes, not 3",
    ),
    # libreoffice_writer --------------------------------------------------------------------------
    Solution(
        "3ef2b351",
        [sleep(3), keys("ctrl", "home"), keys("ctrl", "e"), sleep(1)],
        [sleep(3), keys("ctrl", "home"), keys("ctrl", "r"), sleep(1)],
        "right-aligned the heading",
        files={
            "Constitution_Template_With_Guidelines.docx": docx(
                ["Constitution of the Club", "Article 1. Name", "The name of the club is ..."]
            )
        },
    ),
    Solution(
        "ecc2413d",
        [sleep(3), keys("ctrl", "home"), press("end"), keys("ctrl", "enter"), sleep(1)],
        [sleep(3), keys("ctrl", "home"), press("end"), press("enter", 8), sleep(1)],
        "added empty lines, not a page",
        files={
            "Sample_Statutory_Declaration.docx": docx(
                [f"Statutory declaration, page {i + 1}." for i in range(5)],
                page_breaks_after=(0, 1, 2, 3),
            )
        },
    ),
    Solution("bb8ccc78", [sleep(1)], [sleep(1)], "claims done", final="FAIL"),
    # multi_apps ----------------------------------------------------------------------------------
    Solution(
        "2b9493d7",
        terminal("pkill -9 soffice", open_it=False),
        [sleep(1), keys("alt", "tab"), sleep(1), keys("ctrl", "q"), sleep(3)],
        "closed Writer normally, not from the command line",
    ),
    Solution(
        "b337d106",
        terminal("echo 'set number' >> ~/.vimrc"),
        terminal("echo 'set relativenumber' >> ~/.vimrc"),
        "set relative line numbers, not absolute ones",
        after=(
            "the desktop to focus a terminal opened with Ctrl+Alt+T over Chrome (it maps on top "
            "but Chrome keeps the keyboard)"
        ),
        files={
            "eval.sh": text(
                "grep -qx 'set number\\|set nu' ~/.vimrc "
                "&& echo 'The File Has Set Number!' || echo 'No line numbers set.'\n"
            )
        },
    ),
    Solution(
        "2c9fc0de",
        terminal(
            "git add -A && git commit -qm 'daily update' && git push -q origin main", open_it=False
        ),
        terminal("git add -A && git commit -qm 'daily update'", open_it=False),
        "committed but did not push",
        files={
            "binder.zip": lambda: _zip(
                {"binder/README.md": "# binder\n", "binder/run.py": "print(1)\n"}
            )
        },
    ),
    # thunderbird ---------------------------------------------------------------------------------
    Solution(
        "3f28fe4f",
        prefs_js('user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");'),
        prefs_js('user_pref("mail.identity.id1.htmlSigText", "Anonym, XYZ Lab");'),
        "wrote the signature on one line",
    ),
    Solution(
        "f201fbc3",
        prefs_js('user_pref("mail.identity.id1.auto_quote", false);'),
        prefs_js('user_pref("mail.identity.id1.reply_on_top", 1);'),
        "moved the reply above the quote instead of turning quoting off",
    ),
    Solution(
        "a10b69e1",
        terminal(
            stop("thunderbird"),
            f"cd {LOCAL_FOLDERS} && touch COMPANY UNIVERSITY",
            "setsid thunderbird >/dev/null 2>&1 &",
        )
        + [sleep(12)],
        terminal(
            stop("thunderbird"),
            f"cd {LOCAL_FOLDERS} && touch COMPANY",
            "setsid thunderbird >/dev/null 2>&1 &",
        )
        + [sleep(12)],
        "created only one of the two folders",
    ),
    # vlc -----------------------------------------------------------------------------------------
    Solution(
        "9195653c",
        vlcrc("qt-max-volume=200"),
        vlcrc("volume=200"),
        "raised the volume, not the maximum volume",
    ),
    Solution(
        "5ac2891a",
        vlcrc("play-and-exit=0"),
        vlcrc("play-and-pause=1"),
        "paused at the end instead of turning auto-exit off",
    ),
    Solution(
        "59f21cfb",
        [
            *vlc_dismiss_privacy(),
            keys("ctrl", "o"),
            sleep(2),
            write(f"/home/user/Desktop/{RICK}\n"),
            sleep(4),
        ],
        [
            *vlc_dismiss_privacy(),
            keys("ctrl", "o"),
            sleep(2),
            write(f"/home/user/Desktop/{RICK}\n"),
            sleep(4),
            press("s"),
            sleep(1),
        ],
        "stopped the video after opening it",
        files={
            RICK: video(120),
        },
    ),
]


#: The window each solution waits for (its task's app, or the terminal setup opened).
READY: dict[str, str] = {
    "5ced85fc": "Terminal",
    "4d117223": "Terminal",
    "12086550": "Chromium",
    "2ae9ba84": "Chromium",
    "a746add2": "[dog_with_background]",
    "d52d6308": "GNU Image Manipulation Program",
    "77b8ab4d": "[The_Lost_River_Of_Dreams]",
    "357ef137": "Multiply_Time_Number.xlsx",
    "1334ca3e": "Zoom_Out_Oversized_Cells.xlsx",
    "4188d3a4": "Freeze_row_column.xlsx",
    "ce88f674": "AM_Last_Page_Template.pptx",
    "0f84bef9": "multimedia_classroom_podium-2020.pptx",
    "2cd43775": "LibreOffice Impress",
    "3ef2b351": "Constitution_Template_With_Guidelines.docx",
    "ecc2413d": "Sample_Statutory_Declaration.docx",
    "2b9493d7": "Terminal",
    "b337d106": "Chromium",  # setup opens a terminal, then Chrome's window takes the focus
    "2c9fc0de": "Terminal",
    "3f28fe4f": "Mozilla Thunderbird",
    "f201fbc3": "Mozilla Thunderbird",
    "a10b69e1": "Mozilla Thunderbird",
    "9195653c": "VLC media player",
    "5ac2891a": "VLC media player",
    "59f21cfb": "VLC media player",
}
SOLUTIONS = [replace(s, ready=READY.get(s.task, "")) for s in SOLUTIONS]


def _zip(members: dict[str, str]) -> bytes:
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, body in members.items():
            z.writestr(name, body)
    return buf.getvalue()


def by_task() -> dict[str, Solution]:
    """The solutions keyed by task id prefix (each prefix unique)."""
    out = {s.task: s for s in SOLUTIONS}
    assert len(out) == len(SOLUTIONS), "two solutions for one task"
    return out
