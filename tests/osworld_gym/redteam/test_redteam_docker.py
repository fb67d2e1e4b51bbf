"""Red team, docker desktop: the player inside a container of our image (real dockerd, the
``minimal`` image built offline as in ``tests/osworld_gym/providers/test_docker.py``) cannot reach
the judge.

The guest server (the judge) runs as the container's root, the apps and every command of the
desktop user as uid 1000 without capabilities and with ``no_new_privs``; the run directory with
the token and the socket stays the host user's (0700). Each attack runs as the player through
``/setup/execute`` (what a terminal in the desktop runs). Before this, the image ran everything
as ``user``, who also had sudo with a known password (issue 17).

``$OSWORLD_GYM_TEST_IMAGE_TAG`` names the tag to build or reuse (default: the image's default
tag), so a shared machine's default image is not rebuilt under others.
"""

from __future__ import annotations

import os
import re
import time

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
import pytest
from osworld_gym.image import BuildOptions, build_image, containers
from osworld_gym.providers.docker import DockerProvider
from redteam import fork_bomb, player

docker = pytest.importorskip("docker", reason="the docker extra is not installed")
from dockerd import daemon  # noqa: E402 - needs docker

pytestmark = [
    pytest.mark.desktop,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        os.geteuid() == 1000, reason="a host user with the player's uid cannot be separated"
    ),
]


@pytest.fixture(scope="module")
def tag():
    dk = daemon()
    yield build_image(
        BuildOptions(apps="minimal", tag=os.environ.get("OSWORLD_GYM_TEST_IMAGE_TAG")), client=dk
    ).tag
    containers.cleanup_stale(dk)


@pytest.fixture(scope="module")
def env(tag):
    e = gym.make(
        "OSWorld-v0",
        provider="docker",
        tasks="builtin",
        screen_size=(1024, 768),
        provider_kwargs={"image": tag},
    )
    try:
        yield e
    finally:
        e.close()


def judge(env, command: str) -> dict:
    """Run a shell command the way an evaluator's ``vm_command_line`` does."""
    return env.unwrapped.provider.start().execute(command, shell=True)


#: the guest's pid as the player sees it (its command line is visible; nothing else is)
GUEST = "G=$(pgrep -f 'osworld_gym.guest --uds' | head -n 1); "


def test_the_docker_desktop_is_separated_and_says_so(env):
    _, info = env.reset(options={"task": "os-mkdir-001"})
    assert info["separated"] is True and env.unwrapped.provider.separated is True
    out = player(
        env,
        GUEST + "echo $G $(id -u) $(stat -c %u /proc/$G) "
        "$(grep CapEff /proc/self/status | cut -f2) "
        "$(grep NoNewPrivs /proc/self/status | cut -f2)",
    )
    assert re.fullmatch(r"\d+ 1000 0 0000000000000000 1\n", out["output"]), out
    # Xvfb is the judge's too
    assert player(env, "stat -c %u /proc/$(pgrep -x Xvfb)")["output"] == "0\n"


def test_the_player_cannot_kill_stop_or_trace_the_guest(env):
    env.reset(options={"task": "os-mkdir-001"})
    for attack in (
        "kill -9 $G",
        "kill -STOP $G",
        "kill -9 $(pgrep -x Xvfb)",
        "cat /proc/$G/environ",
        "ls /proc/$G/fd",
    ):
        out = player(env, GUEST + attack)
        assert out["returncode"] != 0, (attack, out)
        assert re.search(r"not permitted|Permission denied", out["error"]), (attack, out)
    # still serving, X still up
    assert env.unwrapped.provider.start().health()["x_alive"] is True


def test_the_player_cannot_read_the_token_or_replace_the_socket(env):
    env.reset(options={"task": "os-mkdir-001"})
    for attack in (
        "cat /run/osworld/token",
        "ls /run/osworld",
        "ls /run/osworld-judge",
        "mv /run/osworld/guest.sock /tmp/x.sock",
    ):
        out = player(env, attack)
        assert out["returncode"] != 0 and "Permission denied" in out["error"], (attack, out)


def test_sudo_runs_as_the_player_and_gives_no_root(env):
    """OSWorld's ``echo password | sudo -S CMD`` runs CMD as the user (the shim, as in the local
    sandbox); the real sudo, su and any other setuid program raise nobody."""
    env.reset(options={"task": "os-mkdir-001"})
    assert player(env, "echo password | sudo -S id -u")["output"] == "1000\n"
    for attack in ("echo password | /usr/bin/sudo -S id -u", "echo | su -c 'id -u' root"):
        out = player(env, attack)
        assert "0\n" not in out["output"] and out["returncode"] != 0, (attack, out)


