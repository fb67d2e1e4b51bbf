"""VLC as OSWorld's image has it (issue 25): the home template's vlcrc.

OSWorld's VLC tasks start ``vlc`` without ``--extraintf http`` and its getter reads
``http://<vm>:8080/requests/status.xml`` with password ``password``: the image's VLC serves its
HTTP interface by configuration. Ours does so from ``~/.config/vlc/vlcrc`` in the home template,
which also skips the first-run privacy dialog. The judge reads the status from inside the
desktop and believes only a VLC whose configuration points nowhere at the agent's files
(``tests/osworld_gym/redteam/test_redteam_trust.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytestmark = [pytest.mark.desktop, pytest.mark.timeout(600)]

TONE = "/home/user/Music/tone.wav"


def _task(command: list[str], rule_file: str) -> dict:
    """Start VLC as OSWorld's tasks do, then judge it with OSWorld's own getter and metric."""
    return {
        "id": "vlc-defaults",
        "instruction": "play the tone",
        "related_apps": ["vlc"],
        "config": [
            {
                "type": "download",
                "parameters": {
                    "files": [
                        {"url": "builtin-asset://wav_tone?freq=440&seconds=300", "path": TONE}
                    ]
                },
            },
            {"type": "launch", "parameters": {"command": command}},
            {
                "type": "execute",
                "parameters": {
                    "command": ["bash", "-c", "wmctrl -l | grep -qi 'VLC media player' && echo ok"],
                    "until": {"stdout": "ok"},
                },
            },
            {"type": "sleep", "parameters": {"seconds": 2}},
        ],
        "evaluator": {
            "func": "is_vlc_playing",
            "result": {"type": "vlc_playing_info", "dest": "status.xml"},
            "expected": {"type": "rule", "rules": {"type": "file_name", "file_name": rule_file}},
        },
    }


@pytest.fixture(scope="module")
def env() -> Iterator:
    import gymnasium as gym
    import osworld_gym  # noqa: F401 - registers OSWorld-v0

    e = gym.make("OSWorld-v0", provider="local", tasks=None, provider_kwargs={"profile": "ubuntu"})
    try:
        yield e
    finally:
        e.close()


@pytest.mark.parametrize(
    ("command", "state", "expected"),
    [
        # OSWorld's own launch line, with a file: playing it, the status says so
        (["vlc", "--no-audio", "--no-video-title-show", TONE], "playing", 1.0),
        # no file: VLC answers, stopped
        (["vlc", "--no-audio", "--no-video-title-show"], "stopped", 0.0),
    ],
    ids=["playing", "stopped"],
)
def test_vlc_serves_its_status_to_osworlds_getter_without_a_first_run_dialog(
    env, command, state, expected
):
    env.reset(options={"task": _task(command, "tone.wav")})
    client = env.unwrapped.provider.start()
    windows = client.execute(["wmctrl", "-l"])["output"]
    assert "Privacy" not in windows, windows  # the first-run "Privacy and Network Access Policy"
    status = client.execute(
        ["curl", "-s", "-u", ":password", "http://127.0.0.1:8080/requests/status.xml"]
    )["output"]
    assert f"<state>{state}</state>" in status, status[:500]
    _, reward, terminated, _, info = env.step("DONE")
    assert terminated and info["infra_error"] is None, info
    assert reward == expected
