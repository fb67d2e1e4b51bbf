"""The docker provider on a real Docker daemon, with our image built offline.

The module fixture starts dockerd if it is installed but not running (as root), then builds the
``minimal`` image (debootstrap base, wheels from the host) or reuses it when its inputs have not
changed. Then: a built-in task runs in a container through ``gym.make``; containers go away on
close, when the owner is SIGKILLed (the watchdog), on SIGTERM (the handler, which chains to the
previous one), and by ``osworld-gym image prune`` once their owner is dead. Timings of the build,
the container start, the reset and a step are printed (``-s``) and written to
``$OSWORLD_GYM_DOCKER_TIMINGS`` when set.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
import pytest
from osworld_gym.image import BuildOptions, build_image, containers
from osworld_gym.providers.limits import cgroup_dirs

docker = pytest.importorskip("docker", reason="the docker extra is not installed")
from dockerd import daemon  # noqa: E402 - needs docker
from osworld_gym.providers.docker import DockerProvider

pytestmark = [pytest.mark.desktop, pytest.mark.slow, pytest.mark.timeout(1800)]

TIMINGS: dict[str, float] = {}

CHILD = textwrap.dedent("""
    import faulthandler, os, signal, sys, time
    faulthandler.register(signal.SIGUSR1)     # the test asks where a program that hangs is stuck
    from osworld_gym.providers.docker import DockerProvider
    tag, mode = sys.argv[1], sys.argv[2]
    if mode == "int":  # Ctrl+C in a terminal: a runner started in the background (`cmd &`) hands
        signal.signal(signal.SIGINT, signal.default_int_handler)  # its children SIGINT ignored
    if mode == "term":
        def previous(signum, frame):          # the program's own handler: must still run
            print("previous handler ran", flush=True)
            os._exit(0)                       # no atexit: only our signal handler can clean up
        signal.signal(signal.SIGTERM, previous)
    # without the watchdog, only the provider's own handlers can remove the container
    p = DockerProvider(screen_size=(640, 480), image=tag, owner_watchdog=(mode == "watchdog"))
    p.start()
    print(p.container_id, flush=True)
    time.sleep(600)
""")


@pytest.fixture(scope="module")
def dk():
    client = daemon()
    yield client
    containers.cleanup_stale(client)  # whatever a failed test left behind


@pytest.fixture(scope="module")
def tag(dk) -> str:
    # OSWORLD_GYM_TEST_IMAGE_TAG: a tag of one's own on a daemon shared with others
    opts = BuildOptions(apps="minimal", tag=os.environ.get("OSWORLD_GYM_TEST_IMAGE_TAG"))
    result = build_image(opts, client=dk)
    TIMINGS.update({f"build_{k}_s": v for k, v in result.timings.items()})
    TIMINGS["build_reused"] = float(result.reused)
    return result.tag


@pytest.fixture(scope="module", autouse=True)
def report_timings():
    yield
    if TIMINGS:
        print("\ndocker timings: " + json.dumps({k: round(v, 3) for k, v in TIMINGS.items()}))
        if path := os.environ.get("OSWORLD_GYM_DOCKER_TIMINGS"):
            Path(path).write_text(json.dumps(TIMINGS, indent=2))


def gone(dk, container_id: str, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            dk.containers.get(container_id)
        except docker.errors.NotFound:
            return True
        time.sleep(0.1)
    return False


def ended(proc: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    """The program's output once it has ended; if it has not within ``timeout``, fail with its
    threads' stacks (SIGUSR1, see CHILD) and its stderr. Once, in a CI run under load, the
    SIGINT program did not end within 60 s, and nothing said where it was."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the program did not end within {timeout:.0f} s; its stderr:\n{err[-6000:]}")


