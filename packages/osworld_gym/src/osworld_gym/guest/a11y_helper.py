"""Dump the AT-SPI accessibility tree as OSWorld-style XML (or a terminal's text).

Runs as a *separate script* under the system Python that has ``pyatspi`` (Debian's
``python3-pyatspi``), never imported by the guest server: it must only use the standard
library and ``pyatspi``. The guest runs it with a timeout.

Usage::

    /usr/bin/python3 a11y_helper.py tree       # XML on stdout
    /usr/bin/python3 a11y_helper.py terminal   # JSON {"output": str | null} on stdout

Exit status: 0 ok, 2 usage, 3 pyatspi missing, 4 no accessibility bus / registry.

XML shape (as OSWorld's guest): root ``<desktop-frame>``, one element per accessible named by
its role (spaces → hyphens), attribute ``name``, states as ``st:<state>="true"``, object
attributes as ``attr:<key>``, geometry as ``cp:screencoord="(x, y)"`` and
``cp:size="(w, h)"``, the value as ``val:value``, actions as ``act:<name>_kb``, text content
as the element's text.
"""

# AT-SPI calls into other applications can fail in any way (the app died, a D-Bus timeout, a
# half-implemented interface); the walker skips what fails and keeps going, hence the broad
# excepts below.
# ruff: noqa: BLE001, S110, S112

import importlib
import json
import re
import sys
import time
import xml.etree.ElementTree as ET

NS = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
MAX_DEPTH = 50
MAX_WIDTH = 1024
MAX_NODES = 30000
MAX_TEXT = 4096
TIME_BUDGET_S = 20.0

_BAD_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_name(s):
    s = _BAD_NAME.sub("_", s.strip().replace(" ", "-")) or "unknown"
    return s if s[0].isalpha() or s[0] == "_" else "_" + s


def _clean(s):
    return _BAD_XML.sub("", s or "")


class Walker:
    def __init__(self, pyatspi):
        self.pyatspi = pyatspi
        self.nodes = 0
        self.deadline = time.monotonic() + TIME_BUDGET_S
        self.truncated = False

    def node(self, acc, depth):
        p = self.pyatspi
        self.nodes += 1
        try:
            role = acc.getRoleName()
        except Exception:
            return None
        el = ET.Element(_xml_name(role or "unknown"))
        try:
            el.set("name", _clean(acc.name))
        except Exception:
            el.set("name", "")
        try:
            for st in acc.getState().getStates():
                el.set(f"{{{NS['st']}}}{_xml_name(p.stateToString(st))}", "true")
        except Exception:
            pass
        try:
            for kv in acc.getAttributes() or []:
                k, _, v = kv.partition(":")
                el.set(f"{{{NS['attr']}}}{_xml_name(k)}", _clean(v))
        except Exception:
            pass
        try:
            comp = acc.queryComponent()
            x, y = comp.getPosition(p.XY_SCREEN)
            w, h = comp.getSize()
            el.set(f"{{{NS['cp']}}}screencoord", f"({x}, {y})")
            el.set(f"{{{NS['cp']}}}size", f"({w}, {h})")
        except Exception:
            pass
        try:
            text = acc.queryText()
            n = min(text.characterCount, MAX_TEXT)
            if n > 0:
                el.text = _clean(text.getText(0, n))
        except Exception:
            pass
        try:
            el.set(f"{{{NS['val']}}}value", str(acc.queryValue().currentValue))
        except Exception:
            pass
        try:
            action = acc.queryAction()
            for i in range(min(action.nActions, 16)):
                el.set(
                    f"{{{NS['act']}}}{_xml_name(action.getName(i))}_kb",
                    _clean(action.getKeyBinding(i)),
                )
        except Exception:
            pass
        if depth >= MAX_DEPTH:
            return el
        try:
            count = min(acc.childCount, MAX_WIDTH)
        except Exception:
            count = 0
        for i in range(count):
            if self.nodes >= MAX_NODES or time.monotonic() > self.deadline:
                self.truncated = True
                break
            try:
                child = acc.getChildAtIndex(i)
            except Exception:
                continue
            if child is not None:
                sub = self.node(child, depth + 1)
                if sub is not None:
                    el.append(sub)
        return el


def _apps(pyatspi):
    desktop = pyatspi.Registry.getDesktop(0)
    out = []
    for i in range(desktop.childCount):
        try:
            app = desktop.getChildAtIndex(i)
        except Exception:
            continue
        if app is not None:
            out.append(app)
    return out


def dump_tree(pyatspi):
    for prefix, uri in NS.items():
        ET.register_namespace(prefix, uri)
    root = ET.Element("desktop-frame")
    walker = Walker(pyatspi)
    for app in _apps(pyatspi):
        sub = walker.node(app, 1)
        if sub is not None:
            root.append(sub)
    if walker.truncated:
        root.set("truncated", "true")
    return ET.tostring(root, encoding="unicode")


def terminal_text(pyatspi):
    """Text of the terminal widget in the active window, or None."""
    found = []

    def walk(acc, depth, active):
        if depth > 30 or len(found) > 8:
            return
        try:
            states = acc.getState()
            role = acc.getRoleName()
        except Exception:
            return
        if role == "frame" and states.contains(pyatspi.STATE_ACTIVE):
            active = True
        if role == "terminal":
            try:
                t = acc.queryText()
                found.append(
                    (active, states.contains(pyatspi.STATE_FOCUSED), t.getText(0, t.characterCount))
                )
            except Exception:
                pass
            return
        try:
            count = min(acc.childCount, 256)
        except Exception:
            return
        for i in range(count):
            try:
                child = acc.getChildAtIndex(i)
            except Exception:
                continue
            if child is not None:
                walk(child, depth + 1, active)

    for app in _apps(pyatspi):
        walk(app, 1, False)
    if not found:
        return None
    found.sort(key=lambda f: (not f[0], not f[1]))
    return found[0][2]


def main(argv):
    if len(argv) != 2 or argv[1] not in ("tree", "terminal"):
        sys.stderr.write("usage: a11y_helper.py tree|terminal\n")
        return 2
    try:
        # by name: pyatspi is the system python's (python3-pyatspi), not in the project's venv
        pyatspi = importlib.import_module("pyatspi")
    except Exception as e:
        sys.stderr.write(f"pyatspi is not available to {sys.executable}: {e}\n")
        return 3
    try:
        pyatspi.setTimeout(1500, 10000)
    except Exception:
        pass
    try:
        _ = pyatspi.Registry.getDesktop(0).childCount
    except Exception as e:
        sys.stderr.write(f"cannot reach the AT-SPI registry: {e}\n")
        return 4
    if argv[1] == "tree":
        sys.stdout.write(dump_tree(pyatspi))
    else:
        sys.stdout.write(json.dumps({"output": terminal_text(pyatspi)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
