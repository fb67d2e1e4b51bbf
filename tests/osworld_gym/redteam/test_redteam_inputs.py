"""Red team, inputs: hostile task JSON, hostile action objects and hostile HTTP clients of the guest
each end in a clear task validation error, an ``action_error`` or a 4xx -- never an exception out
of ``step``/``reset``, a file written outside the cache, a host file in the desktop or a pinned
server thread. Every case here reproduces a finding of the 2026-11-23 red-team pass (issue 17).
"""

from __future__ import annotations

import copy
import json
import math
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
import pytest
from osworld_gym.errors import GuestError, TaskValidationError
from osworld_gym.guest import files as guest_files
from osworld_gym.guest import server as guest_server
from osworld_gym.guest.server import Request, Response, Router, json_response, make_server
from osworld_gym.providers.fake import FakeProvider
from osworld_gym.tasks import SetupRunner, Task
from osworld_gym.tasks.validation import HostAccess
from osworld_gym.testing import FAKE_TASK

TOKEN = "redteam-token"


def task(**changes) -> dict:
    d = copy.deepcopy(FAKE_TASK)
    d["id"] = "redteam-task"
    d.update(changes)
    return d


def download(url: str, path: str = "/home/user/x.txt") -> dict:
    return {"type": "download", "parameters": {"files": [{"url": url, "path": path}]}}


def fake_env(tmp_path: Path, **kwargs) -> gym.Env:
    return gym.make(
        "OSWorld-v0",
        provider=FakeProvider(),
        tasks=None,
        settle=None,
        cache_dir=tmp_path / "cache",
        **kwargs,
    )


def uploaded(env: gym.Env) -> dict[str, bytes]:
    """What setup put into the fake desktop (nothing if it never started)."""
    client = env.unwrapped.provider.client
    return {} if client is None else dict(client.files)


class _Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).hits.append(self.path)
        body = b"root:SECRET:19000:0:99999:7:::\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def host_service():
    """A secret-serving HTTP service on the host's loopback (what SSRF would reach)."""
    _Recorder.hits = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


# ---- SSRF and host files through setup ---------------------------------------------------------


@pytest.mark.parametrize("host", ["{hp}", "localhost:{port}", "[::ffff:127.0.0.1]:{port}"])
def test_setup_download_from_host_loopback_is_a_validation_error_and_nothing_is_fetched(
    tmp_path, host_service, host
):
    port = host_service.rsplit(":", 1)[1]
    url = f"http://{host.format(hp=host_service, port=port)}/etc/shadow"
    env = fake_env(tmp_path)
    try:
        with pytest.raises(TaskValidationError, match="private or loopback"):
            env.reset(options={"task": task(config=[download(url)])})
        assert _Recorder.hits == [] and uploaded(env) == {}
    finally:
        env.close()


def test_a_name_resolving_to_loopback_is_refused_at_download_time(tmp_path, host_service):
    """Without the env's check before the episode, the download's own request hook resolves
    the name and refuses it (the same hook sees every redirect)."""
    port = host_service.rsplit(":", 1)[1]
    runner = SetupRunner(None, cache_dir=tmp_path / "cache", task_id="t", download_attempts=1)
    with pytest.raises(TaskValidationError, match="resolves to"):
        runner.run([download(f"http://localhost:{port}/secret")])
    assert _Recorder.hits == []


def test_private_downloads_work_when_the_user_opts_in(tmp_path, host_service):
    env = fake_env(tmp_path, host_access=HostAccess(allow_private_urls=True))
    try:
        env.reset(options={"task": task(config=[download(f"http://{host_service}/mirror/f")])})
        assert _Recorder.hits == ["/mirror/f"]
        assert uploaded(env)["/home/user/x.txt"].startswith(b"root:")
    finally:
        env.close()


@pytest.mark.parametrize(
    "step",
    [
        download("file:///etc/hostname"),
        {
            "type": "upload_file",
            "parameters": {"files": [{"local_path": "/etc/hostname", "path": "/home/user/h"}]},
        },
        {
            "type": "upload_file",
            "parameters": {"files": [{"local_path": "~/.bash_history", "path": "/home/user/h"}]},
        },
    ],
)
def test_host_files_outside_the_allowed_roots_never_reach_the_desktop(tmp_path, step):
    env = fake_env(tmp_path)
    try:
        with pytest.raises(TaskValidationError, match="outside the host directories"):
            env.reset(options={"task": task(config=[step])})
        assert uploaded(env) == {}
    finally:
        env.close()


