"""What a task needs from the desktop beyond its apps: programs on the PATH, and the network.

Three of :func:`osworld_gym.support.classifier.classify`'s checks, each giving at most one reason:

* :func:`missing_programs`: every program a setup step, postconfig step or evaluator command
  runs (read by :func:`osworld_gym.support.programs.task_programs`) must be found on the PATH the
  desktop gives task commands: the task python's directory (``python``/``python3`` with
  pyautogui, :mod:`osworld_gym.guest.task_python`), our shims (``google-chrome``, ``sudo``) and
  the system directories. The reason names the Debian package to install where one is known.
* :func:`network_steps`: a step that installs software from the internet (``apt-get install``,
  ``apt install``, ``pip install``, ``snap``, ``npm install``, ``conda install``) cannot run in an
  offline desktop, and neither can a browser task whose instruction sends the agent to a
  website the config does not serve locally (the instruction names a real host and the task
  opens a browser).
* :func:`systemd_programs`: ``timedatectl`` and its siblings ask systemd's services over the
  system bus; a desktop without systemd as init (the local sandbox) answers only an error, so
  the evaluator would read no state at all (reason ``needs systemd``).

>>> raw = {"config": [{"type": "execute", "parameters": {
...     "command": "echo pw | sudo -S apt-get install -y htop", "shell": "true"}}]}
>>> network_steps(raw, "do it")
['needs the network (apt-get install in a setup step)']
>>> network_steps({"related_apps": ["chrome"], "config": []}, "Open www.amazon.com and ...")
['needs a live website (www.amazon.com, named in the instruction)']
>>> systemd_programs({"evaluator": {"func": "is_utc_0", "result": {
...     "type": "vm_command_line", "command": "timedatectl status", "shell": True}}})
['needs systemd (timedatectl asks systemd over the system bus; this desktop has no systemd)']
"""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

from osworld_gym.support.packages import PACKAGES
from osworld_gym.support.programs import json_object, task_programs

#: Commands that fetch software from the internet.
_INSTALLS = re.compile(
    r"\b(apt-get\s+(?:-\S+\s+)*install|apt\s+(?:-\S+\s+)*install|pip3?\s+(?:-\S+\s+)*install|"
    r"python3?\s+-m\s+pip\s+install|snap\s+install|\bsnap\b|npm\s+(?:i|install)|"
    r"conda\s+install)\b"
)
#: Hosts named in an instruction: a URL, or a dotted name ending in a common public suffix.
_HOST = re.compile(
    r"(?:https?://)?((?:[a-z0-9-]+\.)+(?:com|org|net|edu|gov|io|ai|co|uk|de|cn|jp|fr|info|"
    r"dev|app|tv|me|us|ca|au|in))(?![a-z0-9.-]*\.(?:py|json|txt|csv|xlsx|docx|pptx|png|jpg|pdf))"
    r"\b",
    re.IGNORECASE,
)
_BROWSER_APPS = {"chrome", "chromium", "google-chrome"}
_BROWSER_PROGRAMS = {"google-chrome", "google-chrome-stable", "chromium", "chromium-browser"}
#: Programs checked elsewhere, each with its own reason (VS Code, GNOME).
_OWN_REASON = frozenset({"code", "gsettings", "dconf"})


def _install_text(raw: dict[str, Any]) -> list[tuple[str, str]]:
    evaluator = json_object(raw.get("evaluator"))
    out = []
    for where, steps in (
        ("a setup step", raw.get("config")),
        ("a postconfig step", evaluator.get("postconfig")),
    ):
        for step in steps if isinstance(steps, list) else []:
            if isinstance(step, dict) and step.get("type") in (
                "execute",
                "command",
                "launch",
                "execute_with_verification",
            ):
                out.append((where, json.dumps((step.get("parameters") or {}).get("command"))))
    for key in ("result", "expected"):
        getters = evaluator.get(key)
        for g in getters if isinstance(getters, list) else [getters]:
            if isinstance(g, dict) and "command" in g:
                out.append(("an evaluator command", json.dumps(g["command"])))
    return out


def _opens_browser(raw: dict[str, Any]) -> bool:
    apps = {str(a).lower() for a in raw.get("related_apps") or []}
    if apps & _BROWSER_APPS or raw.get("snapshot") == "chrome":
        return True
    return bool(task_programs(raw) & _BROWSER_PROGRAMS)


def _config_urls(raw: dict[str, Any]) -> str:
    return json.dumps(raw.get("config") or [])


def network_steps(raw: dict[str, Any], instruction: str) -> list[str]:
    """At most one reason: a step that installs from the internet, or a site the agent must
    visit that only the instruction names (see the module docstring)."""
    for where, text in _install_text(raw):
        if m := _INSTALLS.search(text):
            what = re.sub(r"\s+(?:-\S+\s+)*", " ", m.group(1))
            return [f"needs the network ({what} in {where})"]
    if _opens_browser(raw):
        config = _config_urls(raw).lower()
        for m in _HOST.finditer(instruction or ""):
            host = m.group(1).lower().rstrip(".")
            if host.split(".")[-2:] in (["example", "com"], ["example", "org"]):
                continue
            if host not in config:  # a config URL of that host is classifier.py's to judge
                return [f"needs a live website ({m.group(1)}, named in the instruction)"]
    return []


def missing_programs(
    raw: dict[str, Any],
    path: str | None,
    skip: frozenset[str] = frozenset(),
    programs: frozenset[str] | None = None,
) -> list[str]:
    """At most one reason naming every program ``raw`` runs that the desktop lacks, with the
    packages that ship them where :mod:`.packages` knows. The desktop's programs are
    ``programs`` when given (an image's manifest), else those ``path`` reaches on this machine
    (``None`` for both: not checked)."""
    if programs is None and path is None:
        return []

    def absent(p: str) -> bool:
        if programs is not None:
            return p.rsplit("/", 1)[-1] not in programs
        return shutil.which(p, path=path) is None

    missing = sorted(p for p in task_programs(raw) - _OWN_REASON - skip if absent(p))
    if not missing:
        return []
    if {"python", "python3"} & set(missing):
        hint = "python with pyautogui: run scripts/install.sh, which makes the task python"
    else:
        hint = ""
    packages = sorted({PACKAGES[p] for p in missing if p in PACKAGES})
    hints = [h for h in (hint, f"apt-get install {' '.join(packages)}" if packages else "") if h]
    unknown = [p for p in missing if p not in PACKAGES and p not in ("python", "python3")]
    if unknown:
        hints.append(f"no package known to osworld-gym: {', '.join(unknown)}")
    return [f"needs programs not on the desktop: {', '.join(missing)} ({'; '.join(hints)})"]


#: Programs that only talk to systemd's services (timedated, hostnamed, localed, logind).
SYSTEMD_PROGRAMS = frozenset({"timedatectl", "hostnamectl", "localectl", "loginctl"})


def systemd_programs(raw: dict[str, Any]) -> list[str]:
    """At most one reason: ``raw`` runs a program that needs systemd as init."""
    found = sorted(task_programs(raw) & SYSTEMD_PROGRAMS)
    if not found:
        return []
    return [
        f"needs systemd ({', '.join(found)} asks systemd over the system bus; this desktop "
        "has no systemd)"
    ]
