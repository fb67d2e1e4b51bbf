"""Getters that describe the desktop."""

from __future__ import annotations

from typing import Any

from osworld_gym.errors import EvaluatorError, GuestError
from osworld_gym.evaluators.admission import admit
from osworld_gym.evaluators.context import EvalContext
from osworld_gym.evaluators.getters.file import _download
from osworld_gym.tasks.paths import guest_path
from osworld_gym.tasks.validation import safe_child


def get_list_directory(ctx: EvalContext, config: dict[str, Any]) -> dict[str, Any] | None:
    """The directory tree under ``config["path"]``.

    Shaped like OSWorld's ``/list_directory`` answer:
    ``{"type": "directory", "name": ..., "children": [...]}``; ``None`` if the guest reports
    nothing (e.g. the directory does not exist).
    """
    try:
        tree = ctx.client.list_directory(guest_path(config["path"], ctx.home))
    except GuestError as exc:
        if exc.status == 404:
            return None
        raise
    if isinstance(tree, dict) and set(tree) == {"directory_tree"}:
        tree = tree["directory_tree"]
    return tree or None


def get_accessibility_tree(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """The desktop's accessibility tree as OSWorld's XML (``/accessibility``); ``None`` where the
    desktop cannot produce one."""
    return ctx.client.accessibility()


def get_vm_terminal_output(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """The text of the desktop's open terminal, read through the accessibility tree (OSWorld's
    ``/terminal``); ``None`` when no terminal is open (the metric then scores 0)."""
    return ctx.client.terminal()


#: Prints ``{"width": w, "height": h}`` of the first client window (``_NET_CLIENT_LIST``) whose
#: WM_CLASS names the class in argv[1] (case-insensitive), or ``null``; run by the task python.
_WINDOW_SIZE_SCRIPT = r"""
import json, sys
from Xlib import X, display, error
d = display.Display()
root = d.screen().root
want = sys.argv[1].lower()
prop = root.get_full_property(d.intern_atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
size = None
for wid in (prop.value if prop else []):
    try:
        w = d.create_resource_object("window", wid)
        cls = w.get_wm_class()
        if cls and want in [c.lower() for c in cls]:
            g = w.get_geometry()
            size = {"width": g.width, "height": g.height}
            break
    except error.XError:
        continue
print(json.dumps(size))
"""


def get_vm_window_size(ctx: EvalContext, config: dict[str, Any]) -> dict[str, int] | None:
    """``{"width", "height"}`` of the first window of class ``config["app_class_name"]``, as
    OSWorld's ``/window_size`` (the client window's X geometry); ``None`` if no such window is
    open (the metric then scores 0)."""
    import json

    result = ctx.client.execute(
        ["python", "-c", _WINDOW_SIZE_SCRIPT, str(config["app_class_name"])], timeout=30.0
    )
    output = (result.get("output") or "").strip()
    try:
        size = json.loads(output.splitlines()[-1]) if output else None
    except ValueError as exc:
        raise EvaluatorError(
            f"window size probe printed {output[-200:]!r}: {result.get('error')!r}"
        ) from exc
    if result.get("returncode", 0) != 0 or not (size is None or isinstance(size, dict)):
        raise EvaluatorError(f"window size probe failed: {result.get('error')!r}")
    return size


#: The GSettings key GNOME draws the desktop background from (OSWorld's ``/wallpaper`` reads it)
WALLPAPER_KEY = ("org.gnome.desktop.background", "picture-uri")


def get_vm_wallpaper(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """The desktop background's image file, copied to ``config["dest"]`` in the episode's dir.

    As OSWorld's ``/wallpaper`` on Linux: the file named by GSettings'
    ``org.gnome.desktop.background picture-uri``, read with ``gsettings get`` and stripped of
    ``file://`` and quotes (no percent-decoding: a URI with ``%20`` names no file there either).
    ``None`` when that names no file on the desktop (the metric then scores 0); a desktop where
    ``gsettings`` itself fails cannot be judged (``EvaluatorError``).

    A file outside the home folder and ``/tmp`` (the desktop's own default background, a
    system wallpaper) is not read: the guest serves no file from there, and no such file can be
    the image a task asks for, which only the agent can have put in place, so it scores 0 as
    it would on OSWorld.
    """
    import posixpath

    result = ctx.client.execute(["gsettings", "get", *WALLPAPER_KEY], timeout=30.0)
    if result.get("returncode", 0) != 0:
        raise EvaluatorError(
            f"gsettings get {' '.join(WALLPAPER_KEY)} failed: "
            f"{(result.get('error') or result.get('output') or '')[-300:]!r}"
        )
    path = (result.get("output") or "").strip().replace("file://", "").replace("'", "")
    path = posixpath.normpath(path) if path.startswith("/") else ""
    if not any(path.startswith(top.rstrip("/") + "/") for top in (ctx.home, "/tmp")):
        return None
    local = safe_child(ctx.episode_dir, config["dest"], "vm_wallpaper dest")
    if _download(ctx.client, path, local) is None:
        return None
    admit(local)
    return str(local)
