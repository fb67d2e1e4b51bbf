"""OSWorld's guest endpoints, with OSWorld's request and response shapes.

Where OSWorld answers plain text on success (``/setup/launch``, ``/setup/upload``, window
operations) we do too; every error is JSON ``{"status": "error", "message": ...}``.
Who runs a command: every command runs as the desktop user, as in OSWorld's VM (``ssh``,
``git`` and ``~`` depend on it). ``/execute`` and ``/execute_with_verification`` are how
evaluators read the desktop (``vm_command_line`` and friends): they run in the judge's cgroup
while the player's loose processes are held (:mod:`~osworld_gym.guest.judging`), so nothing the
agent left running can signal, trace or answer for them. ``/setup/execute`` and
``/setup/launch`` prepare the desktop the agent will use: what they start and create is the
player's, in the player's cgroup. Both kinds get
:meth:`~osworld_gym.guest.app.GuestApp.command_env`: the guest's fixed ``PATH``, cwd = the home
(as in OSWorld), no ``PYTHON*`` variables but ``PYTHONNOUSERSITE``/``PYTHONSAFEPATH``, and
``-I`` after a Python interpreter named as the program (:func:`isolate_python`); evaluation
commands also get :func:`~osworld_gym.guest.judging.judged_env` (the agent's ``~/.gitconfig``,
``.git/config``, ``pip.conf``, ``~/.wgetrc`` run none of its code and hide nothing from them).

Not implemented: ``/window_size``, ``/wallpaper``, ``/setup/change_wallpaper``,
``/setup/download_file`` (the host downloads and uploads), ``/run_python``, ``/run_bash_script``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import platform
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from osworld_gym.guest import files, opener
from osworld_gym.guest.a11y import A11yFailed, A11yUnavailable
from osworld_gym.guest.app import GuestApp
from osworld_gym.guest.judging import (
    command_ports,
    describe,
    judged_env,
    player_held,
    untrusted_listeners,
)
from osworld_gym.guest.processes import OutputTooLarge
from osworld_gym.guest.recording import RecordingFailed, RecordingStateError
from osworld_gym.guest.screen import encode_png
from osworld_gym.guest.server import (
    HTTPError,
    Request,
    Response,
    Router,
    json_response,
    text_response,
)
from osworld_gym.guest.task_python import TaskPython
from osworld_gym.protocol import routes

log = logging.getLogger(__name__)

EXECUTE_TIMEOUT_S = 120.0
MAX_EXECUTE_TIMEOUT_S = 3600.0
OPEN_FILE_TIMEOUT_S = 60.0
MAX_OPEN_FILE_TIMEOUT_S = 1800.0
MAX_TREE_ENTRIES = 20000
#: /execute's answer when the command would talk to an app port the agent took over
UNTRUSTED_LISTENER = 409


def _number(body: dict[str, Any], key: str, default: float, limit: float) -> float:
    t = body.get(key, default)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= limit:
        raise HTTPError(400, f"{key} must be a number of seconds in (0, {limit:g}], got {t!r}")
    return float(t)


def _timeout(body: dict[str, Any], default: float, limit: float) -> float:
    return _number(body, "timeout", default, limit)


_PYTHON = re.compile(r"python(3(\.\d+)?)?")


def isolate_python(argv: list[str] | str) -> list[str] | str:
    """``python3 -c ...`` → ``python3 -I -c ...``: no user site, no ``PYTHON*`` variables, no
    script dir or cwd on ``sys.path`` (a ``usercustomize.py`` or ``json.py`` the player left in
    the home is not imported). Shell strings are left alone (their Pythons get the same through
    the environment).

    >>> isolate_python(["python3", "-c", "print(1)"])
    ['python3', '-I', '-c', 'print(1)']
    >>> isolate_python(["/usr/bin/python", "-I", "x.py"]), isolate_python(["ls"])
    (['/usr/bin/python', '-I', 'x.py'], ['ls'])
    """
    if isinstance(argv, str) or not argv or not _PYTHON.fullmatch(os.path.basename(argv[0])):
        return argv
    if "-I" in argv[1:2]:
        return argv
    return [argv[0], "-I", *argv[1:]]


def command_from(app: GuestApp, body: dict[str, Any]) -> tuple[list[str] | str, bool]:
    """OSWorld's command rules: a string is shlex-split unless ``shell``; a list with ``shell``
    is joined; ``~`` / ``~/...`` arguments are expanded to the guest home."""
    command, shell = body.get("command"), body.get("shell", False)
    if not isinstance(shell, bool):
        raise HTTPError(400, f"shell must be true or false, got {shell!r}")
    if isinstance(command, str) and command.strip():
        if shell:
            return command, True
        try:
            command = shlex.split(command)
        except ValueError as e:
            raise HTTPError(400, f"cannot split command: {e}") from None
    elif not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
        raise HTTPError(400, "command must be a non-empty string or list of strings")
    elif shell:
        return " ".join(command), True
    return [str(app.resolve(a)) if a == "~" or a.startswith("~/") else a for a in command], False


def register(router: Router, app: GuestApp) -> None:
    """Add OSWorld's endpoints to ``router``."""
    # /execute runs task-author commands (setup steps, evaluator getters), never agent text:
    # they get the task python (guest/task_python.py) first on PATH, as on OSWorld's image
    task_python = TaskPython(app.state_dir, app.env)

    def screenshot(req: Request) -> Response:
        frame = app.screen.capture(cursor=True)
        return Response(200, encode_png(frame.image), "image/png")

    def run_command(body: dict[str, Any], judge: bool) -> dict[str, Any]:
        argv, shell = command_from(app, body)
        timeout = _timeout(body, EXECUTE_TIMEOUT_S, MAX_EXECUTE_TIMEOUT_S)
        try:
            res = run_as_user(isolate_python(argv), shell, timeout, judge)
        except subprocess.TimeoutExpired:
            raise HTTPError(504, f"command timed out after {timeout:g} s and was killed") from None
        except OutputTooLarge as e:  # `cat` of the agent's 800 MB file: never buffered whole
            raise HTTPError(routes.OUTPUT_TOO_LARGE, str(e)) from None
        except (FileNotFoundError, PermissionError, NotADirectoryError) as e:
            raise HTTPError(400, f"cannot run {argv!r}: {e}") from None
        return {
            "status": "success",
            "output": res.stdout.decode("utf-8", errors="replace"),
            "error": res.stderr.decode("utf-8", errors="replace"),
            "returncode": res.returncode,
        }

    def run_as_user(
        argv: list[str] | str, shell: bool, timeout: float, judge: bool
    ) -> subprocess.CompletedProcess:
        """Run as the desktop user; for the judge: in its cgroup, the player held still."""
        # task-author commands find the task python first on PATH (guest/task_python.py)
        env, cwd = task_python.env(app.command_env()), str(app.home)
        if judge:  # the agent's ~/.gitconfig, pip.conf... run none of its code for the judge
            env = judged_env(env)
        if judge:  # what the task's last steps set off finishes first (killed shells' history)
            app.finish_task_steps()
        if app.player is None or not judge:
            return app.registry.run(
                argv, shell=shell, timeout=timeout, env=env, cwd=cwd, judge=False
            )
        evaluator = dataclasses.replace(app.player, cgroup_procs=(), rlimit_prefix=())
        hold = (
            app.freezer.hold(app.trusted_pids)
            if app.freezer is not None
            else player_held(app.player.uid, app.desktop.infrastructure_pids())
        )
        with hold:
            # an app port the command talks to must be served by what setup launched: the
            # agent's `socat TCP-LISTEN:1337 SYSTEM:'cat forged'` in place of Chromium's DevTools
            # is the agent's doing (409, scored 0), never an answer to believe
            bad = untrusted_listeners(command_ports(argv), app.trusted_pids())
            if bad:
                raise HTTPError(
                    UNTRUSTED_LISTENER,
                    "; ".join(
                        f"port {port} is served by {', '.join(describe(p) for p in pids)}, which "
                        f"the agent started, not the task's setup"
                        for port, pids in bad.items()
                    ),
                )
            return app.registry.run(
                evaluator.wrap(argv, shell), timeout=timeout, env=env, cwd=cwd, judge=True
            )

    def execute(req: Request) -> Response:
        return json_response(run_command(req.json(), judge=True))

    def setup_execute(req: Request) -> Response:
        return json_response(run_command(req.json(), judge=False))

    def execute_with_verification(req: Request, judge: bool = True) -> Response:
        body = req.json()
        verification = body.get("verification") or {}
        if not isinstance(verification, dict):
            raise HTTPError(400, "verification must be an object")
        max_wait = _number(body, "max_wait_time", 10, MAX_EXECUTE_TIMEOUT_S)
        interval = _number(body, "check_interval", 1, 60)
        result = run_command(body, judge)
        t0 = time.monotonic()
        while True:
            ok = True
            if (title := verification.get("window_exists")) is not None:
                ok = any(str(title) in w.title for w in app.windows.list())
            if ok and (check := verification.get("command_success")) is not None:
                try:
                    ok = run_as_user(str(check), True, 10, judge).returncode == 0
                except (subprocess.TimeoutExpired, OutputTooLarge):
                    ok = False
            waited = time.monotonic() - t0
            if ok:
                return json_response(
                    {**result, "verification": "passed", "wait_time": round(waited, 2)}
                )
            if waited >= max_wait:
                return json_response(
                    {
                        "status": "verification_failed",
                        "message": f"verification not met within {max_wait:g} s",
                        "wait_time": round(waited, 2),
                        **{k: result[k] for k in ("output", "error", "returncode")},
                    },
                    500,
                )
            time.sleep(interval)

    def launch(req: Request) -> Response:
        argv, shell = command_from(app, req.json())
        try:
            with open(app.state_dir / "apps.log", "ab") as out:
                proc = app.registry.popen(
                    argv, shell=shell, stdout=out, stderr=subprocess.STDOUT, app=True
                )
                app.setup_roots.add(proc.pid)
        except (FileNotFoundError, PermissionError, NotADirectoryError) as e:
            raise HTTPError(400, f"cannot launch {argv!r}: {e}") from None
        log.info("launched %r (pid %d)", argv, proc.pid)
        return text_response(
            f"{argv if isinstance(argv, str) else shlex.join(argv)} launched successfully"
        )

    def upload(req: Request) -> Response:
        form = req.form()
        path_field, data = form.get("file_path"), form.get("file_data")
        if path_field is None or not path_field.text:
            raise HTTPError(400, "missing form field 'file_path'")
        if data is None:
            raise HTTPError(400, "missing file field 'file_data'")
        path = files.upload_target(path_field.text, app.home)
        owner = None if app.player is None else (app.player.uid, app.player.gid)
        files.write_upload(path, data.data, app.home, owner)
        return text_response(f"File Uploaded: {len(data.data)} bytes")

    def open_file(req: Request) -> Response:
        body = req.json()
        raw = body.get("path")
        if not isinstance(raw, str) or not raw:
            raise HTTPError(400, "missing 'path'")
        timeout = _timeout(body, OPEN_FILE_TIMEOUT_S, MAX_OPEN_FILE_TIMEOUT_S)
        path = app.resolve(raw)
        if path.exists():
            # the default app as our own child, so its crash is seen; xdg-open if that fails
            argv = opener.default_command(path, app.env, app.registry)
            if argv is None:
                if shutil.which("xdg-open") is None:
                    raise HTTPError(501, "xdg-open is not installed (package xdg-utils)")
                argv = ["xdg-open", str(path)]
            needle, is_command = path.name, False
        elif shutil.which(raw, path=app.env.get("PATH")):
            argv, needle, is_command = [raw], Path(raw).name, True
        else:
            raise HTTPError(404, f"no such file or command: {raw}")
        with open(app.state_dir / "apps.log", "ab") as out:
            proc = app.registry.popen(argv, stdout=out, stderr=subprocess.STDOUT, app=True)
            app.setup_roots.add(proc.pid)
        deadline = time.monotonic() + timeout
        while True:
            for w in app.windows.list():
                if needle in w.title or (is_command and needle.lower() in w.wm_class.lower()):
                    app.windows.activate_id(w.id)
                    return text_response("File opened successfully")
            if not is_command and proc.poll() not in (None, 0):
                raise HTTPError(
                    500,
                    f"opening {path} with {shlex.join(argv)} failed with status "
                    f"{proc.returncode} (no application for this file type?)",
                )
            if time.monotonic() >= deadline:
                raise HTTPError(
                    504,
                    f"opened {raw}, but no window with {needle!r} in its title "
                    f"appeared within {timeout:.0f} s",
                )
            time.sleep(0.2)

    def _window_args(req: Request) -> tuple[str, bool, bool]:
        body = req.json()
        name = body.get("window_name")
        strict, by_class = body.get("strict", False), body.get("by_class", False)
        if not isinstance(name, str) or not name:
            raise HTTPError(400, "missing 'window_name'")
        if not isinstance(strict, bool) or not isinstance(by_class, bool):
            raise HTTPError(400, "strict and by_class must be true or false")
        return name, strict, by_class

    def activate_window(req: Request) -> Response:
        name, strict, by_class = _window_args(req)
        if not app.windows.activate(name, strict=strict, by_class=by_class):
            raise HTTPError(404, f"no window matches {name!r}")
        return text_response("Window activated successfully")

    def close_window(req: Request) -> Response:
        name, strict, by_class = _window_args(req)
        if not app.windows.close(name, strict=strict, by_class=by_class):
            raise HTTPError(404, f"no window matches {name!r}")
        return text_response("Window closed successfully")

    def get_file(req: Request) -> Response:
        path = files.requested_path(req.field("file_path"), app.home)
        app.finish_task_steps()  # an app still saving after a postconfig Ctrl+S
        stream, size = files.open_for_reading(path, app.home)  # before any status is sent
        return Response(
            200,
            content_type="application/octet-stream",
            stream=stream,
            stream_size=size,
            headers={"Content-Disposition": f'attachment; filename="{path.name}"'},
        )

    def list_directory(req: Request) -> Response:
        raw = req.json().get("path")
        if not isinstance(raw, str) or not raw:
            raise HTTPError(400, "missing 'path'")
        path = app.resolve(raw)
        if not path.is_dir():
            raise HTTPError(404, f"directory not found: {path}")
        budget = [MAX_TREE_ENTRIES]

        def tree(p: Path) -> dict[str, Any]:
            node: dict[str, Any] = {"type": "directory", "name": p.name or str(p), "children": []}
            try:
                entries = sorted(os.scandir(p), key=lambda e: e.name)
            except OSError:
                return node
            for e in entries:
                if budget[0] <= 0:
                    node["truncated"] = True
                    break
                budget[0] -= 1
                if e.is_dir(follow_symlinks=False):
                    node["children"].append(tree(Path(e.path)))
                else:
                    node["children"].append({"type": "file", "name": e.name})
            return node

        return json_response({"directory_tree": tree(path)})

    def screen_size(req: Request) -> Response:
        return json_response({"width": app.screen.width, "height": app.screen.height})

    def cursor_position(req: Request) -> Response:
        return json_response(list(app.screen.cursor_position()))

    def platform_name(req: Request) -> Response:
        return text_response(platform.system())

    def terminal(req: Request) -> Response:
        try:
            return json_response({"output": app.a11y.terminal(), "status": "success"})
        except A11yUnavailable as e:
            raise HTTPError(501, f"accessibility tree unavailable: {e}") from None
        except A11yFailed as e:
            raise HTTPError(e.status, str(e)) from None

    def accessibility(req: Request) -> Response:
        try:
            return json_response({"AT": app.a11y.tree()})
        except A11yUnavailable as e:
            raise HTTPError(501, f"accessibility tree unavailable: {e}") from None
        except A11yFailed as e:  # 504 / 413: an app of the agent's hung it or made it huge
            raise HTTPError(e.status, str(e)) from None

    def desktop_path(req: Request) -> Response:
        path = app.home / "Desktop"
        if not path.is_dir():
            raise HTTPError(404, f"{path} does not exist")
        return json_response({"desktop_path": str(path)})

    def start_recording(req: Request) -> Response:
        try:
            app.recorder.start()
        except RecordingStateError as e:
            raise HTTPError(400, str(e)) from None
        except RecordingFailed as e:
            raise HTTPError(500, str(e)) from None
        return text_response("Started recording successfully")

    def end_recording(req: Request) -> Response:
        try:
            data = app.recorder.end()
        except RecordingStateError as e:
            raise HTTPError(400, str(e)) from None
        except RecordingFailed as e:
            raise HTTPError(500, str(e)) from None
        return Response(
            200, data, "video/mp4", {"Content-Disposition": 'attachment; filename="recording.mp4"'}
        )

    def step(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """A task step's route: the judge's next read first lets what it set off finish."""

        def run(req: Request) -> Response:
            app.note_task_step()
            return handler(req)

        return run

    router.add("GET", routes.SCREENSHOT, screenshot)
    router.add("POST", routes.EXECUTE, execute)
    router.add("POST", routes.EXECUTE_WITH_VERIFICATION, execute_with_verification)
    router.add("POST", routes.SETUP_EXECUTE, step(setup_execute))
    router.add(
        "POST",
        routes.SETUP_EXECUTE_WITH_VERIFICATION,
        step(lambda req: execute_with_verification(req, judge=False)),
    )
    router.add("POST", routes.SETUP_LAUNCH, step(launch))
    router.add("POST", routes.SETUP_UPLOAD, step(upload))
    router.add("POST", routes.SETUP_OPEN_FILE, step(open_file))
    router.add("POST", routes.SETUP_ACTIVATE_WINDOW, step(activate_window))
    router.add("POST", routes.SETUP_CLOSE_WINDOW, step(close_window))
    router.add("POST", routes.FILE, get_file)
    router.add("POST", routes.LIST_DIRECTORY, list_directory)
    router.add(("GET", "POST"), routes.SCREEN_SIZE, screen_size)
    router.add(("GET", "POST"), routes.CURSOR_POSITION, cursor_position)
    router.add(("GET", "POST"), routes.PLATFORM, platform_name)
    router.add(("GET", "POST"), routes.TERMINAL, terminal)
    router.add(("GET", "POST"), routes.ACCESSIBILITY, accessibility)
    router.add("POST", routes.DESKTOP_PATH, desktop_path)
    router.add("POST", routes.START_RECORDING, start_recording)
    router.add("POST", routes.END_RECORDING, end_recording)
