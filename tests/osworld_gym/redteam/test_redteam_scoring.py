"""Red team, scoring, on real desktops: what the agent can do to its own desktop to turn a
failing episode into an excluded one (an ``infra_error``) now ends in a score of 0 with the
reason in ``info`` -- or, for a killed task app, in a normal score with the death listed.

The tricks are done the way the agent does them: as the desktop user, inside the desktop (here
through the guest's ``/execute``, which runs exactly what a terminal in the desktop would).
Each one was an ``infra_error`` in the 2026-11-23 red-team pass (issue 17).
"""

from __future__ import annotations

import resource

import pytest
from osworld_gym.errors import UnusableResultFile

pytestmark = pytest.mark.desktop

#: result: vm_file /home/user/Desktop/greeting.txt; doing nothing scores 0
TASK = "os-write-file-001"
RESULT = "~/Desktop/greeting.txt"


def in_desktop(env, script: str) -> None:
    out = env.unwrapped._client.execute(["bash", "-c", script], timeout=60)
    assert out["returncode"] == 0, out


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize(
    "trick, reason",
    [
        (f"mkdir -p {RESULT}", "is a directory"),
        (f"mkfifo {RESULT}", "not a regular file"),
        (f"ln -s /etc/shadow {RESULT}", "outside the desktop user's home"),
        (f"ln -s /proc/self/environ {RESULT}", "outside the desktop user's home"),
        (f"truncate -s 2G {RESULT}", "byte limit"),
    ],
)
def test_an_unusable_result_file_scores_zero_with_the_reason(local_env, trick, reason):
    local_env.reset(options={"task": TASK})
    rss_before = max_rss_mib()
    in_desktop(local_env, trick)
    _, reward, terminated, _, info = local_env.step("DONE")
    assert terminated and reward == 0.0 and info["infra_error"] is None, info
    assert info["eval_note"] and reason in info["eval_note"], info["eval_note"]
    # the 2 GiB file was refused by size, never transferred or buffered
    assert max_rss_mib() - rss_before < 200


def test_a_result_file_the_agent_made_unreadable_scores_zero_not_infra(local_env):
    local_env.reset(options={"task": TASK})
    in_desktop(local_env, f"printf 'Hello, OSWorld!\\n' > {RESULT} && chmod 000 {RESULT}")
    _, reward, terminated, _, info = local_env.step("DONE")
    assert terminated and info["infra_error"] is None, info
    # the right content, but the desktop user cannot read it: as on OSWorld's VM (whose server
    # runs as the user), it is no result, even though the guest itself is root and could
    assert reward == 0.0 and "not readable by the desktop user" in info["eval_note"], info


def test_a_large_result_is_streamed_and_cut_at_the_cap_on_the_host(local_env, tmp_path):
    """The host side caps too (a guest that serves anything, e.g. OSWorld's own): at most
    ``max_bytes`` are written, nothing is left behind, memory does not grow with the file."""
    local_env.reset(options={"task": TASK})
    in_desktop(local_env, f"truncate -s 64M {RESULT}")
    client = local_env.unwrapped._client
    rss_before = max_rss_mib()
    with pytest.raises(UnusableResultFile, match="over the 1048576 byte limit"):
        client.download_file(
            "/home/user/Desktop/greeting.txt", tmp_path / "g.txt", max_bytes=1 << 20
        )
    assert list(tmp_path.iterdir()) == []
    assert max_rss_mib() - rss_before < 32
    assert client.download_file("/home/user/Desktop/greeting.txt", tmp_path / "g.txt") == 64 << 20
    assert (tmp_path / "g.txt").stat().st_size == 64 << 20


def test_the_agent_killing_its_task_app_is_scored_and_listed_not_excluded(local_env):
    local_env.reset(options={"task": "text_editor-append-001"})
    in_desktop(local_env, "kill -9 $(pidof mousepad)")
    _, reward, terminated, truncated, info = local_env.step("DONE")
    assert terminated and not truncated and info["infra_error"] is None, info
    assert reward == 0.0 and any("mousepad" in e and "SIGKILL" in e for e in info["app_exits"])
    _, info = local_env.reset(options={"task": "text_editor-append-001"})  # and it comes back
    assert info["infra_error"] is None and info["app_exits"] == []


