"""Task-author Python in the desktop: `python -c "import pyautogui; ..."` steps run as on OSWorld.

Judge-side commands (``/execute``: setup steps and evaluator getters) find a ``python`` and
``python3`` with pyautogui first on their PATH; apps the agent uses keep the ordinary PATH.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from osworld_gym.guest import task_python
from osworld_gym.providers.local import LocalProvider
from osworld_gym.tasks import SetupRunner

pytestmark = pytest.mark.skipif(
    task_python.interpreter() is None,
    reason=f"no task python at {task_python.DEFAULT_VENV} (run scripts/install.sh)",
)


@pytest.fixture(scope="module")
def desktop() -> Iterator:
    provider = LocalProvider(screen_size=(800, 600))
    client = provider.start()
    try:
        yield client
    finally:
        provider.stop()


def test_requirements_are_pinned():
    reqs = task_python.requirements()
    assert "pyautogui==0.9.54" in reqs
    assert all("==" in r for r in reqs)


def test_python_and_python3_have_pyautogui_and_see_the_desktop(desktop):
    for name in ("python", "python3"):
        res = desktop.execute(
            [name, "-c", "import pyautogui; print(tuple(pyautogui.size()))"], setup=True
        )
        assert res["returncode"] == 0, res["error"]
        assert res["output"].strip() == "(800, 600)"


def test_a_task_step_types_into_the_focused_window(desktop, tmp_path: Path):
    """OSWorld's own pattern: pyautogui keystrokes from a setup step reach the desktop's app."""
    desktop.reset_desktop()
    runner = SetupRunner(desktop, cache_dir=tmp_path, task_id="t")
    runner.run(
        [
            {"type": "launch", "parameters": {"command": ["xterm", "-T", "tp-term"]}},
            {
                "type": "execute_with_verification",
                "parameters": {
                    "command": ["true"],
                    "verification": {"window_exists": "tp-term"},
                    "max_wait_time": 20,
                },
            },
            {"type": "activate_window", "parameters": {"window_name": "tp-term"}},
            {
                "type": "execute",
                "parameters": {
                    "command": [
                        "python",
                        "-c",
                        "import pyautogui, time; time.sleep(0.5); "
                        "pyautogui.write('echo done > ~/typed.txt'); pyautogui.press('enter')",
                    ]
                },
            },
            {
                "type": "execute",
                "parameters": {
                    "command": "cat ~/typed.txt",
                    "shell": True,
                    "until": {"stdout": "done"},
                },
            },
        ]
    )


def test_shell_commands_and_string_commands_find_it_too(desktop):
    res = desktop.execute(
        "python3 -c 'import pyautogui, PIL, numpy; print(1)'", shell=True, setup=True
    )
    assert res["output"].strip() == "1", res["error"]
    assert res["error"] == ""  # python-xlib finds an Xauthority entry: no warning anywhere


def test_apps_keep_the_ordinary_path(desktop, tmp_path: Path):
    """Only task commands get the task python: a launched app (the agent's) does not."""
    desktop.launch(["sh", "-c", 'printf %s "$PATH" > ~/app-path.txt'])
    runner = SetupRunner(desktop, cache_dir=tmp_path, task_id="t")
    runner.run(
        [
            {
                "type": "execute",
                "parameters": {
                    "command": "cat ~/app-path.txt",
                    "shell": True,
                    "until": {"returncode": 0},
                },
            }
        ]
    )
    app_path = desktop.execute("cat ~/app-path.txt", shell=True, setup=True)["output"]
    assert app_path and "task-python" not in app_path
    task_path = desktop.execute('printf %s "$PATH"', shell=True, setup=True)["output"]
    assert task_path.split(":")[0] == str(task_python.interpreter().parent)


def test_doctor_checks_the_task_python(monkeypatch):
    from osworld_gym import doctor

    ok = doctor.check_task_python(doctor._Probe())
    assert ok.ok, ok.detail
    monkeypatch.setenv(task_python.ENV_VAR, "/nonexistent/python")
    missing = doctor.check_task_python(doctor._Probe())
    assert not missing.ok and "run scripts/install.sh" in missing.detail
