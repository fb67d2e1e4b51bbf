"""The programs judged commands run, what each reads that the agent could write, and the defence.

A judged command (a ``vm_command_line``/``vm_command_error`` getter, and the probes our own
getters run) executes as the desktop user, so a program in it may read configuration from the
player's home (``~/.magic`` for ``file``, ``~/.curlrc``, ``~/.gitconfig``) or obey a variable.
Each program the built-in and official tasks' judged commands name -- read from the tasks as
``osworld-gym doctor`` reads them (:func:`~osworld_gym.support.programs.command_programs`) --
has an entry in :data:`AUDIT`: what it reads and how that is kept from the agent. A task whose
judged command starts a program without an entry fails
``tests/osworld_gym/redteam/test_redteam_judged_programs.py`` until someone audits it.

The defences (``how``):

* ``env``: the program reads only variables, and a judged command's environment is built by
  the guest and cut to :data:`~osworld_gym.guest.judging.JUDGED_VARIABLES` (no ``LD_*``,
  ``LOCPATH``, ``BASH_ENV``, ``TAR_OPTIONS``, ``GZIP``...);
* ``judged_env``: a variable of :data:`~osworld_gym.guest.judging.JUDGE_ENV` points it away
  from the home (``MAGIC``, ``CURL_HOME``, ``GIT_CONFIG_*``, ``PULSE_CLIENTCONFIG``...);
* ``state``: what it reads from the home *is* the state the task checks (``xdg-mime`` reads
  ``mimeapps.list``, ``ssh -G`` the agent's ``~/.ssh/config``), the agent's to write;
* ``not covered``: listed in the threat model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from osworld_gym.support.programs import (
    COMMAND_GETTERS,
    command_programs,
    is_shell,
    json_object,
)


@dataclass(frozen=True)
class Audit:
    """What ``program`` reads that the agent could write, and how the judge keeps it out."""

    reads: str
    how: str
    defence: str


_COREUTILS = Audit(
    "locale and format variables (LANG/LC_*, LOCPATH, TZ, POSIXLY_CORRECT, TMPDIR, "
    "QUOTING_STYLE, TIME_STYLE, BLOCK_SIZE, LS_COLORS); no file in the home",
    "env",
    "none of them but the guest's LANG/LC_ALL/TMPDIR reaches a judged command",
)
#: program -> its audit entry.
AUDIT: dict[str, Audit] = {
    "bash": Audit(
        "BASH_ENV (and ENV for sh) for non-interactive shells; ~/.bashrc, ~/.profile only when "
        "interactive or a login shell (never for `bash -c`)",
        "env",
        "no BASH_ENV/ENV/SHELLOPTS/BASH_FUNC_* in a judged command's environment",
    ),
    "sh": Audit("ENV (interactive only)", "env", "no ENV"),
    **{
        name: _COREUTILS
        for name in (
            "cat",
            "cmp",
            "cut",
            "head",
            "ls",
            "mkdir",
            "mktemp",
            "readlink",
            "rm",
            "sha256sum",
            "sort",
            "stat",
            "tail",
            "tr",
            "wc",
        )
    },
    "grep": Audit("GREP_OPTIONS, GREP_COLOR(S)", "env", "dropped"),
    "sed": Audit("POSIXLY_CORRECT", "env", "dropped"),
    "awk": Audit("AWKPATH, AWKLIBPATH (gawk); nothing (mawk)", "env", "dropped"),
    "find": Audit("POSIXLY_CORRECT, TZ", "env", "dropped"),
    "tar": Audit("TAR_OPTIONS (any option, e.g. --to-command)", "env", "dropped"),
    "gzip": Audit("GZIP (options)", "env", "dropped"),
    "timeout": Audit("nothing (runs its command with PATH)", "env", "PATH cut to system dirs"),
    "which": Audit("PATH", "env", "PATH cut to system directories (no home, no /tmp)"),
    "file": Audit(
        "MAGIC; ~/.magic.mgc and ~/.magic after the system database",
        "judged_env",
        "MAGIC=/usr/share/misc/magic: the system database only",
    ),
    "curl": Audit(
        "CURL_HOME/.curlrc, else $XDG_CONFIG_HOME/.curlrc, else ~/.curlrc (write-out, output, "
        "proxy...); proxy variables",
        "judged_env",
        "CURL_HOME names the package's empty .curlrc; no proxy variables",
    ),
    "git": Audit(
        "~/.gitconfig, the repository's .git/config, hooks, attributes, the index",
        "judged_env",
        "GIT_CONFIG_COUNT/KEY/VALUE force fsmonitor, hooks, pager, excludes, ...; drivers "
        "named by the repository's .gitattributes and the index stay the agent's (threat model)",
    ),
    "ssh": Audit(
        "~/.ssh/config (ssh -G prints it; Match exec runs a command)",
        "state",
        "the config is what os-ssh-config-001 checks; its evaluator refuses Match and Include",
    ),
    "python3": Audit(
        "PYTHON* variables, the user site (~/.local/lib/python3.X), the script's and the "
        "current directory on sys.path, pip.conf",
        "judged_env",
        "python3 -I as the program, PYTHONNOUSERSITE and PYTHONSAFEPATH inside shells, no "
        "other PYTHON* variable, PIP_CONFIG_FILE=/dev/null; the task python's site-packages "
        "are read-only to the player",
    ),
    "python": Audit("as python3", "judged_env", "as python3"),
    "gsettings": Audit(
        "the dconf database ~/.config/dconf/user (the state checked), user schemas in "
        "~/.local/share/glib-2.0/schemas (can change a key's default only), the session bus",
        "state",
        "GSETTINGS_* and DCONF_PROFILE are the guest's; a default the agent compiled in is "
        "equivalent to setting the key",
    ),
    "xdg-mime": Audit(
        "mimeapps.list in ~/.config and ~/.local/share/applications (the state checked); "
        "XDG_CURRENT_DESKTOP picks the helper it runs",
        "state",
        "XDG_* variables are the guest's",
    ),
    "xsel": Audit("the X selection (the clipboard the task checks)", "state", "-"),
    "pactl": Audit(
        "~/.config/pulse/client.conf (default-server: a server of the agent's answers "
        "anything), PULSE_SERVER, ~/.pulse-cookie",
        "judged_env",
        "PULSE_CLIENTCONFIG=/dev/null, no PULSE_SERVER; the server itself is the player's",
    ),
    "pulseaudio": Audit(
        "~/.config/pulse/ (daemon.conf, default.pa: modules, commands)",
        "not covered",
        "`pulseaudio --check`/`-k` only talk to the player's own daemon",
    ),
    "timedatectl": Audit(
        "the system bus (systemd-timedated)", "not covered", "no systemd in our desktops"
    ),
    "code": Audit(
        "VS Code's profile in the home (~/.vscode, ~/.config/Code: argv.json, extensions)",
        "not covered",
        "an Electron app reading the player's profile; tasks needing VS Code are marked so",
    ),
}
#: Programs our own getters run in judged commands, besides what task JSON names.
GETTER_PROGRAMS = {
    "python3": "the DevTools and VLC status probes (chrome, vlc getters)",
    "python": "the window-size probe (vm_window_size)",
    "gsettings": "the wallpaper getter (vm_wallpaper)",
}


def judged_programs(raw: dict[str, Any]) -> set[str]:
    """Programs ``raw``'s judged commands (its command getters) start, by name.

    >>> sorted(judged_programs({"evaluator": {"result": {"type": "vm_command_line",
    ...     "command": ["bash", "-c", "file ~/a.png | cut -d: -f2"]}}}))
    ['bash', 'cut', 'file']
    """
    evaluator = json_object(raw.get("evaluator"))
    found: set[str] = set()
    for key in ("result", "expected"):
        value = evaluator.get(key)
        for getter in value if isinstance(value, list) else [value]:
            if not isinstance(getter, dict) or getter.get("type") not in COMMAND_GETTERS:
                continue
            if "command" not in getter:
                continue
            command = getter["command"]
            if isinstance(command, list) and is_shell(getter):
                command = " ".join(str(c) for c in command)
            found |= command_programs(command)
    return found


def unaudited(tasks: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """``{program: {task ids}}`` for judged programs without an :data:`AUDIT` entry."""
    out: dict[str, set[str]] = {}
    for raw in tasks:
        for program in judged_programs(raw) - set(AUDIT):
            out.setdefault(program, set()).add(str(raw.get("id", "?")))
    for program in set(GETTER_PROGRAMS) - set(AUDIT):
        out.setdefault(program, set()).add("(getters)")
    return out
