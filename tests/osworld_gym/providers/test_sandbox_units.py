"""Judge/player isolation pieces that need no desktop: mounts, identities, limits, commands."""

from __future__ import annotations

import doctest
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from osworld_gym.guest.app import GuestConfig
from osworld_gym.guest.osworld_api import isolate_python
from osworld_gym.guest.processes import PlayerIdentity
from osworld_gym.providers import limits, local, sandbox


@pytest.mark.parametrize(
    "name",
    [
        "osworld_gym.providers.sandbox",
        "osworld_gym.providers.limits",
        "osworld_gym.guest.osworld_api",
    ],
)
def test_doctests_of_the_isolation_modules_pass(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_the_sandbox_binds_an_allowlist_not_the_host_root(tmp_path):
    p = local.LocalProvider(screen_size=(800, 600), root_dir=tmp_path)
    p._dir = tmp_path
    cmd = p._command(tmp_path / "home", tmp_path / "run", userns_fd=7)
    pairs = list(zip(cmd, cmd[1:], cmd[2:], strict=False))
    assert ("--ro-bind", "/", "/") not in pairs
    assert ("--ro-bind", "/usr", "/usr") in pairs
    assert ("--ro-bind", str(tmp_path / "empty"), "/etc/shadow") in pairs
    assert ("--userns", "7", "--unshare-pid") in pairs
    assert "--unshare-user" not in cmd
    for secret in (str(local._SHIMS), os.path.expanduser("~/.cache")):
        assert ("--ro-bind", secret, secret) not in pairs  # shims appear elsewhere, cache never
    # the guest's interpreter is bound below a 0700 guard
    interp = os.path.realpath(sys.base_prefix)
    guard = sandbox.guard_dir(interp)
    if guard is not None:
        i = cmd.index(guard)
        assert cmd[i - 3 : i] == ["--perms", "0700", "--dir"]


def test_judge_paths_under_a_visible_host_dir_are_reported_not_hidden():
    args, exposed = sandbox.judge_mounts(["/usr/lib/python3.11", "/root/.pyenv/x", "/tmp/ci/v"])
    assert exposed == ["/usr/lib/python3.11"]
    assert args == [
        "--perms",
        "0700",
        "--dir",
        "/root",
        "--ro-bind",
        "/root/.pyenv/x",
        "/root/.pyenv/x",
        "--perms",
        "0700",
        "--dir",
        "/tmp/ci",
        "--ro-bind",
        "/tmp/ci/v",
        "/tmp/ci/v",
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="a two-line uid_map needs root")
def test_the_user_namespace_maps_the_judge_to_root_and_the_player_to_an_unprivileged_uid():
    fd = sandbox.two_identity_userns(sandbox.PLAYER_HOST_ID)
    try:
        out = subprocess.run(
            [
                "bwrap",
                "--userns",
                str(fd),
                "--ro-bind",
                "/",
                "/",
                "--proc",
                "/proc",
                "--",
                "cat",
                "/proc/self/uid_map",
            ],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.close(fd)
    assert [line.split() for line in out.stdout.splitlines()] == [
        ["0", "0", "1"],
        ["1000", str(sandbox.PLAYER_HOST_ID), "1"],
    ], out.stderr


def test_a_player_process_joins_its_cgroup_then_drops_every_privilege():
    ident = PlayerIdentity(1000, 1000, cgroup_procs=("/run/osworld/p.procs",))
    argv = ident.wrap(["mousepad", "a b.txt"], shell=False)
    assert argv[:2] == ["/bin/sh", "-c"]
    assert "echo $$ > '/run/osworld/p.procs'" in argv[2] and argv[2].endswith('exec "$@"')
    assert argv[4:12] == [
        "setpriv",
        "--reuid=1000",
        "--regid=1000",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]
    assert argv[-2:] == ["mousepad", "a b.txt"]
    assert PlayerIdentity(5, 6).wrap("echo hi | cat", shell=True)[-3:] == [
        "/bin/sh",
        "-c",
        "echo hi | cat",
    ]


def test_without_a_cgroup_the_player_gets_rlimits():
    cfg = GuestConfig(player_uid=1000, player_max_memory=1 << 30, player_max_procs=500)
    assert cfg.player().rlimit_prefix == ("prlimit", f"--as={1 << 30}", "--nproc=500", "--")
    with_cg = GuestConfig(player_uid=1000, player_cgroups=("x",), player_max_memory=1 << 30)
    assert with_cg.player().rlimit_prefix == ()
    assert GuestConfig().player() is None


def test_evaluation_pythons_are_isolated():
    assert isolate_python(["python", "-c", "1"]) == ["python", "-I", "-c", "1"]
    assert isolate_python(["/usr/bin/python3.11", "x.py"]) == ["/usr/bin/python3.11", "-I", "x.py"]
    assert isolate_python(["pythonista", "-c", "1"]) == ["pythonista", "-c", "1"]
    assert isolate_python("python3 -c 1") == "python3 -c 1"


def test_limits_reject_nonsense_and_leave_the_judge_a_reserve():
    lim = limits.DesktopLimits()
    assert lim.player_pids < lim.pids < 2000
    assert lim.player_memory < lim.memory_bytes < 3.5 * limits.GiB
    for bad in ({"pids": 0}, {"memory_bytes": -1}, {"pids": 100}, {"home_bytes": True}):
        with pytest.raises(ValueError):
            limits.DesktopLimits(**bad)
    for bad in ("", "lots", "-1g", "nan", float("nan")):
        with pytest.raises(ValueError):
            limits.parse_size(bad)
    assert limits.parse_size("1.5g") == 3 << 29


def test_unlimited_desktops_make_no_cgroup():
    assert (
        limits.DesktopCgroup.create("x", limits.DesktopLimits(memory_bytes=None, pids=None)) is None
    )


def test_evaluation_holds_code_runners_but_not_installed_apps():
    from osworld_gym.guest.judging import RUNS_CODE

    for prog in (
        "bash",
        "sh",
        "dash",
        "python3",
        "python3.11",
        "perl",
        "node",
        "watch",
        "xargs",
        "env",
        "busybox",
        "gdb",
    ):
        assert RUNS_CODE.fullmatch(prog), prog
    for prog in (
        "chromium",
        "vlc",
        "soffice.bin",
        "mousepad",
        "xterm",
        "openbox",
        "dbus-daemon",
        "sleep",
        "socat",
    ):
        assert not RUNS_CODE.fullmatch(prog), prog


@pytest.mark.parametrize("core", [False, True], ids=["no-core", "core-dump"])
def test_a_child_killed_just_before_the_last_reap_is_waited_for_and_counted(tmp_path, core):
    """The race behind an empty ``app_exits``: ``kill -9`` returns once the signal is queued,
    before the target has run and died. A stopped child shows it deterministically: a crash
    signal stays pending until SIGCONT, and the reap must wait for that death, not miss it.

    With a core dump the child spends a while neither pending nor a zombie (the signal is
    dequeued, the dump is being written): the wait must not end there either. That case failed
    on a CI machine whose core limit was unlimited."""
    import resource
    import signal
    import threading

    from osworld_gym.guest.processes import ProcessRegistry

    limit = resource.RLIM_INFINITY if core else 0
    reg = ProcessRegistry()
    # 64 MiB of touched memory makes the dump take a while (tens of ms), so the window is wide
    code = "import time; b = b'x' * (64 << 20); print('ready', flush=True); time.sleep(30)"
    proc = reg.popen(
        [sys.executable, "-c", code],
        app=True,
        cwd=str(tmp_path),
        stdout=subprocess.PIPE,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (limit, limit)),
    )
    try:
        assert proc.stdout.readline() == b"ready\n"
        os.kill(proc.pid, signal.SIGSTOP)
        while open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
            pass
        os.kill(proc.pid, signal.SIGABRT)  # queued: the stopped child cannot act on it yet
        threading.Timer(0.3, os.kill, (proc.pid, signal.SIGCONT)).start()
        reg.reap_dying(timeout=10)
        assert [c.signal for c in reg.crashes] == ["SIGABRT"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_an_app_below_a_launcher_killed_before_the_last_reap_is_waited_for_and_counted(tmp_path):
    """``soffice`` runs ``soffice.bin`` below ``oosplash``: the app's death reaches the guest as
    the launcher's exit status, after the launcher has reaped it and exited. The reap must wait
    for that chain, not only for its own children (an app killed mid-episode went unlisted)."""
    import signal
    import threading

    from osworld_gym.guest.processes import ProcessRegistry, descendants

    reg = ProcessRegistry()
    app = "import time; b = b'x' * (64 << 20); print('ready', flush=True); time.sleep(30)"
    launcher = f'{sys.executable} -c "{app}" & wait $!; exit $?'
    proc = reg.popen(["sh", "-c", launcher], app=True, cwd=str(tmp_path), stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        (child,) = [p.pid for p in descendants(proc.pid)]
        os.kill(child, signal.SIGSTOP)
        while open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
            pass
        os.kill(child, signal.SIGABRT)  # pending until SIGCONT, then the launcher exits 134
        threading.Timer(0.3, os.kill, (child, signal.SIGCONT)).start()
        reg.reap_dying(timeout=10)
        assert [(c.name, c.signal) for c in reg.crashes] == [("sh", "SIGABRT")]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_a_zombie_its_parent_never_reaps_is_waited_for_once():
    from osworld_gym.guest.processes import ProcessRegistry, descendants

    reg = ProcessRegistry()
    code = (
        "import os, time\nif os.fork() == 0:\n    os._exit(1)\nprint('ready', flush=True)\n"
        "time.sleep(30)"
    )
    proc = reg.popen([sys.executable, "-c", code], app=True, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        (zombie,) = [p.pid for p in descendants(proc.pid)]
        while open(f"/proc/{zombie}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)
        assert zombie in reg._dying()
        reg.reap_dying(timeout=0.2)
        assert zombie not in reg._dying()  # remembered as stuck: later calls do not wait for it
        assert reg.crashes == []  # exited with 1: not a crash, and its parent is alive
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


SWAPPER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(x) for x in sys.argv[1:3])
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:  # RENAME_EXCHANGE: the name flips between a dir and a symlink
    libc.renameat2(-100, a, -100, b, 2)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_chown_tree_never_follows_a_directory_swapped_for_a_symlink_mid_walk(tmp_path):
    """The judge gives the home to the player as root. A player process flips ``home/d``
    between a real directory and a symlink to a directory outside as fast as it can; however
    the walk interleaves with it, nothing outside changes owner."""
    from osworld_gym.guest.homedir import chown_tree

    home, outside = tmp_path / "home", tmp_path / "outside"
    (home / "d").mkdir(parents=True)
    outside.mkdir()
    for i in range(200):
        (home / "d" / f"f{i}").write_text("mine")
        (outside / f"f{i}").write_text("not the player's")
    (home / "swap").symlink_to(outside)
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(home / "d"), str(home / "swap"), "60"]
    )
    try:
        for i in range(40):
            chown_tree(home, 4242 + i % 2, 4242 + i % 2)
    finally:
        swapper.kill()
        swapper.wait()
    assert {p.stat().st_uid for p in outside.iterdir()} | {outside.stat().st_uid} == {0}


def test_trust_runs_from_setup_roots_only_to_gui_apps_and_stops_at_a_shell():
    """A setup root is trusted by pid; below it only allowlisted desktop GUI apps (and forks of
    it that did not exec): an installed program that is none (`sleep`, as `socat` would be)
    is not, a shell is not, and neither is the program that shell started."""
    from osworld_gym.guest.judging import trusted_pids
    from osworld_gym.guest.processes import descendants

    root = subprocess.Popen(
        ["sh", "-c", "sleep 101 & bash -c 'sleep 102; true' & wait"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 10
        while len(kids := descendants(root.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        by_cmd = {open(f"/proc/{p.pid}/cmdline", "rb").read(): p.pid for p in kids}
        trusted = trusted_pids(set(), {root.pid})
        assert trusted == {root.pid}, by_cmd
        assert trusted_pids(set(), set()) == set()
    finally:
        os.killpg(root.pid, 9)
        root.wait()


V2 = "/sys/fs/cgroup/unified"


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.isfile(f"{V2}/cgroup.procs"),
    reason="needs root and a cgroup v2 hierarchy (hybrid: /sys/fs/cgroup/unified)",
)
def test_the_v2_freezer_holds_a_writer_and_keeps_a_trusted_process_running(tmp_path):
    """The cgroup v2 path of the hold (pure-v2 hosts; exercised here on the hybrid hierarchy):
    an untrusted writer stops changing its file while held and resumes after; a trusted one
    keeps writing throughout."""
    from osworld_gym.guest.judging import Freezer, trusted_pids

    base = Path(V2) / f"osworld-gym-test-{os.getpid()}"
    (base / "held").mkdir(parents=True)
    # no child processes: a setup root's children that are no desktop GUI app (`date`) are
    # held too
    loop = "import time\nwhile True: open({!r}, 'a').write('.'); time.sleep(0.005)"
    procs = [
        subprocess.Popen(
            [
                "sh",
                "-c",
                f"echo $$ > {base}/cgroup.procs && exec "
                f'{sys.executable} -c "{loop.format(str(tmp_path / name))}"',
            ]
        )
        for name in ("held", "kept")
    ]
    try:
        while any(not (tmp_path / n).exists() for n in ("held", "kept")):
            time.sleep(0.01)
        freezer = Freezer(base, 2)
        # the kept loop is a setup root: it stays; the other one is held
        with freezer.hold(lambda: trusted_pids(set(), {procs[1].pid})) as n:
            assert n >= 1
            a = [(tmp_path / n).stat().st_size for n in ("held", "kept")]
            time.sleep(0.3)
            b = [(tmp_path / n).stat().st_size for n in ("held", "kept")]
            assert a[0] == b[0] and a[1] < b[1]
        time.sleep(0.3)
        assert (tmp_path / "held").stat().st_size > b[0]  # thawed
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for d in (base / "held", base):
            while d.exists():
                try:
                    d.rmdir()
                except OSError:
                    time.sleep(0.01)


def test_sweep_removes_only_desktops_whose_owner_is_gone(tmp_path):
    """Every local desktop sweeps the state dirs of dead owners as it starts, while other
    desktops start beside it. A dir without an owner record, or with one still being written
    (empty), belongs to a desktop between ``mkdtemp`` and :func:`write_owner`: it stays (an
    8-desktop benchmark lost a desktop's home to a sweep that read an empty record as a dead
    owner). A dir whose recorded owner has exited is removed; the live owner's stays."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    dirs = {
        name: tmp_path / f"osworld-gym-{name}" for name in ("norecord", "empty", "dead", "live")
    }
    for d in dirs.values():
        (d / "home").mkdir(parents=True)
    (dirs["empty"] / limits.OWNER_FILE).write_text("")
    (dirs["dead"] / limits.OWNER_FILE).write_text(f"{dead.pid} 12345")
    limits.write_owner(dirs["live"])
    assert limits.sweep_stale(tmp_path) == 1
    assert {d.name for d in tmp_path.iterdir()} == {
        f"osworld-gym-{n}" for n in ("norecord", "empty", "live")
    }
    # the record is published whole: nothing but it is left in the dir
    assert {p.name for p in dirs["live"].iterdir()} == {"home", limits.OWNER_FILE}
    pid, start = (dirs["live"] / limits.OWNER_FILE).read_text().split()
    assert int(pid) == os.getpid() and start == limits._start_time(os.getpid())
