"""SetupRunner: step dispatch, validation before anything runs, failures and the cache."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from osworld_gym.errors import GuestError, SetupError, TaskError
from osworld_gym.tasks import SetupRunner
from osworld_gym.tasks.validation import HostAccess


class RecordingGuest:
    """Test double of ``GuestClient`` for plumbing only: records calls, answers from a script.

    ``answers`` maps a command (as given, lists turned into tuples) to a list of results that
    ``execute`` hands out in turn (the last one repeats); the default is a success with empty
    output.
    """

    def __init__(self, answers: dict[Any, list[dict[str, Any]]] | None = None):
        self.calls: list[tuple[str, tuple, dict]] = []
        self.answers = answers or {}
        self.files: dict[str, bytes] = {}

    def _record(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((name, args, kwargs))

    def execute(self, command, shell=False, timeout=120.0, setup=False):
        self._record("execute", command, shell=shell, timeout=timeout, setup=setup)
        key = tuple(command) if isinstance(command, list) else command
        script = self.answers.get(key)
        if not script:
            return {"status": "success", "output": "", "error": "", "returncode": 0}
        answer = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def launch(self, command, shell=False):
        self._record("launch", command, shell=shell)

    def open_file(self, path, timeout=60.0):
        self._record("open_file", path)

    def activate_window(self, window_name, strict=False, by_class=False):
        self._record("activate_window", window_name, strict=strict, by_class=by_class)

    def close_window(self, window_name, strict=False, by_class=False):
        self._record("close_window", window_name, strict=strict, by_class=by_class)

    def upload(self, path: str, data) -> None:  # bytes, or a local file (streamed by GuestClient)
        data = data.read_bytes() if isinstance(data, Path) else data
        self._record("upload", path, len(data))
        self.files[path] = data

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


def step(kind: str, **params: Any) -> dict[str, Any]:
    return {"type": kind, "parameters": params}


@pytest.fixture
def sleeps() -> list[float]:
    return []


def make_runner(guest, tmp_path, sleeps, **kwargs) -> SetupRunner:
    return SetupRunner(
        guest, cache_dir=tmp_path / "cache", task_id="task-1", sleep=sleeps.append, **kwargs
    )


def test_each_step_type_reaches_the_matching_client_call(tmp_path, sleeps):
    local = tmp_path / "local.bin"
    local.write_bytes(b"12345")
    guest = RecordingGuest()
    # upload_file reads only from allowed host roots (the cache, plus what HostAccess names)
    runner = make_runner(guest, tmp_path, sleeps, host_access=HostAccess(file_roots=(tmp_path,)))
    runner.run(
        [
            step("execute", command=["touch", "a"]),
            step("command", command="echo hi", shell=True),
            step("launch", command=["mousepad", "x.txt"]),
            step("open", path="Desktop/a.txt"),
            step("open", path="gnome-calculator"),
            step("sleep", seconds=0.5),
            step("activate_window", window_name="Mousepad", strict=True),
            step("close_window", window_name="xterm", by_class=True),
            step("upload_file", files=[{"local_path": str(local), "path": "data/x.bin"}]),
        ]
    )
    assert guest.calls == [
        ("execute", (["touch", "a"],), {"shell": False, "timeout": 120.0, "setup": True}),
        ("execute", ("echo hi",), {"shell": True, "timeout": 120.0, "setup": True}),
        ("launch", (["mousepad", "x.txt"],), {"shell": False}),
        ("open_file", ("/home/user/Desktop/a.txt",), {}),
        ("open_file", ("gnome-calculator",), {}),
        ("activate_window", ("Mousepad",), {"strict": True, "by_class": False}),
        ("close_window", ("xterm",), {"strict": False, "by_class": True}),
        ("upload", ("/home/user/data/x.bin", 5), {}),
    ]
    assert sleeps == [0.5]


def test_placeholders_are_substituted_before_running(tmp_path, sleeps):
    guest = RecordingGuest()
    runner = make_runner(guest, tmp_path, sleeps, client_password="pw", screen_size=(800, 600))
    runner.run(
        [step("execute", command="echo {CLIENT_PASSWORD} {SCREEN_WIDTH_HALF} ${X}", shell=True)]
    )
    assert guest.calls[0][1] == ("echo pw 400 ${X}",)


def test_all_steps_are_validated_before_any_runs(tmp_path, sleeps):
    guest = RecordingGuest()
    runner = make_runner(guest, tmp_path, sleeps)
    steps = [step("execute", command="echo 1", shell=True), step("warp_drive", speed=9)]
    with pytest.raises(
        TaskError, match="task 'task-1': config step 1 has unknown type 'warp_drive'"
    ):
        runner.run(steps)
    assert guest.calls == []


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (step("open"), "missing parameter 'path'"),
        (step("sleep", seconds=1, extra=2), "unknown parameter 'extra'"),
        (step("sleep", seconds=-1), "'seconds' must be a non-negative number"),
        (step("execute", command=[]), "'command' must be a non-empty string or list"),
        (step("execute", command="x", until={"exit": 0}), "'until' must be an object"),
        (step("download", files=[{"url": "http://x"}]), r"files\[0\] must be an object with"),
        (step("launch", command="x", shell="yes"), "'shell' must be true or false"),
        ({"parameters": {}}, "must be an object with a string 'type'"),
        ("sleep", "must be an object with a string 'type'"),
    ],
)
def test_malformed_steps_are_task_errors(tmp_path, sleeps, bad, message):
    with pytest.raises(TaskError, match=message):
        make_runner(RecordingGuest(), tmp_path, sleeps).run([bad], phase="postconfig")


def test_a_failing_step_names_phase_index_type_and_guest_message(tmp_path, sleeps):
    guest = RecordingGuest(
        {"boom": [{"status": "error", "message": "No such file: boom", "returncode": -1}]}
    )
    runner = make_runner(guest, tmp_path, sleeps)
    with pytest.raises(
        SetupError, match=r"postconfig step 1 \(execute\) failed: .*No such file: boom"
    ):
        runner.run([step("sleep", seconds=0), step("execute", command="boom")], phase="postconfig")


def test_guest_errors_become_setup_errors(tmp_path, sleeps):
    class Broken(RecordingGuest):
        def launch(self, command, shell=False):
            raise GuestError("connection refused", endpoint="/setup/launch")

    with pytest.raises(SetupError, match=r"config step 0 \(launch\) failed: connection refused"):
        make_runner(Broken(), tmp_path, sleeps).run([step("launch", command="mousepad")])


def test_nonzero_exit_is_ignored_like_osworld_unless_check(tmp_path, sleeps):
    fail = [{"status": "success", "output": "", "error": "nope", "returncode": 1}]
    guest = RecordingGuest({"false": fail})
    runner = make_runner(guest, tmp_path, sleeps)
    runner.run([step("execute", command="false")])
    with pytest.raises(SetupError, match="exited with 1: nope"):
        runner.run([step("execute", command="false", check=True)])


def test_execute_saves_stdout_and_stderr_in_the_task_cache(tmp_path, sleeps):
    out = [{"status": "success", "output": "gold\n", "error": "warn\n", "returncode": 0}]
    runner = make_runner(RecordingGuest({"gen": out}), tmp_path, sleeps)
    runner.run([step("execute", command="gen", stdout="gold.txt", stderr="err/log.txt")])
    assert (tmp_path / "cache" / "task-1" / "gold.txt").read_text() == "gold\n"
    assert (runner.task_cache_dir / "err" / "log.txt").read_text() == "warn\n"


def test_until_repolls_until_the_condition_holds(tmp_path, sleeps):
    not_yet = {"status": "success", "output": "starting", "error": "", "returncode": 1}
    ready = {"status": "success", "output": "ready", "error": "", "returncode": 1}
    guest = RecordingGuest({"probe": [not_yet, not_yet, ready]})
    make_runner(guest, tmp_path, sleeps).run(
        [step("execute", command="probe", until={"stdout": "ready"})]
    )
    assert guest.names() == ["execute"] * 3
    assert sleeps == [0.3, 0.3]


def test_until_tolerates_a_few_request_failures(tmp_path, sleeps):
    ok = {"status": "success", "output": "", "error": "", "returncode": 0}
    guest = RecordingGuest({"probe": [GuestError("timeout"), ok]})
    make_runner(guest, tmp_path, sleeps).run(
        [step("execute", command="probe", until={"returncode": 0})]
    )
    assert guest.names() == ["execute"] * 2


def test_until_is_bounded(tmp_path, sleeps):
    never = [{"status": "success", "output": "no", "error": "", "returncode": 1}]
    runner = make_runner(RecordingGuest({"probe": never}), tmp_path, sleeps, until_timeout_s=0)
    with pytest.raises(SetupError, match="not met after 0 s"):
        runner.run([step("execute", command="probe", until={"returncode": 0})])


def test_sleep_is_capped(tmp_path, sleeps, caplog):
    make_runner(RecordingGuest(), tmp_path, sleeps, max_sleep_s=5).run(
        [step("sleep", seconds=3600)]
    )
    assert sleeps == [5]
    assert "capped" in caplog.text


def test_download_uses_osworld_cache_naming_and_uploads(tmp_path, sleeps):
    url = "https://huggingface.co/datasets/x/resolve/main/os/t/setup.sh"
    cached = tmp_path / "cache" / "task-1" / f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_setup.sh"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"echo hi\n")  # pre-filled cache: no network needed
    guest = RecordingGuest()
    make_runner(guest, tmp_path, sleeps).run(
        [step("download", files=[{"url": url, "path": "setup.sh"}])]
    )
    assert guest.files == {"/home/user/setup.sh": b"echo hi\n"}


def test_download_of_uncached_file_offline_names_the_cache_path(tmp_path, sleeps):
    url = "http://127.0.0.1:9/never/there.xlsx"  # discard port: connection refused
    runner = make_runner(
        RecordingGuest(),
        tmp_path,
        sleeps,
        download_timeout_s=2,
        download_attempts=1,
        host_access=HostAccess(allow_private_urls=True),  # loopback needs the opt-in
    )
    expected = runner.task_cache_dir / f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_there.xlsx"
    with pytest.raises(SetupError, match=f"place that file at {expected}"):
        runner.run([step("download", files=[{"url": url, "path": "/home/user/there.xlsx"}])])


def test_upload_of_missing_local_file_is_a_setup_error(tmp_path, sleeps):
    runner = make_runner(
        RecordingGuest(), tmp_path, sleeps, host_access=HostAccess(file_roots=(tmp_path,))
    )
    with pytest.raises(SetupError, match=r"step 0 \(upload_file\) failed"):
        runner.run([step("upload_file", files=[{"local_path": str(tmp_path / "no"), "path": "x"}])])


def test_execute_with_verification_waits_for_the_window(tmp_path, sleeps):
    no_window = {"status": "success", "output": "0x1 0 host xterm\n", "error": "", "returncode": 0}
    window = {
        "status": "success",
        "output": "0x2 0 host Untitled - Mousepad\n",
        "error": "",
        "returncode": 0,
    }
    guest = RecordingGuest({("wmctrl", "-l"): [no_window, window]})
    make_runner(guest, tmp_path, sleeps).run(
        [
            step(
                "execute_with_verification",
                command=["mousepad"],
                verification={"window_exists": "mousepad"},
                check_interval=0.5,
            )
        ]
    )
    assert [c[1][0] for c in guest.calls] == [["mousepad"], ["wmctrl", "-l"], ["wmctrl", "-l"]]
    assert sleeps == [0.5]


def test_execute_with_verification_fails_when_never_verified(tmp_path, sleeps):
    bad = [{"status": "success", "output": "", "error": "", "returncode": 1}]
    guest = RecordingGuest({"test -f /tmp/x": bad})
    with pytest.raises(SetupError, match="verification .* failed"):
        make_runner(guest, tmp_path, sleeps).run(
            [
                step(
                    "execute_with_verification",
                    command="true",
                    verification={"command_success": "test -f /tmp/x"},
                    max_wait_time=0,
                )
            ]
        )


class NoWindows(RecordingGuest):
    def activate_window(self, window_name, strict=False, by_class=False):
        raise GuestError(f"no window matches {window_name!r}", status=404)

    close_window = activate_window


def test_a_missing_postconfig_window_is_the_agents_doing_not_an_infra_error(tmp_path, sleeps):
    """OSWorld logs a failed activation and scores on: 'Answer.docx - LibreOffice Writer'
    exists only if the agent saved that file. In config the window is setup's own."""
    runner = make_runner(NoWindows(), tmp_path, sleeps)
    runner.run(
        [
            step("activate_window", window_name="Answer.docx - LibreOffice Writer"),
            step("close_window", window_name="x"),
        ],
        phase="postconfig",
    )
    with pytest.raises(SetupError, match="config step 0 \\(activate_window\\) failed"):
        runner.run([step("activate_window", window_name="Terminal")])
    # setup waited for it first: polls adding up to 20 s
    assert sum(sleeps) >= 20.0


class SlowWindow(RecordingGuest):
    """A window that maps on the fourth look (a terminal still starting)."""

    def __init__(self):
        super().__init__()
        self.looks = 0

    def activate_window(self, window_name, strict=False, by_class=False):
        self.looks += 1
        if self.looks < 4:
            raise GuestError(f"no window matches {window_name!r}", status=404)


def test_config_activate_window_waits_for_a_window_a_step_just_opened(tmp_path, sleeps):
    guest = SlowWindow()
    make_runner(guest, tmp_path, sleeps).run([step("activate_window", window_name="Terminal")])
    assert guest.looks == 4 and len(sleeps) == 3