def spawn_owner(tag: str, mode: str) -> tuple[subprocess.Popen, str]:
    """A process that starts a desktop and then idles; returns it and its container id."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, tag, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline().strip() if ready else ""
    if not line:
        proc.kill()
        pytest.fail(f"the owner process did not start a desktop: {proc.stderr.read()[-2000:]}")
    return proc, line


# ---- image --------------------------------------------------------------------------------------
def test_an_unchanged_image_is_reused_not_rebuilt(dk, tag):
    t0 = time.monotonic()
    again = build_image(
        BuildOptions(apps="minimal", tag=os.environ.get("OSWORLD_GYM_TEST_IMAGE_TAG")), client=dk
    )
    TIMINGS["rebuild_check_s"] = time.monotonic() - t0
    assert again.reused and again.tag == tag
    labels = dk.images.get(tag).labels
    assert labels["osworld-gym.image"] == "desktop" and labels["osworld-gym.apps"] == "minimal"


# ---- what the image offers tasks: its manifest ------------------------------------------------
def test_the_image_says_what_it_holds_and_tasks_are_counted_from_it(dk, tag):
    from osworld_examples import OFFICIAL, PRESENT
    from osworld_gym.providers.manifest import read_manifest
    from osworld_gym.support import classify, local_capabilities
    from osworld_gym.support.coverage import coverage

    manifest = read_manifest(tag, dk)  # read from the image, never started
    assert manifest["app_set"] == "minimal" and manifest["apps"] == []
    assert {"xterm", "mousepad", "python3", "sudo"} <= set(manifest["programs"])
    assert not {"soffice", "chromium", "gimp", "code"} & set(manifest["programs"])
    assert manifest["gsettings_profiles"] == ["ubuntu"]  # the ubuntu profile's dconf is there
    caps = DockerProvider(image=tag, network="none").desktop_capabilities()
    assert (caps.network, caps.google, caps.vscode, caps.apps) == (False, False, False, frozenset())
    calc = {"id": "c", "instruction": "x", "snapshot": "libreoffice_calc",
            "related_apps": ["libreoffice_calc"], "evaluator": {"func": "infeasible"}}  # fmt: skip
    assert "not in the image" in classify(calc, caps).reason
    assert classify(calc, local_capabilities()).supported  # this machine has LibreOffice
    if PRESENT:  # OSWorld's 369: never more than what needs nothing external (264)
        cov = coverage(OFFICIAL, provider="docker", provider_kwargs={"image": tag})
        total, supported = cov.totals()
        assert total == 369 and 0 < supported < 60, supported
        assert cov.totals("libreoffice_calc")[1] == cov.totals("vs_code")[1] == 0
        assert cov.totals("chrome")[1] == 0
        bridge = coverage(
            OFFICIAL, provider="docker", provider_kwargs={"image": tag, "network": "bridge"}
        )
        assert bridge.totals()[1] > supported  # websites count once the network is there


def test_coverage_of_an_image_that_is_not_here_says_how_to_build_it(dk):
    proc = subprocess.run(
        [sys.executable, "-m", "osworld_gym.cli", "tasks", "coverage", "/nonexistent",
         "--provider", "docker", "--image", "osworld-gym:absent-full"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert (
        "osworld-gym:absent-full is not here: build it with "
        "`osworld-gym image build --apps full --tag osworld-gym:absent-full`" in proc.stderr
    )


# ---- the env ------------------------------------------------------------------------------------
def test_a_builtin_task_runs_in_a_container_and_the_container_goes_away_on_close(dk, tag):
    env = gym.make(
        "OSWorld-v0",
        provider="docker",
        tasks="builtin",
        max_steps=20,
        provider_kwargs={"image": tag},
    )
    provider = env.unwrapped.provider
    try:
        obs, info = env.reset(options={"task": "os-mkdir-001"})
        TIMINGS.update(
            container_start_s=provider.timings["start_s"],
            container_create_s=provider.timings["container_s"],
            first_reset_s=info["timings"]["reset_ms"] / 1000,
        )
        assert obs["screenshot"].shape == (1080, 1920, 3)
        cid = provider.container_id
        assert dk.containers.get(cid).labels["osworld-gym.owner-pid"] == str(os.getpid())
        for action in env.unwrapped.task.oracle:  # the real oracle: it names /home/user
            *_, info = env.step(action)
            assert info["action_error"] is None and info["infra_error"] is None, info
            if action.startswith("pyautogui.write"):
                TIMINGS["step_exec_ms"] = info["timings"]["exec_ms"]
                TIMINGS["step_observe_ms"] = info["timings"]["observe_ms"]
        _, reward, terminated, _, _ = env.step("DONE")
        assert terminated and reward == 1.0

        t0 = time.monotonic()
        _, info = env.reset(options={"task": "os-mkdir-001"})
        TIMINGS["reset_s"] = time.monotonic() - t0
        TIMINGS["desktop_reset_ms"] = info["timings"]["desktop_reset_ms"]
        assert provider.container_id == cid, "a reset must not replace our container"
        _, reward, terminated, _, _ = env.step("DONE")
        assert terminated and reward == 0.0
    finally:
        env.close()
    assert gone(dk, cid, timeout=10), "env.close() must remove the container"


@pytest.mark.parametrize("profile", ["ubuntu", "openbox"])
def test_the_container_runs_the_profile_it_is_given(dk, tag, profile, monkeypatch):
    """Our image carries both desktop profiles; ubuntu (the default) has its top bar and dock
    and GSettings on Ubuntu's bus path, openbox has neither."""
    monkeypatch.delenv("OSWORLD_GYM_PROFILE", raising=False)
    p = DockerProvider(
        screen_size=(1280, 720), image=tag, **({} if profile == "ubuntu" else {"profile": profile})
    )
    try:
        c = p.start()
        run = lambda cmd: c.execute(["bash", "-c", cmd])  # noqa: E731
        panels = [
            run(f"xprop -name {n} _NET_WM_WINDOW_TYPE")["returncode"] == 0
            for n in ("osworld-topbar", "osworld-dock")
        ]
        theme = run(
            "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus "
            "gsettings get org.gnome.desktop.interface gtk-theme"
        )
        if profile == "ubuntu":
            assert panels == [True, True]
            assert theme["returncode"] == 0 and theme["output"] == "'Yaru'\n", theme
        else:
            assert panels == [False, False]
    finally:
        p.stop()