def test_a_postconfig_step_refused_on_the_agents_desktop_is_skipped_not_an_infra_error(local_env):
    """The agent closed the window postconfig wants to focus (OSWorld's controller ignores such
    failures too): the step is skipped and the evaluator scores what the agent left -- here a
    correct file, so 1.0; a 0 would be scored just the same."""
    task = {
        "id": "redteam-closed-window",
        "instruction": "Write Hello, OSWorld! to greeting.txt",
        "snapshot": "os",
        "related_apps": ["os"],
        "config": [
            {
                "type": "execute",
                "parameters": {"command": ["printf", "Hello, OSWorld!\\n"], "stdout": "gold.txt"},
            }
        ],
        "evaluator": {
            "postconfig": [
                {
                    "type": "activate_window",
                    "parameters": {"window_name": "greeting.txt - Mousepad"},
                }
            ],
            "func": "compare_text_file",
            "result": {
                "type": "vm_file",
                "path": "/home/user/Desktop/greeting.txt",
                "dest": "greeting.txt",
            },
            "expected": {"type": "cache_file", "path": "gold.txt"},
        },
    }
    local_env.reset(options={"task": task})
    in_desktop(local_env, f"mkdir -p ~/Desktop && printf 'Hello, OSWorld!\\n' > {RESULT}")
    _, reward, terminated, _, info = local_env.step("DONE")
    assert terminated and info["infra_error"] is None and reward == 1.0, info


def test_a_result_command_hung_by_the_agent_scores_zero_not_infra(local_env):
    """The agent turns the file an evaluator command reads into a fifo: the command hangs until
    its timeout (the guest answers 504). The guest is fine, so this is the agent's doing."""
    task = {
        "id": "redteam-fifo-command",
        "instruction": "Write yes to ~/Desktop/answer.txt",
        "snapshot": "os",
        "related_apps": ["os"],
        "config": [],
        "evaluator": {
            "func": "exact_match",
            "result": {
                "type": "vm_command_line",
                "timeout": 2,
                "command": ["cat", "/home/user/Desktop/answer.txt"],
            },
            "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
        },
    }
    local_env.reset(options={"task": task})
    in_desktop(local_env, "mkdir -p ~/Desktop && mkfifo ~/Desktop/answer.txt")
    _, reward, terminated, _, info = local_env.step("DONE")
    assert terminated and reward == 0.0 and info["infra_error"] is None, info
    assert "timed out" in info["eval_note"]


def _expected_side_task(task_id: str, command: list[str]) -> dict:
    return {
        "id": task_id,
        "instruction": "Write yes to ~/Desktop/answer.txt",
        "snapshot": "os",
        "related_apps": ["os"],
        "config": [],
        "evaluator": {
            "func": "exact_match",
            "result": {
                "type": "vm_file",
                "path": "/home/user/Desktop/answer.txt",
                "dest": "answer.txt",
            },
            "expected": {"type": "vm_command_line", "timeout": 2, "command": command},
        },
    }


def test_the_agents_listener_on_a_port_an_expected_getter_names_scores_zero_not_infra(local_env):
    """The expected side asks a task app's port (here 1341); the agent serves it itself. The
    guest refuses the command (409): the agent's doing, 0 with the reason, never excluded."""
    local_env.reset(
        options={
            "task": _expected_side_task(
                "redteam-expected-listener", ["curl", "-s", "http://127.0.0.1:1341/"]
            )
        }
    )
    in_desktop(
        local_env,
        "mkdir -p ~/Desktop && echo no > ~/Desktop/answer.txt && "
        "cd /tmp && (setsid python3 -m http.server 1341 --bind 127.0.0.1 "
        "</dev/null >/dev/null 2>&1 &) && for i in $(seq 50); do "
        "curl -s http://127.0.0.1:1341/ >/dev/null && break; sleep 0.2; done",
    )
    _, reward, terminated, _, info = local_env.step("DONE")
    assert terminated and reward == 0.0 and info["infra_error"] is None, info
    assert "port 1341" in info["eval_note"], info


def test_an_expected_command_hung_by_the_agent_scores_zero_not_infra(local_env):
    """The expected side reads a file the agent turned into a fifo: 504, the agent's doing."""
    local_env.reset(
        options={
            "task": _expected_side_task(
                "redteam-expected-fifo", ["cat", "/home/user/Desktop/expected.txt"]
            )
        }
    )
    in_desktop(
        local_env,
        "mkdir -p ~/Desktop && echo yes > ~/Desktop/answer.txt && mkfifo ~/Desktop/expected.txt",
    )
    _, reward, terminated, _, info = local_env.step("DONE")
    assert terminated and reward == 0.0 and info["infra_error"] is None, info
    assert "timed out" in info["eval_note"], info