def test_a_player_loop_cannot_act_during_an_evaluation_and_the_task_scores_0(env):
    """A loop that creates the answer while it sees an evaluator run (and removes it otherwise)
    stays frozen meanwhile (the player's freezer cgroup on a root host, SIGSTOP elsewhere).
    (Writing into the evaluator's stdout fails anyway: the pipe is the judge's, 0600.)"""
    env.reset(options={"task": "os-mkdir-001"})
    loop = (
        "while :; do if pgrep -f 'Directory exists' >/dev/null; then "
        "mkdir -p ~/Desktop/projects; else rmdir ~/Desktop/projects 2>/dev/null; fi; done"
    )
    env.unwrapped.provider.start().upload("/home/user/.forge.sh", loop.encode())
    assert (
        player(env, "setsid bash /home/user/.forge.sh </dev/null >/dev/null 2>&1 &")["returncode"]
        == 0
    )
    time.sleep(0.5)
    outs = [
        judge(
            env,
            "sleep 0.3; [ -d ~/Desktop/projects ] && echo 'Directory exists.' || "
            "echo 'Directory does not exist.'",
        )["output"]
        for _ in range(3)
    ]
    assert outs == ["Directory does not exist.\n"] * 3
    # the same command as the player (nothing held): the loop answers for it
    assert (
        "Directory exists."
        in player(
            env,
            "sleep 0.3; [ -d ~/Desktop/projects ] && echo 'Directory exists.' || "
            "echo 'Directory does not exist.'",
        )["output"]
    )
    # (the loop removes it again once that command is gone: wait for it, so the state the
    # episode ends in is "no directory", not what the player's own check left)
    deadline = time.monotonic() + 10
    while player(env, "[ -d ~/Desktop/projects ]")["returncode"] == 0:
        assert time.monotonic() < deadline, "the loop never removed the directory"
        time.sleep(0.05)
    _, reward, terminated, _, info = env.step("DONE")
    assert terminated and reward == 0.0 and info["infra_error"] is None, info


def test_on_a_root_host_judge_and_player_get_the_desktops_cgroups_and_a_freezer(env):
    if os.geteuid() != 0:
        pytest.skip("the desktop's cgroups need a root host")
    env.reset(options={"task": "os-mkdir-001"})
    out = player(
        env,
        GUEST + "for p in self $G; do grep -E ':(pids|memory|freezer):' "
        "/proc/$p/cgroup | cut -d: -f2- | sort | tr '\\n' ' '; echo; done",
    )
    me, guest = (
        {c: path for c, path in (x.split(":", 1) for x in line.split())}
        for line in out["output"].splitlines()
    )
    desktop = f"/osworld-gym/{env.unwrapped.provider._dir.name}"
    assert all(me[c].endswith(f"{desktop}/player") for c in ("pids", "memory", "freezer")), out
    assert all(guest[c].endswith(f"{desktop}/judge") for c in ("pids", "memory")), out
    assert desktop not in guest["freezer"], out
    # the freezer's files are the judge's: the player cannot thaw itself
    out = player(env, "echo THAWED > /run/osworld-judge/cgroup/freezer/held/freezer.state")
    assert out["returncode"] != 0 and "Permission denied" in out["error"], out


def test_2000_processes_are_contained_and_the_judge_keeps_working(env):
    if os.geteuid() != 0:
        pytest.skip("the desktop's cgroups need a root host")
    env.reset(options={"task": "os-mkdir-001"})
    forked = fork_bomb(env)
    assert 0 < forked < env.unwrapped.provider.limits.player_pids < 2000
    # the bomb is still alive: the judge can still run commands and score
    assert judge(env, "echo judge-ok")["output"].strip() == "judge-ok"
    _, reward, _, _, info = env.step("DONE")
    assert reward == 0.0 and info["infra_error"] is None


class _HostUser1000(DockerProvider):
    """A provider whose run directory belongs to uid 1000, as for a host user with the
    player's uid (this host runs as root); like any non-root host, it makes no cgroups."""

    def _cgroups(self):
        return {}, []

    def _desktop_spec(self):
        spec = super()._desktop_spec()
        for path in (self._dir, self._dir / "token"):
            os.chown(path, 1000, 1000)
        return spec


def test_a_host_user_with_the_players_uid_gets_an_unseparated_desktop_reported_as_such(tag):
    if os.geteuid() != 0:
        pytest.skip("handing the run directory to uid 1000 needs root")
    p = _HostUser1000(screen_size=(640, 480), image=tag, owner_watchdog=False)
    try:
        client = p.start()
        assert p.separated is False and client.health()["separated"] is False
        # and it is really so: the player reads the token
        assert client.execute(["cat", "/run/osworld/token"])["returncode"] == 0
    finally:
        p.stop()
