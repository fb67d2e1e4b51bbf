"""Evaluation commands as the desktop user, with everything the agent started frozen.

OSWorld's evaluators read the desktop as its user: ``ssh -G`` only trusts a config its own uid
owns, ``git`` refuses a repository another uid owns, ``~`` is the user's. So an evaluation
command (``/execute``) runs with the desktop user's uid, like a setup command, but

* with a clean environment and ``python3 -I`` (see :mod:`~osworld_gym.guest.osworld_api`),
  and with the agent's configuration of the programs they run defused (:func:`judged_env`:
  ``git``'s hooks, fsmonitor, pager, ssh command; ``pip``'s and ``wget``'s config files),
* in the judge's cgroup (a player that exhausted its own pids/memory cannot starve it),
* while every player process the judge does not trust is frozen. A process of the same uid
  could otherwise signal the command, ``ptrace`` it, write the expected answer into
  ``/proc/<pid>/fd/1`` or rewrite the result file while it is read.

**Trusted** (keeps running, because getters query apps live: Chromium's DevTools, VLC's HTTP
interface): the desktop's infrastructure (window manager, session bus and services); the
processes setup launched (``/setup/launch``, ``/open_file``: the task author is trusted); below
those, from parent to child and only with no controlling terminal (:func:`trusted_child`): a
fork of a trusted process that did not exec (``socat``'s per-connection children), our
supervisor scripts, and desktop GUI apps from an allowlist (:data:`GUI_APPS`, by executable:
never a relay or an interpreter, so ``socat`` the session bus or openbox started for the agent
is the agent's); and, whoever started them, the apps getters query live (:data:`LIVE_APPS`:
Chromium, VLC). A GUI app that is not itself a setup root counts only when it runs as
installed (:func:`injected`): no ``LD_*``-like variable, no flag that makes it run or serve
the agent's code or files (``--renderer-cmd-prefix``, ``--extraintf http --http-src``), no
shared object mapped from outside the system. Everything else -- whatever the agent started
from a terminal, through ``setsid``/double forks (orphans re-parent to the guest), from the
home or ``/tmp``, or as an interpreter -- is not, and an evaluator command that names a port
such a process listens on is refused (:func:`untrusted_listeners`).

**How it is held.** With a freezer cgroup (:class:`~osworld_gym.providers.limits.PlayerFreezer`,
the default on a root host): the guest freezes the player's cgroup as a whole (new children of
a frozen cgroup are frozen too, so neither a fork-hopping loop nor a process started during the
scan escapes), moves each untrusted process into its ``held`` child cgroup, freezes ``held``
and thaws the rest; after the command, ``held`` is thawed. While the command runs, a watcher
(:meth:`Freezer._watch`) polls the root's members every millisecond and moves each process a
trusted one forks into ``held`` at once, back only if the rule trusts it (a fork that later
execs something else is judged again). This is not race-free: such a process runs until the
watcher sees it (milliseconds; a cgroup cannot freeze a running process's future children,
and refusing the trusted processes' forks would break ``socat``'s per-connection children
and Chromium's renderers that getters need). Processes of untrusted parents are born in
``held``, frozen: no window for them. Without one (no writable cgroup): a
fallback SIGSTOPs, one pid at a time, the player's processes that run code
(:data:`RUNS_CODE`) or a program from outside ``/usr``/``/opt``, rescanning a few times; a
fork-hopping loop or an installed non-interpreter (``yes > file``) can slip past it, so that
mode is logged as weaker.

What stays possible: code injected into a running trusted application (a ptrace-capable agent
that hijacked Chromium before the episode ended). The README's threat model lists this.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from osworld_gym.guest.processes import ProcInfo, all_processes, descendants

log = logging.getLogger(__name__)

#: Programs that run code given to them (interpreters, shells, debuggers, command runners).
#: Network relays (``socat``, ``nc``) are not held: OSWorld's Chrome tasks forward 9222 to
#: 1337 with ``socat`` and getters query through it.
RUNS_CODE = re.compile(
    r"(ba|da|z|k|c|tc|fi|mk|ya)?sh|busybox|python[\d.]*m?|perl[\d.]*|ruby[\d.]*|node(js)?|"
    r"lua[\d.]*|luajit|tclsh[\d.]*|wish[\d.]*|php[\d.]*|gdb|strace|ltrace|watch|xargs|env|"
    r"nohup|setsid|timeout|script|expect|stdbuf|nice|flock|parallel|"
    r"awk|gawk|mawk|sed|find|make|java|gjs|"
    # editors and multiplexers that run commands (`vim -c '!...'`, `:terminal`, M-x shell)
    r"g?vim?(\.\w+)?|nvim|emacs[-\w.]*|tmux|screen|"
    # the dynamic loader runs any program given to it (`ld-linux-x86-64.so.2 /usr/bin/python3`)
    r"ld(-linux)?[-\w]*\.so(\.\d+)*"
)
#: Where the programs of task apps live; anything else (the home, /tmp) is the player's own.
APP_ROOTS = ("/usr/", "/opt/")
#: Read-only scripts of ours that supervise apps (the Chromium supervisor behind the
#: ``google-chrome`` shim forwards ``pkill chrome`` to Chromium; held, it would not, and an
#: evaluator's ``pkill chrome`` would never get Chromium's profile written).
OUR_SCRIPTS = "/opt/osworld-gym/shims/"
#: Installed apps whose live state getters query (Chromium's DevTools, VLC's HTTP interface):
#: trusted whoever started them, so an agent that reopens its browser or plays a file with
#: ``vlc song.wav &`` from a terminal (a built-in task's oracle does) is scored on that app.
#: They are real apps reporting their real state; a relay or a script on their port is not.
LIVE_APPS = re.compile(r"chromium(-browser)?|chrome|google-chrome[-\w]*|vlc")
#: Seconds a freeze may take before the evaluation goes on regardless (logged).
FREEZE_TIMEOUT_S = 10.0
#: How often the watcher looks for processes forked during a hold (see :meth:`Freezer._watch`).
WATCH_INTERVAL_S = 0.001


#: Configuration keys a judged ``git`` takes from the command line's scope, which overrides every
#: config file (``GIT_CONFIG_COUNT``/``KEY_n``/``VALUE_n``): the agent's ``~/.gitconfig`` and its
#: repositories' ``.git/config`` still answer ``git config --global user.name`` and the like (a
#: file scope named explicitly reads that file only), but cannot make the judge's ``git`` run the
#: agent's program, unfrozen in the judge's cgroup while the player is held (a ``core.fsmonitor``
#: command, hooks, a pager, an ssh command, a credential helper, a signature "verifier", an
#: ``ext::`` remote) or hide work from ``git status`` (a fsmonitor "hook" ``/bin/true`` that
#: reports nothing changed, a global excludes file, ``status.showUntrackedFiles=no``).
#: Not covered (keyed by names the agent picks): ``diff.<driver>.textconv``,
#: ``filter.<driver>.*`` named by its own ``.gitattributes``, ``remote.<name>.uploadpack``
#: (setting it for ``origin`` made a phantom remote appear in ``git remote``), ``diff.external``
#: (``git diff`` only; plumbing ignores it), ``core.worktree``; and the repository's own data:
#: the index (``--assume-unchanged``, ``--skip-worktree``) and ``.git/info/exclude`` are the
#: agent's to write, so ``git status`` shows what they say.
JUDGE_GIT_CONFIG = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.sshCommand", "ssh -F /dev/null"),
    ("core.excludesFile", "/dev/null"),
    ("status.showUntrackedFiles", "normal"),
    ("core.attributesFile", "/dev/null"),
    ("credential.helper", ""),
    ("log.showSignature", "false"),
    ("gpg.program", "gpg"),
    ("gpg.ssh.program", "ssh-keygen"),
    ("gpg.x509.program", "gpgsm"),
    ("protocol.ext.allow", "never"),
    ("remote.origin.uploadpack", "git-upload-pack"),
    ("remote.origin.receivepack", "git-receive-pack"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
)
#: Environment of judged commands on top of the command environment: programs that read a user
#: configuration able to run code or change what they print read none, or ours (``pip`` reads
#: no config file when ``PIP_CONFIG_FILE`` is ``/dev/null``; ``wget`` reads ``WGETRC`` instead of
#: ``~/.wgetrc``; pagers are ``cat``; ``ssh`` under ``git`` reads no ``~/.ssh/config``, so no
#: ``ProxyCommand``/``Match exec``).
JUDGE_ENV = {
    "GIT_SSH_COMMAND": "ssh -F /dev/null",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "/bin/false",
    "SSH_ASKPASS": "/bin/false",
    "PIP_CONFIG_FILE": "/dev/null",
    "WGETRC": "/dev/null",
    # curl reads $CURL_HOME/.curlrc when it exists, else falls back to ~/.curlrc (where
    # `write-out = "@file"` prints the agent's JSON for chrome-tabs' `curl .../json/list`)
    "CURL_HOME": str(Path(__file__).with_name("curlhome")),
    # file(1) reads ~/.magic and ~/.magic.mgc after the system's database unless MAGIC names
    # the database: the agent's rule "0 string x PNG image data, 320 x 240" made a text file
    # a PNG for multi_apps-snapshot-desktop-001
    "MAGIC": "/usr/share/misc/magic",
    # PulseAudio clients (pactl) read ~/.config/pulse/client.conf, whose default-server can
    # name a server of the agent's that answers anything
    "PULSE_CLIENTCONFIG": "/dev/null",
    # Pythons inside shell commands: no user site (a usercustomize.py in ~/.local), no script
    # or current directory on sys.path (a json.py in the home); `python3 -I` as the program
    "PYTHONNOUSERSITE": "1",
    "PYTHONSAFEPATH": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
#: Variables a judged command may inherit from the command environment (which the guest builds
#: itself: none is the player's). Anything else is dropped even if a future change lets it
#: through: ``LD_*``, ``LOCPATH``, ``GCONV_PATH``, ``BASH_ENV``, ``ENV``, ``PYTHON*`` but ours,
#: ``TAR_OPTIONS``, ``GZIP``, ``GREP_OPTIONS``, ``AWKPATH``, ``PERL5OPT``, ``NODE_OPTIONS``...
JUDGED_VARIABLES = frozenset(
    {
        "PATH",
        "HOME",
        "PWD",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LC_ALL",
        "DISPLAY",
        "XAUTHORITY",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_RUNTIME_DIR",
        "XDG_SESSION_TYPE",
        "XDG_DATA_DIRS",
        "XDG_CONFIG_DIRS",
        "XDG_CURRENT_DESKTOP",
        "XDG_SESSION_DESKTOP",
        "DESKTOP_SESSION",
        "GNOME_SHELL_SESSION_MODE",
        "GSETTINGS_SCHEMA_DIR",
        "GSETTINGS_BACKEND",
        "DCONF_PROFILE",
        "QT_ACCESSIBILITY",
        "GTK_A11Y",
        "TMPDIR",
        "PYTHONNOUSERSITE",
        "PYTHONSAFEPATH",
        "PYTHONDONTWRITEBYTECODE",
    }
)


def judged_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for an evaluation command: only :data:`JUDGED_VARIABLES` of it (``PATH`` cut to
    system directories), with :data:`JUDGE_ENV` and :data:`JUDGE_GIT_CONFIG` on top.

    >>> e = judged_env({"HOME": "/home/user", "LD_PRELOAD": "/home/user/x.so",
    ...                 "PATH": "/home/user/bin:/usr/bin"})
    >>> e["GIT_CONFIG_KEY_0"], e["GIT_CONFIG_VALUE_0"], e["PIP_CONFIG_FILE"], e["MAGIC"]
    ('core.fsmonitor', 'false', '/dev/null', '/usr/share/misc/magic')
    >>> "LD_PRELOAD" in e, e["PATH"]
    (False, '/usr/bin')
    """
    out = {k: v for k, v in env.items() if k in JUDGED_VARIABLES}
    if "PATH" in out:  # never the home or a directory anyone may write (``/tmp``)
        out["PATH"] = os.pathsep.join(
            d for d in out["PATH"].split(os.pathsep) if _system_dir(d, env.get("HOME"))
        )
    out.update(JUDGE_ENV)
    out["GIT_CONFIG_COUNT"] = str(len(JUDGE_GIT_CONFIG))
    for i, (key, value) in enumerate(JUDGE_GIT_CONFIG):
        out[f"GIT_CONFIG_KEY_{i}"], out[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return out


def _system_dir(path: str, home: str | None) -> bool:
    """An existing absolute directory outside the player's home that not everyone may write to
    (the judge's task-python dir may sit in a temp dir; ``/tmp`` itself, or a directory the
    player could create there later, may not be on the path).

    >>> _system_dir("/usr/bin", "/home/user"), _system_dir("/home/user/bin", "/home/user")
    (True, False)
    >>> _system_dir("/tmp", None), _system_dir("bin", None)
    (False, False)
    """
    if not path.startswith("/"):
        return False
    norm = os.path.normpath(path)
    if home and (norm == home or norm.startswith(home.rstrip("/") + "/")):
        return False
    try:
        return not os.stat(norm).st_mode & 0o002
    except OSError:
        return False


def _uid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _tty(pid: int) -> int:
    """The controlling terminal of ``pid`` (0: none; -1: unreadable)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[4])
    except (OSError, IndexError, ValueError):
        return -1


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _start(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def program_is_app(path: str) -> bool:
    """An installed program that does not run code given to it.

    >>> program_is_app("/usr/bin/socat"), program_is_app("/usr/bin/bash")
    (True, False)
    >>> program_is_app("/home/user/socat"), program_is_app("/usr/bin/vim.basic")
    (False, False)
    """
    return path.startswith(APP_ROOTS) and not RUNS_CODE.fullmatch(os.path.basename(path))


def app_program(pid: int) -> bool:
    """Whether ``pid`` executes an installed application (or one of our supervisor scripts)."""
    exe = _exe(pid).removesuffix(" (deleted)")
    if not exe.startswith(APP_ROOTS):
        return False
    if not RUNS_CODE.fullmatch(os.path.basename(exe)):
        return True
    try:  # an interpreter running one of our read-only supervisor scripts
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    # resolved: `/opt/osworld-gym/shims/../../../tmp/x.py` is the player's script, not ours
    return len(argv) > 1 and os.path.realpath(argv[1].decode("utf-8", "replace")).startswith(
        OUR_SCRIPTS
    )


_app_program = app_program  # the old name


def live_app(pid: int) -> bool:
    """Whether ``pid`` executes one of :data:`LIVE_APPS` (by its executable, not its name)."""
    exe = _exe(pid).removesuffix(" (deleted)")
    return exe.startswith(APP_ROOTS) and bool(LIVE_APPS.fullmatch(os.path.basename(exe)))


#: Desktop GUI apps (by the basename of ``/proc/PID/exe``) that may keep running below the
#: desktop's infrastructure, below setup roots, or (:data:`LIVE_APPS`) anywhere: the apps of
#: :data:`osworld_gym.doctor.PACKAGES` that tasks use, as the kernel sees them (LibreOffice's
#: ``soffice.bin`` behind the ``soffice`` script, Chromium's helpers, GIMP's versioned binary).
#: Never a relay or an interpreter (``socat``, ``nc``, ``busybox``, ``python3``, ``sh``): the
#: session bus or openbox starting one of those for the agent is the agent's process.
GUI_APPS = re.compile(
    r"soffice\.bin|oosplash|chromium(-browser)?|chrome|chrome_crashpad_handler|chrome-sandbox|"
    r"vlc|gimp(-\d+(\.\d+)*)?|thunderbird(-bin)?|mousepad|nautilus|evince|eog|gedit|"
    r"gnome-text-editor|xdg-desktop-portal[-\w]*|dconf-service|gvfsd[-\w]*|gvfs-[-\w]+"
)
#: Roots a shared object of a trusted app must come from (the task python's venv is in /opt).
LIB_ROOTS = ("/usr/", "/lib/", "/lib64/", "/lib32/", "/libx32/", "/opt/")
#: Where search paths in a trusted app's environment may also point: the desktop profile's data
#: (``XDG_DATA_DIRS=/run/osworld-profile/data:...``), written by the judge, read-only to the
#: player.
ENV_PATH_ROOTS = ("/run/osworld-profile/",)
#: Environment variables that make the loader or an app load code the agent chose, whatever
#: their value (any ``LD_*`` too) ...
INJECTING_ENV = re.compile(r"LD_\w*|GCONV_PATH|GLIBC_TUNABLES|NODE_OPTIONS|PYTHONSTARTUP")
#: ... and search paths for plugins, modules, scripts: refused with an entry outside
#: :data:`LIB_ROOTS` (``GTK_MODULES=gail:atk-bridge`` names system modules: fine).
INJECTING_PATHS = re.compile(
    r"PYTHONPATH|PYTHONHOME|PYTHONUSERBASE|GIO_EXTRA_MODULES|GTK_PATH|GTK_MODULES|GTK_EXE_PREFIX|"
    r"GST_PLUGIN[_\w]*|VLC_PLUGIN_PATH|VLC_DATA_PATH|LUA_C?PATH[_\d]*|QT_PLUGIN_PATH|"
    r"QT_QPA_PLATFORM_PLUGIN_PATH|URE_BOOTSTRAP|XDG_DATA_HOME|XDG_DATA_DIRS|MOZ_PLUGIN_PATH"
)
#: Flags (without their leading dashes) that make an app run, load or serve what the agent
#: chose: a command prefix for Chromium's children, an extension, rewritten DNS or a proxy;
#: a VLC interface (``--extraintf http --http-src ~/fake`` serves a forged ``status.xml``),
#: lua scripts, another config file.
DENIED_FLAGS = {
    "chromium": re.compile(
        r"(renderer|utility|gpu|plugin|ppapi-plugin|nacl)-(cmd-prefix|launcher)|"
        r"browser-subprocess-path|gpu-launcher|"
        r"host-resolver-rules|host-rules|proxy-server|proxy-pac-url|proxy-auto-detect|"
        r"remote-debugging-pipe|utility-and-browser|single-process|in-process-gpu|"
        r"enable-logging|log-file|js-flags|register-pepper-plugins|ppapi-in-process|"
        r"user-agent|explicitly-allowed-ports"
    ),
    "vlc": re.compile(
        r"I\w*|intf|extraintf|control|lua[-\w]*|http[-\w]*|config|"
        r"plugin-path|data-path|sout[-\w]*|rc[-\w]*|telnet[-\w]*|cli[-\w]*"
    ),
}
#: vlcrc keys that point VLC's web interface at the agent's files or scripts.
DENIED_VLCRC = re.compile(r"^\s*(http-src|lua-intf|lua-config|rc-\w+|cli-\w+|telnet-\w+)\s*=", re.M)


def _family(exe: str) -> str:
    name = os.path.basename(exe)
    if LIVE_APPS.fullmatch(name) and name != "vlc":
        return "chromium"
    return name


def injected(pid: int) -> str | None:
    """Why ``pid``'s app may run code the agent chose (``None``: it runs as installed): an
    ``LD_*``-like variable in its environment, a denied flag (:data:`DENIED_FLAGS`), a shared
    object mapped from outside :data:`LIB_ROOTS`, VLC scripts or interfaces in the home.
    Unreadable counts as injected."""
    exe = _exe(pid).removesuffix(" (deleted)")
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        maps = Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except OSError as e:
        return f"unreadable ({e.strerror})"
    env = {}
    for item in environ:
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep:
            env[key] = value
    for key, value in env.items():
        if value and INJECTING_ENV.fullmatch(key):
            return f"{key} in its environment"
        if (
            value
            and INJECTING_PATHS.fullmatch(key)
            and any(
                not os.path.realpath(v).startswith(LIB_ROOTS + ENV_PATH_ROOTS)
                for v in re.split(r"[:;]+", value)
                if "/" in v
            )
        ):
            return f"{key} in its environment"
    deny = DENIED_FLAGS.get(_family(exe))
    if deny is not None:
        # Chromium rewrites its cmdline into one space-joined string (its process title)
        for a in (
            " ".join(x.decode("utf-8", "replace") for x in argv[1:]).split()
            + " ".join(x.decode("utf-8", "replace") for x in argv[:1]).split()[1:]
        ):
            if a.startswith("-") and a not in ("-", "--"):
                name = a.lstrip("-").split("=", 1)[0]
                if (
                    deny.fullmatch(name)
                    or (_family(exe) == "vlc" and a.startswith("-I"))
                    or (
                        # Debian's wrapper always adds both, empty or naming /usr/share's
                        name in ("load-extension", "disable-extensions-except")
                        and any(
                            not os.path.realpath(v).startswith(LIB_ROOTS)
                            for v in a.partition("=")[2].split(",")
                            if v
                        )
                    )
                ):
                    return f"flag {a.split('=', 1)[0]}"
    for line in maps.splitlines():
        f = line.split(None, 5)
        if len(f) == 6 and "x" in f[1] and f[5].startswith("/"):
            path = f[5].removesuffix(" (deleted)")
            if not path.startswith(LIB_ROOTS) and not path.startswith("/memfd:"):
                return f"code mapped from {path}"
    if _family(exe) == "vlc":
        home = env.get("HOME", "")
        if home:
            if Path(home, ".local/share/vlc/lua").exists():
                return "lua scripts in ~/.local/share/vlc/lua"
            try:
                rc = Path(home, ".config/vlc/vlcrc").read_text(errors="replace")
            except OSError:
                rc = ""
            if m := DENIED_VLCRC.search(rc):
                return f"{m.group(1)} in its vlcrc"
    return None


def gui_app(pid: int) -> bool:
    """A desktop GUI app (:data:`GUI_APPS`, by executable) running as installed
    (:func:`injected`)."""
    exe = _exe(pid).removesuffix(" (deleted)")
    return (
        exe.startswith(APP_ROOTS)
        and bool(GUI_APPS.fullmatch(os.path.basename(exe)))
        and injected(pid) is None
    )


def trusted_child(pid: int, parent: int, of_setup: bool = False) -> bool:
    """Whether ``pid``, a child of the trusted ``parent``, is trusted: one of our read-only
    supervisor scripts, a fork of its parent that did not exec (same installed executable,
    not one that runs code: ``socat``'s per-connection children, Chromium's zygote), or a
    :func:`gui_app`; never with a controlling terminal. A GUI app that a setup root (``of_setup``,
    e.g. the shell of a ``"shell": true`` launch) started directly is trusted with the flags
    the task author gave it (``vlc --extraintf http``)."""
    if _tty(pid) != 0:
        return False
    exe = _exe(pid).removesuffix(" (deleted)")
    if not exe.startswith(APP_ROOTS):
        return False
    if of_setup and GUI_APPS.fullmatch(os.path.basename(exe)):
        return True
    if RUNS_CODE.fullmatch(os.path.basename(exe)):
        return app_program(pid)  # our supervisor scripts only
    if exe == _exe(parent).removesuffix(" (deleted)"):
        return True
    return gui_app(pid)


class SetupRoots:
    """The processes setup launched (``/setup/launch``, ``/open_file``): the roots of trust.

    The task author is trusted, so whatever setup launches keeps running while the judge
    reads the desktop (a task's local web server, Chromium, ``socat``); a root counts only
    while the process with its pid is the one launched (start time). Its descendants are
    trusted only as :func:`trusted_pids` says.
    """

    def __init__(self) -> None:
        self._roots: dict[int, int] = {}
        self._lock = threading.Lock()

    def add(self, pid: int) -> None:
        start = _start(pid)
        if start is not None:
            with self._lock:
                self._roots[pid] = start

    def pids(self) -> set[int]:
        with self._lock:
            for pid, start in list(self._roots.items()):
                if _start(pid) != start:
                    del self._roots[pid]
            return set(self._roots)

    def clear(self) -> None:
        with self._lock:
            self._roots.clear()


def trusted_pids(
    infrastructure: set[int], roots: set[int], procs: list[ProcInfo] | None = None
) -> set[int]:
    """Processes the judge trusts (see the module's docstring): ``infrastructure`` and setup
    ``roots``, and below them, from parent to child, installed applications with no
    controlling terminal."""
    procs = all_processes() if procs is None else procs
    children: dict[int, list[int]] = {}
    for p in procs:
        if p.state not in "ZX":
            children.setdefault(p.ppid, []).append(p.pid)
    live = {p.pid for p in procs if p.state not in "ZX"}
    out = {pid for pid in infrastructure | roots if pid in live}
    out |= {pid for pid in live if pid not in out and live_app(pid) and gui_app(pid)}
    stack = list(out)
    while stack:
        parent = stack.pop()
        for child in children.get(parent, []):
            if child not in out and trusted_child(child, parent, parent in roots):
                out.add(child)
                stack.append(child)
    return out


def listener_pids(port: int) -> set[int]:
    """The processes holding a socket that LISTENs on TCP ``port`` (any address, v4 or v6) in
    this network namespace: socket inodes from ``/proc/net/tcp*`` matched against every
    process's open descriptors (readable to the judge only)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            # local_address is ADDR:PORT in hex; state 0A is LISTEN
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f[9])
    if not inodes:
        return set()
    wanted = {f"socket:[{i}]" for i in inodes}
    owners: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{name}/fd/{fd}") in wanted:
                    owners.add(int(name))
                    break
            except OSError:
                continue
    return owners


def command_ports(argv: list[str] | str) -> set[int]:
    """Unprivileged TCP port numbers a command names (as whole words: ``curl
    localhost:1337/json``, ``{"ports": [1337, 9222]}``).

    >>> sorted(command_ports(["bash", "-c", "curl -s http://127.0.0.1:1337/json/list"]))
    [1337]
    >>> sorted(command_ports('{"ports": [1337, 9222], "timeout": 10}')), command_ports("ls 80")
    ([1337, 9222], set())
    """
    text = argv if isinstance(argv, str) else " ".join(argv)
    return {
        int(m) for m in re.findall(r"(?<![\w.])(\d{4,5})(?![\w.])", text) if 1024 <= int(m) < 65536
    }


def untrusted_listeners(ports: set[int], trusted: set[int]) -> dict[int, list[int]]:
    """``{port: pids}`` for each of ``ports`` with a listener the judge does not trust."""
    out = {}
    for port in sorted(ports):
        bad = sorted(listener_pids(port) - trusted)
        if bad:
            out[port] = bad
    return out


def describe(pid: int) -> str:
    exe = os.path.basename(_exe(pid).removesuffix(" (deleted)"))
    if exe:
        return f"{exe} (pid {pid})"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        name = os.path.basename(argv[0].decode("utf-8", "replace")) or "?"
    except (OSError, IndexError):
        name = "?"
    return f"{name} (pid {pid})"


class Freezer:
    """The guest's side of the player's freezer cgroup (see
    :class:`~osworld_gym.providers.limits.PlayerFreezer`): ``root`` is the player's cgroup
    directory as bound into the sandbox, with a ``held`` child."""

    def __init__(self, root: str | Path, version: int):
        self.root = Path(root)
        self.held = self.root / "held"
        self.version = version
        self._lock = threading.Lock()
        self._holders = 0  # concurrent evaluation commands: `held` thaws after the last one
        self._known: set[int] = set()  # trusted members of the root, as the watcher knows them
        self._watcher: threading.Thread | None = None
        self._watching = threading.Event()
        self._sigstop = False  # the freezer timed out: held processes are SIGSTOPped as well
        self._stopped: list[int] = []
        if not (self.held / "cgroup.procs").exists():
            raise OSError(f"{self.held} is not a cgroup")

    def _set(self, d: Path, frozen: bool) -> None:
        if self.version == 2:
            (d / "cgroup.freeze").write_text("1" if frozen else "0")
        else:
            (d / "freezer.state").write_text("FROZEN" if frozen else "THAWED")

    def _is_frozen(self, d: Path) -> bool:
        if self.version == 2:
            return "frozen 1" in (d / "cgroup.events").read_text().splitlines()
        return (d / "freezer.state").read_text().strip() == "FROZEN"

    def _wait(self, d: Path, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while not self._is_frozen(d):
            if time.monotonic() > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        return True

    def members(self, d: Path | None = None) -> list[int]:
        text = ((d or self.root) / "cgroup.procs").read_text()
        return [int(x) for x in text.split()]

    @contextmanager
    def hold(
        self, trusted: Callable[[], set[int]], timeout: float = FREEZE_TIMEOUT_S
    ) -> Iterator[int]:
        """Freeze the player, move every process not in ``trusted()`` (asked while everything
        is frozen) into ``held``, thaw the rest; thaw ``held`` on exit. Yields how many
        processes are held."""
        with self._lock:
            self._holders += 1
            keep = self._hold_now(trusted, timeout)
            if self._holders == 1:
                self._known = set(keep)
                self._watching.set()
                self._watcher = threading.Thread(
                    target=self._watch, daemon=True, name="freezer-watch"
                )
                self._watcher.start()
        try:
            held = len(self.members(self.held))
            log.debug("holding %d player processes during an evaluation command", held)
            yield held
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    self._watching.clear()
                    if self._watcher is not None:
                        self._watcher.join()
                        self._watcher = None
                    self._set(self.held, False)
                    for pid in self._stopped:
                        try:
                            os.kill(pid, signal.SIGCONT)
                        except OSError:
                            pass
                    self._stopped, self._sigstop = [], False

    def _watch(self) -> None:
        """While a hold lasts: every process that appears in the root (a child a trusted process
        forked after the hold began) goes into ``held`` at once, frozen; it comes back only if
        the rule trusts it (:func:`trusted_child` of a trusted parent). Polled every
        :data:`WATCH_INTERVAL_S`: a new process runs at most that long before it is frozen."""
        procs = self.root / "cgroup.procs"
        held = self.held / "cgroup.procs"
        admitted: dict[int, str] = {}  # pid -> the executable it was admitted with
        while self._watching.is_set():
            try:
                new = [int(x) for x in procs.read_text().split() if int(x) not in self._known]
            except OSError:
                new = []
            # a fork admitted as its parent's copy that then execs something else is new again
            for pid, exe in list(admitted.items()):
                if _exe(pid) != exe:
                    del admitted[pid]
                    self._known.discard(pid)
                    new.append(pid)
            for pid in new:
                try:
                    held.write_text(str(pid))
                except OSError:
                    self._known.discard(pid)
                    continue
                parent = _ppid(pid)
                # (not in /proc yet, mid-fork: parent None, so held)
                if parent in self._known and trusted_child(pid, parent):
                    try:
                        procs.write_text(str(pid))
                        self._known.add(pid)
                        admitted[pid] = _exe(pid)
                    except OSError:
                        pass
                else:
                    if self._sigstop:
                        try:
                            os.kill(pid, signal.SIGSTOP)
                            self._stopped.append(pid)
                        except OSError:
                            pass
                    log.info("froze %s, started during an evaluation command", describe(pid))
            time.sleep(WATCH_INTERVAL_S)

    def _hold_now(self, trusted: Callable[[], set[int]], timeout: float) -> set[int]:
        self._set(self.held, True)
        try:
            self._set(self.root, True)
            try:
                root_frozen = self._wait(self.root, timeout)
                if not root_frozen:
                    log.warning(
                        "the player's cgroup did not freeze within %.0f s; its untrusted "
                        "processes are stopped with SIGSTOP too",
                        timeout,
                    )
                keep = trusted()
                for pid in self.members():
                    if pid in keep:
                        continue
                    try:
                        (self.held / "cgroup.procs").write_text(str(pid))
                    except (ProcessLookupError, OSError) as e:
                        if getattr(e, "errno", None) != errno.ESRCH:
                            raise
            finally:
                self._set(self.root, False)
            if not self._wait(self.held, timeout) or not root_frozen:
                # never evaluate with the agent live: what the freezer did not stop, SIGSTOP
                # does (SIGCONT when the hold ends); the watcher stops what comes later
                log.warning(
                    "held player processes did not freeze within %.0f s; stopping them "
                    "with SIGSTOP",
                    timeout,
                )
                self._sigstop = True
                for pid in self.members(self.held):
                    try:
                        os.kill(pid, signal.SIGSTOP)
                        self._stopped.append(pid)
                    except OSError:
                        pass
            return keep
        except BaseException:
            if self._holders == 1:
                self._set(self.held, False)
            self._holders -= 1
            raise


@contextmanager
def player_held(player_uid: int, keep: set[int]) -> Iterator[int]:
    """The fallback without a freezer cgroup: SIGSTOP every process of ``player_uid`` below
    this one that runs code (:data:`RUNS_CODE`) or a program from outside :data:`APP_ROOTS`,
    for the duration; SIGCONT after. ``keep``: pids that keep running regardless (window
    manager, session bus). Yields how many processes were stopped.
    """
    stopped: list[int] = []
    seen: set[int] = set()
    try:
        for _ in range(8):  # a process may fork while we scan: rescan until nothing is new
            new = [
                p.pid
                for p in descendants(os.getpid())
                if p.pid not in seen
                and p.pid not in keep
                and p.state not in "ZXT"
                and _uid(p.pid) == player_uid
                and not app_program(p.pid)
            ]
            if not new:
                break
            for pid in new:
                seen.add(pid)
                try:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
                except (ProcessLookupError, PermissionError):
                    pass
        if stopped:
            log.debug("holding %d player processes during an evaluation command", len(stopped))
        yield len(stopped)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