def test_file_urls_from_an_allowed_root_still_work(tmp_path):
    root = tmp_path / "mirror"
    root.mkdir()
    (root / "data.txt").write_text("fine")
    env = fake_env(tmp_path, host_access=HostAccess(file_roots=(root,)))
    try:
        env.reset(options={"task": task(config=[download((root / "data.txt").as_uri())])})
        assert uploaded(env) == {"/home/user/x.txt": b"fine"}
    finally:
        env.close()


# ---- path traversal ----------------------------------------------------------------------------


def _vm_file(dest: str) -> dict:
    return {
        "func": "exact_match",
        "result": {"type": "vm_file", "path": "/home/user/a", "dest": dest},
        "expected": {"type": "rule", "rules": {"expected": "x"}},
    }


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"id": "../../escaped"}, "task id"),
        ({"id": "/tmp/escaped"}, "task id"),
        (
            {
                "config": [
                    {
                        "type": "execute",
                        "parameters": {"command": "true", "stdout": "../../escaped"},
                    }
                ]
            },
            "stdout",
        ),
        ({"evaluator": _vm_file("../../escaped")}, "dest"),
        ({"evaluator": _vm_file("/tmp/escaped")}, "dest"),
        (
            {
                "evaluator": {
                    "func": "compare_text_file",
                    "result": {"type": "vm_file", "path": "/home/user/a", "dest": "a"},
                    "expected": {
                        "type": "cloud_file",
                        "path": "https://example.org/g",
                        "dest": "../../../escaped",
                    },
                }
            },
            "dest",
        ),
        ({"config": [download("https://example.org/f", "/home/user/../../etc/cron.d/x")]}, "path"),
        ({"config": [download("https://example.org/f", "/etc/profile.d/x.sh")]}, "path"),
    ],
)
def test_path_traversal_in_task_json_is_refused_before_anything_runs(tmp_path, changes, field):
    with pytest.raises(TaskValidationError, match=field):
        Task.from_dict(task(**changes))
    env = fake_env(tmp_path)
    try:  # a task built without validation is still checked by reset
        with pytest.raises(TaskValidationError):
            env.reset(options={"task": Task.from_dict(task(**changes), validate=False)})
        assert uploaded(env) == {}
    finally:
        env.close()
    assert not list(tmp_path.parent.glob("escaped")) and not Path("/tmp/escaped").exists()