def test_the_desktop_user_home_sudo_shim_and_isolation(dk, tag):
    a = DockerProvider(screen_size=(800, 600), image=tag)
    b = DockerProvider(screen_size=(800, 600), image=tag)
    try:
        ca, cb = a.start(), b.start()

        def run(c, cmd: str) -> str:
            return c.execute(["bash", "-c", cmd])["output"].strip()

        assert run(ca, "id -un; echo $HOME; pwd") == "user\n/home/user\n/home/user"
        # OSWorld's `echo password | sudo -S CMD` runs CMD as the user: no root for the player
        # (the shim, as in the local sandbox; tests/osworld_gym/redteam/test_redteam_docker.py has
        # the attacks)
        assert run(ca, "echo password | sudo -S -p '' id -u") == "1000"
        assert run(ca, "ls /sys/class/net") == "lo", "the desktop has no network"
        assert ca.screenshot_array().shape == (600, 800, 3)
        run(ca, "touch ~/Desktop/only-in-a")
        assert run(cb, "ls ~/Desktop") == "", "desktops share nothing"
        a.reset_state()
        assert run(ca, "ls ~/Desktop") == "", "a reset restores the home"
    finally:
        a.stop()
        b.stop()
    assert not a.running and not b.running


# ---- cleanup ------------------------------------------------------------------------------------
def test_a_sigkilled_owners_container_is_stopped_by_its_watchdog(dk, tag):
    proc, cid = spawn_owner(tag, "watchdog")
    assert dk.containers.get(cid).status == "running"
    run_dir = Path(dk.containers.get(cid).labels["osworld-gym.run-dir"])
    t0 = time.monotonic()
    proc.kill()
    proc.wait()
    assert gone(dk, cid), "the container outlived its SIGKILLed owner"
    TIMINGS["watchdog_removal_s"] = time.monotonic() - t0
    # the run directory (and, on a root host, the desktop's cgroups) goes with the owner's
    # janitor there, else with the stale cleanup
    containers.cleanup_stale(dk)
    assert not run_dir.exists()
    assert cgroup_dirs(run_dir.name) == []


def test_prune_removes_the_container_of_a_dead_owner(dk, tag):
    proc, cid = spawn_owner(tag, "no-watchdog")
    run_dir = dk.containers.get(cid).labels["osworld-gym.run-dir"]
    proc.kill()
    proc.wait()
    time.sleep(1)
    assert dk.containers.get(cid).status == "running", "without the watchdog it stays up..."
    out = subprocess.run(
        [sys.executable, "-m", "osworld_gym.cli", "image", "prune"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert cid[:12] in out.stdout
    assert gone(dk, cid, timeout=10), "...until prune removes it"
    assert not Path(run_dir).exists()
    assert cgroup_dirs(Path(run_dir).name) == []


def test_sigterm_removes_the_containers_and_chains_to_the_previous_handler(dk, tag):
    proc, cid = spawn_owner(tag, "term")
    proc.terminate()
    out, _ = ended(proc)
    assert "previous handler ran" in out
    assert gone(dk, cid, timeout=10), "SIGTERM must remove the container"


def test_sigint_ends_the_program_and_its_containers_with_it(dk, tag):
    proc, cid = spawn_owner(tag, "int")
    proc.send_signal(signal.SIGINT)  # KeyboardInterrupt ends the program; atexit cleans up
    _, err = ended(proc)
    assert "KeyboardInterrupt" in err
    assert gone(dk, cid, timeout=10), "a program ended by Ctrl+C must not leave its container"
