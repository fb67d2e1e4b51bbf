"""Which OSWorld tasks a backend can run, and why not: :func:`classify`.

OSWorld's 369 tasks assume its Ubuntu/GNOME image with network access, Google accounts, VS Code
and every app installed. The local sandbox has none of the first four and only the apps this
machine has. :func:`classify` says, per task, whether osworld-gym can run it on a provider, with
a reason a report can group by. ``load_tasks`` keeps the supported ones and reports the
rest (``TaskSet.unsupported``); ``strict=True`` raises instead.

Reasons, checked in this order (the first found is :attr:`Support.reason`; all are in
:attr:`Support.reasons`), each starting with a fixed phrase:

* ``needs a Google account``: ``googledrive``/``login`` steps, ``googledrive_file`` getters;
* ``needs a live website``: ``proxy: true``, or an ``http(s)`` URL of a real host (not
  localhost, not a reserved ``example``/``.test`` name) opened by ``chrome_open_tabs`` or
  ``open``, or passed to a browser, ``xdg-open``, ``wget`` or ``curl`` in a setup command
  (``download`` steps are served from the file cache), or a browser task whose instruction
  names a site the config does not open (:mod:`.needs`);
* ``needs the network``: a step that installs software (``apt-get install``, ``pip install``,
  ``snap``, ...; :mod:`.needs`);
* ``needs VS Code``: domain ``vs_code``, a ``code`` command, a ``vscode_config`` getter;
* ``needs GNOME``: a ``gsettings``/``dconf`` command (fine on the local ``ubuntu`` desktop
  profile, which runs GSettings over dconf; not on ``openbox``), ``change_wallpaper``, a
  ``vm_wallpaper`` getter (GSettings' picture-uri: fine on ``ubuntu``); a ``default_video_player``
  getter (GNOME's Totem is OSWorld's default; here VLC is the only video player, so such a
  task would start solved);
* ``needs systemd``: ``timedatectl`` and its siblings (:func:`.needs.systemd_programs`);
* ``needs apps not installed``: apps the domain, ``related_apps``, commands, opened files or
  getters imply (chromium, libreoffice and its calc/writer/impress modules, gimp, vlc,
  thunderbird), with the ``apt-get install`` line;
* ``needs programs not on the desktop``: any other program a setup step, postconfig step or
  evaluator command runs that the desktop's PATH (:func:`desktop_path`: the task python, our
  shims, the system directories; not the host's PATH) lacks, with the packages to install;
* ``unsupported setup step``, ``unknown metric``, ``unknown getter``,
  ``unsupported compare_table rule``, ``unsupported metric option``: what osworld-gym does not
  implement yet (names given);
* ``invalid task``: anything else task validation rejects.

What a desktop has comes from the desktops configured (:func:`capabilities`, never assumed): the
local sandbox probes this machine (GSettings following the desktop profile: ``profile=``, else
``$OSWORLD_GYM_PROFILE``, else ``ubuntu``); our docker image says what it holds in the manifest
its build wrote into it; OSWorld's VM image (docker with ``vm_path``, a guest reached by URL) has
network, Google, VS Code, GNOME and every app.

>>> from osworld_gym.providers.capabilities import OSWORLD_IMAGE
>>> task = {"id": "t", "instruction": "x", "snapshot": "vscode", "related_apps": ["vscode"],
...         "config": [{"type": "launch", "parameters": {"command": ["code"]}}],
...         "evaluator": {"func": "infeasible"}}
>>> support = classify(task)
>>> support.supported, support.reason
(False, 'needs VS Code (domain vs_code)')
>>> classify(task, provider=OSWORLD_IMAGE).supported
True
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from osworld_gym.errors import TaskError
from osworld_gym.evaluators.metrics.options import option_problems
from osworld_gym.providers import PROVIDERS, provider_class
from osworld_gym.providers.capabilities import APP_KEYS, Capabilities
from osworld_gym.support.needs import missing_programs, network_steps, systemd_programs
from osworld_gym.support.packages import PACKAGES
from osworld_gym.support.programs import is_shell, json_object, json_objects
from osworld_gym.tasks import evaluator_registry as registry
from osworld_gym.tasks.setup import STEP_PARAMETERS
from osworld_gym.tasks.task import Task


@dataclass(frozen=True)
class Support:
    """Whether a task can run, and if not the first reason (``reason``) and all (``reasons``)."""

    supported: bool
    reason: str | None = None
    reasons: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.supported


_LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1", "[::1]"}


def capabilities(
    provider: str | Capabilities,
    profile: str | None = None,
    provider_kwargs: dict[str, Any] | None = None,
) -> Capabilities:
    """Capabilities of desktops of ``provider`` made with ``provider_kwargs``
    (:meth:`~osworld_gym.providers.base.Provider.config_capabilities`: ``"local"``/``"fake"``:
    this machine, with desktop ``profile``; ``"docker"``: the configured image's manifest, or
    OSWorld's VM image with ``vm_path``), or as given.

    Raises:
        ValueError: no provider has that name.
        MissingDependencyError: the docker image to read is not here (the message says how to
            build it) or the daemon is unreachable.
    """
    if isinstance(provider, Capabilities):
        return provider
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; choose one of {sorted(PROVIDERS)}")
    return provider_class(provider).config_capabilities(provider_kwargs, profile)


# -- what a task uses --------------------------------------------------------------------------

_DOMAIN_APPS = {
    "chrome": "chromium",
    "gimp": "gimp",
    "thunderbird": "thunderbird",
    "vlc": "vlc",
    "libreoffice_calc": "libreoffice_calc",
    "libreoffice_writer": "libreoffice_writer",
    "libreoffice_impress": "libreoffice_impress",
}
_PROGRAM_APPS = {
    "google-chrome": "chromium",
    "google-chrome-stable": "chromium",
    "chromium": "chromium",
    "chromium-browser": "chromium",
    "gimp": "gimp",
    "vlc": "vlc",
    "cvlc": "vlc",
    "thunderbird": "thunderbird",
}
#: Programs :func:`_apps` reports as apps (one reason, not two).
_APP_PROGRAMS = frozenset({*_PROGRAM_APPS, "libreoffice", "soffice"})
_LO_FLAGS = {
    "--calc": "libreoffice_calc",
    "--writer": "libreoffice_writer",
    "--impress": "libreoffice_impress",
}
_SUFFIX_APPS = {
    **dict.fromkeys((".xlsx", ".xls", ".ods", ".csv"), "libreoffice_calc"),
    **dict.fromkeys((".docx", ".doc", ".odt", ".rtf"), "libreoffice_writer"),
    **dict.fromkeys((".pptx", ".ppt", ".odp"), "libreoffice_impress"),
    **dict.fromkeys((".mp4", ".mp3", ".avi", ".mkv", ".webm", ".wav", ".flac"), "vlc"),
    ".xcf": "gimp",
}
_GETTER_APPS = {
    "vlc_config": "vlc",
    "vlc_playing_info": "vlc",
    "active_tab_info": "chromium",
    "open_tabs_info": "chromium",
    "active_url_from_accessTree": "chromium",
    "enable_do_not_track": "chromium",
    "default_search_engine": "chromium",
    "profile_name": "chromium",
    "bookmarks": "chromium",
}
_STEP_COMMANDS = {"launch", "execute", "command", "execute_with_verification"}
_URL = re.compile(r"https?://[^\s'\"<>]+")
#: Programs whose URL arguments are fetched from the network.
_WEB_PROGRAMS = frozenset(
    {
        "google-chrome",
        "google-chrome-stable",
        "chromium",
        "chromium-browser",
        "firefox",
        "xdg-open",
        "wget",
        "curl",
    }
)
_WEB_COMMAND = re.compile(
    r"(?:^|[;&|(]\s*|\bsudo\s+)(?:\S*/)?(?:"
    + "|".join(re.escape(p) for p in sorted(_WEB_PROGRAMS))
    + r")\s"
)
#: Reserved names (RFC 2606/6761) that are never live websites.
_RESERVED_SUFFIXES = (".example", ".test", ".invalid", ".localhost", ".local")
_RESERVED_HOSTS = frozenset(
    {
        "example.com",
        "example.org",
        "example.net",
        "www.example.com",
        "www.example.org",
        "www.example.net",
    }
)
_CODE = re.compile(r"(?:^|[;&|(]\s*|\bsudo\s+)(?:\S*/)?code(?:\s|$)")
_GNOME = re.compile(r"\b(?:gsettings|dconf)\b")


@dataclass
class _Uses:
    steps: list[dict[str, Any]] = field(default_factory=list)
    #: (argv, text, the step it comes from or None for an evaluator command)
    commands: list[tuple[list[str], str, dict[str, Any] | None]] = field(default_factory=list)
    getters: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _uses(raw: dict[str, Any]) -> _Uses:
    uses = _Uses()
    evaluator = json_object(raw.get("evaluator"))
    uses.steps = [
        s
        for s in (raw.get("config") or []) + (evaluator.get("postconfig") or [])
        if isinstance(s, dict)
    ]
    for step in uses.steps:
        params = step.get("parameters") or {}
        if step.get("type") in _STEP_COMMANDS and "command" in params:
            uses.commands.append((*_command(params["command"]), step))
    for key in ("result", "expected"):
        uses.getters.extend(json_objects(evaluator.get(key)))
    for g in uses.getters:
        if g.get("type") in ("vm_command_line", "vm_command_error") and "command" in g:
            uses.commands.append((*_command(g["command"]), None))
    funcs = evaluator.get("func")
    funcs = [funcs] if isinstance(funcs, str) else [f for f in funcs or [] if isinstance(f, str)]
    options = evaluator.get("options")
    per = options if isinstance(options, list) else [options] * len(funcs)
    uses.metrics = [(f, o if isinstance(o, dict) else {}) for f, o in zip(funcs, per, strict=False)]
    return uses


def _command(command: Any) -> tuple[list[str], str]:
    if isinstance(command, list):
        argv = [str(a) for a in command]
        return argv, " ".join(argv)
    text = str(command)
    try:
        argv = shlex.split(text)
    except ValueError:
        argv = text.split()
    return argv, text


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


# -- the checks ---------------------------------------------------------------------------------


def _google(uses: _Uses) -> list[str]:
    kinds = sorted({s["type"] for s in uses.steps if s.get("type") in ("googledrive", "login")})
    if any(g.get("type") == "googledrive_file" for g in uses.getters):
        kinds.append("googledrive_file getter")
    return [f"needs a Google account ({', '.join(kinds)})"] if kinds else []


def _is_live(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    if host in _LOCAL_HOSTS or host.endswith(_RESERVED_SUFFIXES):
        return False
    return host not in _RESERVED_HOSTS


def _live_urls(raw: dict[str, Any], uses: _Uses) -> list[str]:
    if raw.get("proxy") is True:
        return ["needs a live website (proxy: true)"]
    urls: list[str] = []
    for step in uses.steps:
        params = step.get("parameters") or {}
        if step.get("type") in ("chrome_open_tabs", "chrome_close_tabs", "open"):
            urls += [u for text in _strings(params) for u in _URL.findall(text)]
    for argv, text, step in uses.commands:
        if step is None:
            continue
        if (argv and Path(argv[0]).name in _WEB_PROGRAMS) or _WEB_COMMAND.search(text):
            urls += _URL.findall(text)
    live = [u for u in urls if _is_live(u)]
    return [f"needs a live website ({live[0]})"] if live else []


def _vscode(task: Task, uses: _Uses) -> list[str]:
    if task.domain == "vs_code" or {"vscode", "vs_code"} & set(task.related_apps):
        return ["needs VS Code (domain vs_code)"]
    if any(g.get("type") == "vscode_config" for g in uses.getters):
        return ["needs VS Code (vscode_config getter)"]
    for argv, text, _ in uses.commands:
        if (argv and Path(argv[0]).name == "code") or _CODE.search(text):
            return ["needs VS Code (code command)"]
    return []


def _gnome(uses: _Uses, gsettings: bool) -> list[str]:
    # the vm_wallpaper getter reads GSettings' picture-uri, as OSWorld's /wallpaper does;
    # OSWorld's change_wallpaper setup step is not implemented here
    if any(s.get("type") == "change_wallpaper" for s in uses.steps) or (
        not gsettings and any(g.get("type") == "vm_wallpaper" for g in uses.getters)
    ):
        return ["needs GNOME (wallpaper)"]
    for _, text, _ in uses.commands if not gsettings else ():
        if m := _GNOME.search(text):
            return [f"needs GNOME ({m.group(0)})"]
    return []


def _default_apps(uses: _Uses) -> list[str]:
    """Tasks that ask to make an app the default need another default to start from: OSWorld's
    Ubuntu opens videos with Totem; the local desktop has VLC only, so doing nothing would win."""
    if any(g.get("type") == "default_video_player" for g in uses.getters):
        return ["needs GNOME (its default video player, Totem: here VLC already is the default)"]
    return []


def _apps(task: Task, uses: _Uses, caps: Capabilities) -> list[str]:
    wanted: set[str] = set()
    for name in [task.domain, *task.related_apps]:
        if name in _DOMAIN_APPS:
            wanted.add(_DOMAIN_APPS[name])
    for argv, _, step in uses.commands:
        if step is None or not argv or is_shell(step.get("parameters") or {}):
            continue
        program = Path(argv[0]).name
        if program in _PROGRAM_APPS:
            wanted.add(_PROGRAM_APPS[program])
        elif program in ("libreoffice", "soffice"):
            modules = [_LO_FLAGS[a] for a in argv[1:] if a in _LO_FLAGS]
            modules += [
                _SUFFIX_APPS[Path(a).suffix.lower()]
                for a in argv[1:]
                if Path(a).suffix.lower() in _SUFFIX_APPS
            ]
            wanted.update(modules or ["libreoffice"])
    for step in uses.steps:
        if step.get("type") == "open":
            suffix = Path(str((step.get("parameters") or {}).get("path", ""))).suffix.lower()
            if suffix in _SUFFIX_APPS:
                wanted.add(_SUFFIX_APPS[suffix])
    wanted.update(_GETTER_APPS[g["type"]] for g in uses.getters if g.get("type") in _GETTER_APPS)
    missing = sorted(wanted - caps.apps) if caps.apps is not None else []
    if not missing:
        return []
    if caps.programs is not None:  # an image's manifest: the image is what lacks them
        return [
            f"needs apps not installed: {', '.join(missing)} "
            "(not in the image: use our full image, `osworld-gym image build --apps full`)"
        ]
    packages = sorted({PACKAGES.get(APP_KEYS[k][0], APP_KEYS[k][0]) for k in missing})
    return [
        f"needs apps not installed: {', '.join(missing)} "
        f"(apt-get install {' '.join(packages)}, or run scripts/install.sh)"
    ]


def _implementation(uses: _Uses) -> list[str]:
    out = []
    steps = sorted({str(s.get("type")) for s in uses.steps if s.get("type") not in STEP_PARAMETERS})
    if steps:
        out.append(f"unsupported setup step: {', '.join(steps)}")
    unknown = sorted({f for f, _ in uses.metrics if not registry.has_metric(f)})
    if unknown:
        out.append(f"unknown metric: {', '.join(unknown)}")
    getters = sorted(
        {str(g.get("type")) for g in uses.getters if not registry.has_getter(str(g.get("type")))}
    )
    if getters:
        out.append(f"unknown getter: {', '.join(getters)}")
    for func, options in uses.metrics:
        if registry.has_metric(func):  # the metric declares what it honours (metrics.options)
            out += option_problems(func, registry.metric(func), options)
    return out


def classify(task: Task | dict[str, Any], provider: str | Capabilities = "local") -> Support:
    """Whether osworld-gym can run ``task`` (a :class:`Task` or OSWorld task JSON) on
    ``provider``; see the module docstring for the reasons."""
    raw = (task.raw or task.to_dict()) if isinstance(task, Task) else task
    if not isinstance(raw, dict):
        return Support(False, "invalid task (not an object)", ("invalid task (not an object)",))
    try:
        parsed = task if isinstance(task, Task) else Task.from_dict(raw, validate=False)
    except TaskError as exc:
        reason = f"invalid task: {exc}"
        return Support(False, reason, (reason,))
    caps = capabilities(provider)
    uses = _uses(raw)
    reasons: list[str] = []
    if not caps.google:
        reasons += _google(uses)
    if not caps.network:
        reasons += _live_urls(raw, uses)
        reasons += [
            r
            for r in network_steps(raw, parsed.instruction)
            if not (
                r.startswith("needs a live website")
                and any(x.startswith("needs a live website") for x in reasons)
            )
        ]
    if not caps.vscode:
        reasons += _vscode(parsed, uses)
    if not caps.gnome:
        reasons += _gnome(uses, caps.gsettings)
        reasons += _default_apps(uses)
        reasons += systemd_programs(raw)  # OSWorld's Ubuntu boots systemd; the sandbox does not
    reasons += _apps(parsed, uses, caps)
    reasons += missing_programs(raw, caps.path, skip=_APP_PROGRAMS, programs=caps.programs)
    reasons += _implementation(uses)
    if not reasons:
        try:
            parsed.validate()
        except TaskError as exc:
            reasons.append(f"invalid task: {exc}")
    if reasons:
        return Support(False, reasons[0], tuple(reasons))
    return Support(True)