def test_a_symlink_in_the_cache_cannot_lead_a_result_out_of_it(tmp_path):
    from osworld_gym.evaluators import EvalContext
    from osworld_gym.evaluators.getters.file import get_vm_file

    work = tmp_path / "work"
    work.mkdir()
    (work / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    client = FakeProvider().start()
    client.upload("/home/user/a", b"data")
    ctx = EvalContext(client=client, cache_dir=tmp_path / "cache", task_id="t", work_dir=work)
    with pytest.raises(TaskValidationError, match="leads out of"):
        get_vm_file(ctx, {"path": "/home/user/a", "dest": "out/a"})
    assert not (tmp_path / "elsewhere").exists()


# ---- numbers, booleans, instructions -----------------------------------------------------------


def test_a_nan_sleep_is_a_validation_error_from_load_and_from_reset(tmp_path):
    nan_task = task(config=[{"type": "sleep", "parameters": {"seconds": math.nan}}])
    with pytest.raises(TaskValidationError, match="not a finite number"):
        Task.from_dict(json.loads(json.dumps(nan_task)))  # JSON parsers accept NaN
    env = fake_env(tmp_path)
    try:
        with pytest.raises(TaskValidationError, match="seconds is nan"):
            env.reset(options={"task": nan_task})
    finally:
        env.close()


def test_osworld_string_booleans_are_accepted():
    t = Task.from_dict(
        task(config=[{"type": "execute", "parameters": {"command": "true", "shell": "true"}}])
    )
    assert t.config[0]["parameters"]["shell"] is True


def test_a_10k_character_instruction_is_a_validation_error_not_an_observation_outside_its_space(
    tmp_path,
):
    env = fake_env(tmp_path)
    try:
        with pytest.raises(TaskValidationError, match="10000 characters"):
            env.reset(options={"task": task(instruction="x" * 10_000)})
        obs, _ = env.reset(options={"task": task(instruction="x" * 8192)})
        assert env.observation_space.contains(obs)
    finally:
        env.close()


# ---- hostile action objects and text -----------------------------------------------------------


class Hostile:
    """Records every dunder the env might call on it."""

    calls: list[str] = []

    def __eq__(self, other):
        Hostile.calls.append("__eq__")
        return True

    def __hash__(self):
        Hostile.calls.append("__hash__")
        return hash("action_type")

    def __repr__(self):
        Hostile.calls.append("__repr__")
        return "DONE"

    def __str__(self):
        Hostile.calls.append("__str__")
        return "DONE"

    def __len__(self):
        Hostile.calls.append("__len__")
        return 4


class HostileStr(str):
    def strip(self, *a):
        Hostile.calls.append("strip")
        return "DONE"


@pytest.mark.parametrize("action_set", ["pyautogui", "computer_13", "uitars"])
@pytest.mark.parametrize(
    "make",
    [
        lambda: Hostile(),
        lambda: {Hostile(): "DONE"},
        lambda: {"action_type": Hostile()},
        lambda: [Hostile()],
        lambda: b"DONE",
    ],
)
def test_hostile_objects_are_rejected_by_type_before_any_of_their_methods_run(
    tmp_path, action_set, make
):
    env = fake_env(tmp_path, action_set=action_set)
    try:
        env.reset(options={"task": task()})
        action = make()
        Hostile.calls = []
        obs, reward, terminated, truncated, info = env.step(action)
        assert Hostile.calls == [] and info["action_error"] and not terminated
        assert env.unwrapped.provider.client.typed == []
    finally:
        env.close()


def test_a_str_subclass_is_rejected_without_running_its_methods(tmp_path):
    env = fake_env(tmp_path)
    try:
        env.reset(options={"task": task()})
        Hostile.calls = []
        _, _, terminated, _, info = env.step(HostileStr("FAIL"))
        assert Hostile.calls == [] and not terminated and "HostileStr" in info["action_error"]
    finally:
        env.close()


@pytest.mark.parametrize(
    "action_set, text",
    [
        ("pyautogui", "pyautogui.write('\\ud83d\\ude00')"),  # the escape a model writes
        ("pyautogui", "pyautogui.write('\ud83d')"),  # a lone surrogate itself
        ("uitars", "Action: type(content='\ud83d\ude00')"),
        ("computer_13", {"action_type": "TYPING", "parameters": {"text": "\ud83d\ude00"}}),
    ],
)
def test_lone_surrogates_are_an_action_error_and_nothing_is_typed(tmp_path, action_set, text):
    env = fake_env(tmp_path, action_set=action_set)
    try:
        env.reset(options={"task": task()})
        _, _, terminated, _, info = env.step(text)
        assert "surrogate" in info["action_error"] and not terminated
        assert env.unwrapped.provider.client.typed == []
        give_up = {"action_type": "FAIL"} if action_set == "computer_13" else "FAIL"
        _, _, _, _, info = env.step(give_up)
        assert info["infra_error"] is None
    finally:
        env.close()


@pytest.mark.parametrize(
    "action_set, text",
    [
        # 5,000 hex digits: str() of the int raises ValueError (Python's 4,300-digit limit)
        ("pyautogui", "pyautogui.click(0x" + "f" * 5000 + ", 1)"),
        ("computer_13", {"action_type": "MOVE_TO", "parameters": {"x": 10**5000, "y": 1}}),
    ],
)
def test_a_number_too_long_to_print_is_an_action_error_not_an_exception(tmp_path, action_set, text):
    env = fake_env(tmp_path, action_set=action_set)
    try:
        env.reset(options={"task": task()})
        _, _, terminated, truncated, info = env.step(text)
        assert info["action_error"] and not terminated and not truncated
        assert info["infra_error"] is None
    finally:
        env.close()


# ---- failed reset and gymnasium's passive checker ----------------------------------------------


class FlakyProvider(FakeProvider):
    """A fake desktop whose first ``failures`` resets fail as a dead guest would."""

    def __init__(self, failures: int):
        super().__init__()
        self.failures = failures

    def reset_state(self) -> None:
        if self.failures:
            self.failures -= 1
            raise GuestError("guest did not answer", endpoint="/osworld_gym/reset")
        super().reset_state()


def test_after_a_failed_first_reset_step_returns_a_truncated_infra_transition_and_recovers():
    env = gym.make(
        "OSWorld-v0",
        provider=FlakyProvider(failures=1),
        tasks=[FAKE_TASK],
        setup_retries=0,
        settle=None,
    )  # gymnasium's env checker is on by default
    try:
        with pytest.raises(GuestError):
            env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("DONE")
        assert truncated and not terminated and reward == 0.0
        assert info["infra_error"].startswith("ResetFailed") and env.observation_space.contains(obs)
        obs, info = env.reset(seed=0)
        assert info["infra_error"] is None
        _, reward, terminated, _, info = env.step("FAIL")  # the checker's first step check
        assert terminated and reward == 1.0 and info["infra_error"] is None
    finally:
        env.close()


# ---- the guest's HTTP server -------------------------------------------------------------------


@pytest.fixture
def guest_http(tmp_path, monkeypatch):
    """A guest HTTP server (token auth, an echo route) on loopback TCP; yields its port."""
    monkeypatch.setattr(guest_server, "HEADER_TIMEOUT_S", 1.0)
    router = Router(TOKEN)

    def echo(req: Request) -> Response:
        return json_response({"bytes": len(req.body)})

    router.add("POST", "/echo", echo)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = make_server(router, host="127.0.0.1", port=port)
    server.max_connections = 3
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    yield port
    server.shutdown()
    server.server_close()


def _raw(port: int, data: bytes, timeout: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks):
                break
        return b"".join(chunks)


@pytest.mark.parametrize("size", [b"-1", b"+10", b"0x10", b"1_0", b"zz", b""])
def test_a_chunked_body_with_a_bad_chunk_size_is_400(guest_http, size):
    head = (
        b"POST /echo HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer "
        + TOKEN.encode()
        + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    answer = _raw(guest_http, head + size + b"\r\n" + b"A" * 64 + b"\r\n0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]


def test_a_well_formed_chunked_body_still_arrives(guest_http):
    head = (
        b"POST /echo HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer "
        + TOKEN.encode()
        + b"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    answer = _raw(guest_http, head + b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200")


def test_slow_headers_do_not_pin_a_connection(guest_http):
    """Slow loris: one header byte every 0.2 s. The header deadline (1 s here) closes it."""
    with socket.create_connection(("127.0.0.1", guest_http), timeout=10) as s:
        s.sendall(b"GET /echo HTTP/1.1\r\n")
        closed = False
        for _ in range(100):  # 20 s of dripping at most
            try:
                s.sendall(b"X")
                time.sleep(0.2)
                s.setblocking(False)
                try:
                    if s.recv(1) == b"":
                        closed = True
                        break
                except BlockingIOError:
                    pass
                finally:
                    s.setblocking(True)
            except OSError:
                closed = True
                break
        assert closed, "the server kept a dripping connection open"


def test_connections_beyond_the_limit_get_503_and_the_rest_keep_working(guest_http):
    idle = [socket.create_connection(("127.0.0.1", guest_http), timeout=10) for _ in range(3)]
    try:
        time.sleep(0.3)
        extra = _raw(guest_http, b"GET / HTTP/1.1\r\n\r\n")
        assert extra.startswith(b"HTTP/1.1 503")
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 10
    while True:  # the slots come back once the idle connections are gone
        answer = _raw(
            guest_http,
            b"POST /echo HTTP/1.1\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        )
        if answer.startswith(b"HTTP/1.1 200") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]


# ---- /file and /setup/upload paths -------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", ["/etc/shadow", "/home/user/../../root/.ssh/id_rsa", "../x", "/proc/1/environ"]
)
def test_file_and_upload_refuse_paths_outside_home_and_tmp(raw):
    with pytest.raises(guest_files.FileRefused) as info:
        guest_files.requested_path(raw, "/home/user")
    assert info.value.status == 403
    with pytest.raises(guest_files.FileRefused):
        guest_files.upload_target(raw, "/home/user")


def test_what_the_agent_leaves_at_a_result_path_is_refused_before_any_status(tmp_path):
    """Each of these is answered 422/413 with the reason; a fifo does not hang the server."""
    import os

    home = tmp_path / "home"
    home.mkdir()
    (home / "dir").mkdir()
    os.mkfifo(home / "fifo")
    (home / "out").symlink_to("/etc/hostname")
    with open(home / "sparse", "wb") as f:
        f.truncate(2 << 30)
    for name, status, why in [
        ("dir", 422, "directory"),
        ("fifo", 422, "not a regular file"),
        ("out", 422, "outside"),
        ("sparse", 413, "over the"),
    ]:
        path = guest_files.requested_path(str(home / name), home)
        with pytest.raises(guest_files.FileRefused, match=why) as info:
            guest_files.open_for_reading(path, home)
        assert info.value.status == status
    with pytest.raises(guest_files.FileRefused) as info:
        guest_files.open_for_reading(home / "missing", home)
    assert info.value.status == 404


def test_a_slow_body_does_not_pin_a_connection(guest_http, monkeypatch):
    """Headers on time, then a body that never completes: the body deadline closes it."""
    monkeypatch.setattr(guest_server, "BODY_TIMEOUT_S", 1.0)
    with socket.create_connection(("127.0.0.1", guest_http), timeout=15) as s:
        s.sendall(
            b"POST /echo HTTP/1.1\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b"\r\nContent-Length: 100\r\n\r\n{"
        )
        answer = b""
        while chunk := s.recv(4096):  # the 400 (or a plain close) comes; never a hang
            answer += chunk
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400"), answer[:100]


@pytest.mark.parametrize(
    "name", ["osworld_gym.guest.files", "osworld_gym.actions.typecheck", "osworld_gym.checker"]
)
def test_doctests_of_the_guard_modules(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
