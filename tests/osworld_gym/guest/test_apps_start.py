"""The apps whole OSWorld domains use start on our sandboxed desktop and show a window.

GIMP (26 official tasks), Thunderbird (15) and the file manager nautilus (os and multi_apps
tasks open folders in it) come from Debian packages installed by scripts/install.sh.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
from osworld_gym.providers.local import LocalProvider

APPS = [  # (command OSWorld's tasks run, WM_CLASS substring of its main window)
    (["gimp"], "gimp"),
    (["thunderbird"], "thunderbird"),
    (["nautilus", "/home/user"], "nautilus"),
]


@pytest.fixture(scope="module")
def desktop() -> Iterator:
    provider = LocalProvider(screen_size=(1280, 800))
    client = provider.start()
    try:
        yield client
    finally:
        provider.stop()


def window_classes(client) -> str:
    return client.execute(["wmctrl", "-lx"], setup=True)["output"].lower()


@pytest.mark.parametrize(("command", "wm_class"), APPS, ids=[a[1] for a in APPS])
def test_app_starts_and_shows_a_window(desktop, command, wm_class):
    if shutil.which(command[0]) is None:
        pytest.fail(f"{command[0]} is not installed: run scripts/install.sh")
    desktop.reset_desktop()
    crashes = desktop.health()["crashes"]
    desktop.launch(command)
    deadline = time.monotonic() + 120  # GIMP's first start builds its caches
    while wm_class not in window_classes(desktop):
        assert time.monotonic() < deadline, f"no {wm_class} window: {window_classes(desktop)}"
        time.sleep(1)
    assert desktop.health()["crashes"] == crashes


def test_a_pdf_opens_in_the_document_viewer(desktop):
    """OSWorld's tasks open PDFs with their default app and wait for a window named after the
    file; with GIMP installed and no default, it was GIMP's import dialog (no such window)."""
    import tempfile
    from pathlib import Path

    from standins import write_standin

    desktop.reset_desktop()
    with tempfile.TemporaryDirectory() as tmp:
        pdf = Path(tmp) / "review_template.pdf"
        write_standin(pdf, "x")
        desktop.upload("/home/user/Desktop/review_template.pdf", pdf.read_bytes())
    desktop.open_file("/home/user/Desktop/review_template.pdf", timeout=60)
    assert "evince" in window_classes(desktop)
