"""Red team: what the agent can do from inside its desktop must not reach the judge or the host.

Every attack runs as the *player* (uid 1000 in the sandbox), either through the desktop's own
terminal (as an agent would type it) or through ``/setup/execute``, which runs commands as the
player identity (the same uid, no capabilities, the player's cgroup). Never as the judge.
Each of these succeeded before the judge/player separation (see issue 17).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import gymnasium as gym
import osworld_gym
import pytest
from osworld_gym.providers.local import LocalProvider
from redteam import fork_bomb, player

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="judge separation needs a root host (CI runs as root)"
)

PACKAGE_DIR = Path(osworld_gym.__file__).resolve().parent
TASK_JSON = PACKAGE_DIR / "tasks" / "builtin" / "examples" / "os" / "os-mkdir-001.json"
TASK_CACHE = Path.home() / ".cache" / "osworld-gym"


@pytest.fixture(scope="module")
def env():
    e = gym.make("OSWorld-v0", provider="local", tasks="builtin", screen_size=(1024, 768))
    e.reset(options={"task": "os-mkdir-001"})
    try:
        yield e
    finally:
        e.close()


def agent_starts(env, argv: list[str]) -> None:
    """Start ``argv`` in the background from the desktop user's shell, detached (``setsid``),
    as an agent would from its terminal (``/setup/launch`` is the task's setup: trusted)."""
    import shlex

    out = player(env, f"setsid {shlex.join(argv)} </dev/null >/dev/null 2>&1 &")
    assert out["returncode"] == 0, out


#: Shell snippet setting $G (the guest's pid) and $X (Xvfb's pid) as the player sees them.
JUDGE_PIDS = "X=$(pgrep -x Xvfb); G=$(ps -o ppid= -p $X | tr -d ' '); "


def judge(env, command: str) -> dict:
    """Run a shell command the way an evaluator's ``vm_command_line`` does."""
    return env.unwrapped.provider.start().execute(command, shell=True)


def test_the_player_is_uid_1000_without_capabilities_and_the_judge_is_root(env):
    assert player(env, "id -u; grep CapEff /proc/self/status")["output"].split() == [
        "1000",
        "CapEff:",
        "0000000000000000",
    ]
    assert player(env, JUDGE_PIDS + "ps -o user= -p $G,$X")["output"].split() == ["root"] * 2
    # evaluation commands run as the desktop user (OSWorld's semantics), without capabilities
    assert judge(env, "id -u; grep CapEff /proc/self/status")["output"].split() == [
        "1000",
        "CapEff:",
        "0000000000000000",
    ]


def test_the_player_cannot_kill_the_guest_or_xvfb_from_its_terminal(env):
    env.reset(options={"task": "os-mkdir-001"})
    env.step("pyautogui.hotkey('ctrl', 'alt', 't')")
    time.sleep(1.5)
    env.step(
        "pyautogui.write('"
        + JUDGE_PIDS.replace("'", "\\'")
        + "kill -9 $G $X 2> ~/kill.err; echo $? > ~/kill.rc\\n')"
    )
    client = env.unwrapped.provider.start()
    deadline = time.monotonic() + 20
    while client.get_file("/home/user/kill.rc") is None and time.monotonic() < deadline:
        time.sleep(0.2)
    err = (client.get_file("/home/user/kill.err") or b"").decode()
    assert "Operation not permitted" in err, err
    assert (client.get_file("/home/user/kill.rc") or b"").strip() != b"0"
    health = client.health()
    assert health["x_alive"] and health["status"] == "ok"


@pytest.mark.parametrize("signal", ["-9", "-STOP", "-TERM"])
def test_no_signal_from_the_player_reaches_a_judge_process(env, signal):
    out = player(env, JUDGE_PIDS + f"for p in $G $X 1; do kill {signal} $p 2>&1; done")
    assert out["output"].count("Operation not permitted") == 3, out
    assert env.unwrapped.provider.start().health()["x_alive"]


def test_the_player_cannot_trace_or_inspect_the_guest(env):
    code = (
        "import ctypes, os, subprocess; libc = ctypes.CDLL(None, use_errno=True); "
        "x = int(subprocess.check_output(['pgrep', '-x', 'Xvfb'])); "
        "pid = int(open(f'/proc/{x}/stat').read().rsplit(')', 1)[1].split()[1]); "
        "print(libc.ptrace(16, pid, 0, 0), ctypes.get_errno()); "
        "print(os.access(f'/proc/{pid}/environ', os.R_OK), "
        "os.access(f'/proc/{pid}/mem', os.R_OK))"
    )
    out = player(env, f'python3 -c "{code}"')["output"].split()
    assert out == ["-1", "1", "False", "False"], out  # EPERM


def test_the_player_cannot_reach_the_judges_socket_token_or_state(env):
    out = player(
        env,
        "cat /run/osworld/token; ls /run/osworld; "
        "mv /run/osworld/guest.sock /run/osworld/real.sock; "
        "ls -d /tmp/osworld-guest-*/ && ls /tmp/osworld-guest-*/",
    )
    assert (
        out["output"].count("Permission denied") + out["error"].count("Permission denied") >= 4
    ), out
    token = (Path(env.unwrapped.provider.state_dir) / "run" / "token").read_text()
    assert token not in out["output"] + out["error"]


def test_a_socket_relay_cannot_forge_an_answer_and_the_task_scores_0(env):
    """The relay attack: put a fake guest in place of guest.sock answering /execute."""
    env.reset(options={"task": "os-mkdir-001"})
    relay = (
        "import socket, os; os.rename('/run/osworld/guest.sock', '/run/osworld/x.sock'); "
        "s = socket.socket(socket.AF_UNIX); s.bind('/run/osworld/guest.sock')"
    )
    out = player(env, f'python3 -c "{relay}"')
    assert out["returncode"] != 0 and "Permission denied" in out["error"], out
    _, reward, terminated, _, info = env.step("DONE")
    assert terminated and reward == 0.0 and info["infra_error"] is None


def test_a_usercustomize_cannot_forge_a_vm_command_line_result(env):
    """The usercustomize attack on text_editor-config-edit-001: a user site module that prints
    the expected output. Evaluation commands run as the judge with ``python3 -I`` semantics."""
    obs, _ = env.reset(options={"task": "text_editor-config-edit-001"})
    port = re.search(r"set port to (\d+)", obs["instruction"]).group(1)
    expected = (
        "database name = maple\\ndatabase pool = 5\\nserver debug = false\\n"
        f"server host = 0.0.0.0\\nserver port = {port}\\nserver timeout = 30\\n"
    )
    site = "~/.local/lib/python3.11/site-packages"
    plant = (
        f"mkdir -p {site} && printf '%s\\n' \"import os, sys\" "
        f"\"sys.stdout.write('{expected}'); sys.stdout.flush(); os._exit(0)\" "
        f"> {site}/usercustomize.py && printf 'raise SystemExit(3)\\n' > ~/configparser.py"
    )
    assert player(env, plant)["returncode"] == 0
    # the attack works on the player's own python (Debian's; task commands get a venv of
    # ours first on PATH, which has no user site anyway): it really is planted
    assert (
        f"server port = {port}"
        in player(env, "cd ~ && env -u PYTHONNOUSERSITE /usr/bin/python3 -c 'print(0)'")["output"]
    )
    _, reward, terminated, _, info = env.step("DONE")
    assert terminated and info["infra_error"] is None
    assert reward == 0.0


def test_a_player_loop_cannot_write_the_answer_into_an_evaluator_or_kill_it(env):
    """Same uid as the evaluator, so without holding the player still a background loop could
    answer for it through /proc/PID/fd/1 (or kill it). The loop is stopped while it runs."""
    env.reset(options={"task": "os-mkdir-001"})
    client = env.unwrapped.provider.start()
    loop = (
        "while :; do for p in $(pgrep -f 'Directory exists'); do "
        "[ $p != $$ ] && echo 'Directory exists.' > /proc/$p/fd/1; done 2>/dev/null; done"
    )
    client.upload("/home/user/.forge.sh", loop.encode())
    agent_starts(env, ["bash", "/home/user/.forge.sh"])
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
    _, reward, _, _, info = env.step("DONE")
    assert reward == 0.0 and info["infra_error"] is None
    # and the loop runs again afterwards: held, not killed
    assert "forge.sh" in player(env, "ps -eo stat,args | grep -v grep | grep forge.sh")["output"]


@pytest.mark.parametrize(
    "launch",
    [
        # a name of the session services a reset spares and a hold keeps running
        ["bash", "-c", "exec -a at-spi-bus-launcher bash /home/user/.forge.sh"],
        # the dynamic loader runs any program, and its own file lives under /usr
        ["/lib64/ld-linux-x86-64.so.2", "/usr/bin/bash", "/home/user/.forge.sh"],
        # a path that starts in our read-only shims but resolves to the player's script
        ["bash", "/opt/osworld-gym/shims/../../../home/user/.forge.sh"],
    ],
    ids=["renamed-argv0", "dynamic-loader", "path-into-shims"],
)
def test_a_disguised_player_loop_is_held_too_and_does_not_survive_a_reset(env, launch):
    """The hold and the reset decide by what a process executes, not by what it calls itself."""
    env.reset(options={"task": "os-mkdir-001"})
    client = env.unwrapped.provider.start()
    loop = (
        "while :; do for p in $(pgrep -f 'Directory exists'); do "
        "[ $p != $$ ] && echo 'Directory exists.' > /proc/$p/fd/1; done 2>/dev/null; done"
    )
    client.upload("/home/user/.forge.sh", loop.encode())
    agent_starts(env, launch)
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
    env.reset(options={"task": "os-mkdir-001"})
    assert (
        "forge.sh" not in player(env, "ps -eo args | grep -v grep | grep forge.sh; true")["output"]
    )


def test_judge_commands_get_a_clean_python_whatever_the_player_leaves_in_home(env):
    env.reset(options={"task": "os-mkdir-001"})
    player(
        env,
        "mkdir -p ~/.local/lib/python3.11/site-packages && "
        "echo 'print(\"FORGED\")' > ~/.local/lib/python3.11/site-packages/usercustomize.py"
        " && echo 'print(\"FORGED\")' > ~/json.py",
    )
    client = env.unwrapped.provider.start()
    for command, shell in (
        (["python3", "-c", "import json; print('clean')"], False),
        ("cd ~ && python3 -c 'import json; print(\"clean\")'", True),
    ):
        out = client.execute(command, shell=shell)
        assert out["output"] == "clean\n", (command, out)


def test_the_player_reads_no_host_secret_task_json_cache_or_checkout(env):
    paths = [
        "/etc/shadow",
        "/etc/gshadow",
        "/root",
        str(TASK_CACHE),
        str(TASK_JSON),
        str(PACKAGE_DIR),
        "/work",
        "/opt/osworld-gym/../../root",
    ]
    out = player(
        env, " ; ".join(f"cat {p} 2>&1 | head -c 200; ls {p} 2>&1 | head -3" for p in paths)
    )
    text = out["output"]
    assert not re.search(r"^root:[^:\s]*:\d*:", text, re.M), text  # a shadow line
    assert '"evaluator"' not in text and "Directory exists." not in text, text  # task JSON
    for p in ("/root", str(TASK_JSON), "/work"):
        assert f"{p}: Permission denied" in text or f"{p}: No such file" in text, (p, text)
    # neither does an evaluation command (the desktop user's), while the guest runs from there
    assert judge(env, f"test -r {TASK_JSON} || echo hidden")["output"].strip() == "hidden"
    assert env.unwrapped.provider.start().health()["status"] == "ok"


def test_a_gold_file_in_the_hosts_task_cache_cannot_be_copied_into_place(env):
    cached = (
        next((p for p in TASK_CACHE.rglob("*") if p.is_file()), None)
        if TASK_CACHE.is_dir()
        else None
    )
    target = str(cached) if cached is not None else str(TASK_CACHE / "x" / "gold-1-C.xlsx")
    out = player(env, f"cp {target} ~/Desktop/sales.xlsx; echo rc=$?")
    assert "rc=1" in out["output"], out
    assert "Permission denied" in out["error"] or "No such file" in out["error"], out


def test_the_desktop_user_maps_to_an_unprivileged_host_uid(env):
    player(env, "touch ~/Desktop/mine")
    home = Path(env.unwrapped.provider.state_dir) / "home"
    st = (home / "Desktop" / "mine").stat()
    assert st.st_uid == env.unwrapped.provider.player_host_id != 0


def test_2000_processes_are_contained_by_the_pids_limit_and_the_judge_keeps_working(env):
    env.reset(options={"task": "os-mkdir-001"})
    forked = fork_bomb(env)
    limit = env.unwrapped.provider.limits.player_pids
    assert 0 < forked < limit < 2000
    # the bomb is still alive: the judge can still run commands and score
    assert judge(env, "echo judge-ok")["output"].strip() == "judge-ok"
    _, reward, _, _, info = env.step("DONE")
    assert reward == 0.0 and info["infra_error"] is None


def test_a_3_gib_allocation_is_killed_inside_the_desktop(env):
    env.reset(options={"task": "os-mkdir-001"})
    out = player(
        env,
        "python3 -c \"x = b'x' * (3 << 30); print('allocated', len(x))\"; echo rc=$?",
        timeout=120,
    )
    assert "allocated" not in out["output"], out
    assert re.search(r"rc=(137|1)\b", out["output"]), out  # OOM-killed (or MemoryError)
    health = env.unwrapped.provider.start().health()
    assert health["status"] == "ok" and health["x_alive"]
    assert judge(env, "echo judge-ok")["output"].strip() == "judge-ok"


def test_the_home_is_size_limited(env):
    out = player(env, "fallocate -l 2G ~/big; echo rc=$?; rm -f ~/big")
    assert "rc=1" in out["output"] and "No space left" in out["error"], out


def test_limits_and_cgroups_are_gone_after_close():
    p = LocalProvider(screen_size=(640, 480))
    p.start()
    try:
        assert p.separated
        dirs = list(p._cgroup.dirs) if p._cgroup is not None else []
        home = p.state_dir / "home"
        assert any(
            line.split()[1] == str(home) for line in Path("/proc/mounts").read_text().splitlines()
        )
    finally:
        p.stop()
    assert not any(d.exists() for d in dirs)
    assert not any(
        line.split()[1] == str(home) for line in Path("/proc/mounts").read_text().splitlines()
    )


# ---- what the agent starts is frozen while the judge reads the desktop (issue 17 b) --------

#: A loop that rewrites its file as fast as it can and hops to a new pid every 20 writes (the
#: old pid exits), so no scan of pids ever sees it for long.
HOP = (
    'i=${1:-0}; while :; do i=$((i+1)); echo "hop $i" > ~/r-hop; '
    "if [ $((i % 20)) = 0 ]; then bash ~/.hop.sh $i </dev/null >/dev/null 2>&1 & exit; fi; done"
)
#: Evaluation command: the three files' state, twice, half a second apart.
STATE = "stat -c %s ~/r-dd; md5sum < ~/r-hop; md5sum < ~/r-vim"
LOOK = f'a=$({STATE}); sleep 0.5; b=$({STATE}); [ "$a" = "$b" ] && echo same || echo "$a / $b"'


def test_player_loops_started_by_setsid_fork_hopping_or_an_installed_program_are_frozen(env):
    """Each one, started from the desktop user's shell the way an agent's terminal would, keeps
    rewriting a file; during an evaluation command none of them may change it. `dd` is an
    installed program that no list of interpreters names, started with setsid (its parent
    exits at once); the hopper changes pid constantly; vim runs a shell command loop."""
    env.reset(options={"task": "os-mkdir-001"})
    client = env.unwrapped.provider.start()
    client.upload("/home/user/.hop.sh", HOP.encode())
    start = (
        "setsid sh -c 'exec dd if=/dev/zero of=$HOME/r-dd bs=1 count=100000000 "
        "status=none' </dev/null >/dev/null 2>&1 & "
        "setsid bash ~/.hop.sh </dev/null >/dev/null 2>&1 & "
        "setsid vim -es -c '!while :; do date +\\%N > ~/r-vim; done' </dev/null >/dev/null "
        "2>&1 &"
    )
    assert player(env, start)["returncode"] == 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # all three are writing
        out = player(env, "ls ~/r-hop ~/r-dd ~/r-vim 2>/dev/null | wc -l")["output"].strip()
        if out == "3":
            break
        time.sleep(0.2)
    assert out == "3", player(env, "ps -eo pid,ppid,stat,args")
    for _ in range(3):
        assert judge(env, LOOK)["output"] == "same\n"
    # held, not killed: after the evaluation they write again
    before = player(env, STATE)["output"]
    time.sleep(0.3)
    assert player(env, STATE)["output"] != before
    env.reset(options={"task": "os-mkdir-001"})


def test_the_player_cannot_reach_the_freezer_to_thaw_itself(env):
    out = player(env, "ls /run/osworld/freezer; ls /sys/fs/cgroup")
    assert "Permission denied" in out["error"] and "held" not in out["output"], out
    assert "No such file" in out["error"], out  # no cgroupfs in the sandbox at all


# ---- a forged app listener is the agent's doing (issue 17 a) --------------------------------

FORGER = """
import http.server, json
tabs = [{"type": "page", "id": str(i), "title": u, "url": "http://127.0.0.1:8000/" + u}
        for i, u in enumerate(["index.html", "staff.html", "downloads.html", "contact.html"])]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(tabs if "list" in self.path or self.path == "/json" else {}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
http.server.HTTPServer.allow_reuse_address = True
http.server.HTTPServer(("127.0.0.1", 1337), H).serve_forever()
"""


def test_a_forged_devtools_endpoint_scores_0_with_the_reason_not_1():
    """chrome-tabs-001's evaluator asks Chromium's DevTools (port 1337) for the open tabs. The
    agent kills Chromium and serves the expected tabs itself: the evaluator must not believe
    it. A fresh env (and a second provider) so the module's desktop is not disturbed."""
    e = gym.make("OSWorld-v0", provider="local", tasks="builtin", screen_size=(1024, 768))
    try:
        e.reset(options={"task": "chrome-tabs-001"})
        client = e.unwrapped.provider.start()
        client.upload("/home/user/.forger.py", FORGER.encode())
        out = client.execute(
            "pkill -9 -x chromium; pkill -9 -x chrome; sleep 1; setsid python3 ~/.forger.py "
            "</dev/null >/dev/null 2>&1 & sleep 0.5; for i in $(seq 50); do "
            "curl -sf http://127.0.0.1:1337/json/list && break; sleep 0.2; "
            "done",
            shell=True,
            setup=True,
        )
        assert "contact.html" in out["output"], out  # the forgery answers the player itself
        _, reward, terminated, _, info = e.step("DONE")
        assert terminated and info["infra_error"] is None, info
        assert reward == 0.0, info
        assert "port 1337" in info["eval_note"] and "python3" in info["eval_note"], info
    finally:
        e.close()


def test_reset_info_says_the_desktop_is_separated(env):
    _, info = env.reset(options={"task": "os-mkdir-001"})
    assert info["separated"] is True


def test_a_sigkilled_owner_leaves_no_home_mount_cgroup_or_state_dir_behind(tmp_path):
    """The owning Python process is SIGKILLed (an OOM kill, a scheduler's kill -9): nothing of
    its desktop may stay mounted or allocated, without waiting for another desktop's start."""
    import json
    import signal
    import subprocess
    import sys

    script = (
        "import json, sys, time\n"
        "from osworld_gym.providers.local import LocalProvider\n"
        f"p = LocalProvider(screen_size=(640, 480), root_dir={str(tmp_path)!r})\n"
        "p.start()\n"
        "dirs = [str(d) for d in (p._cgroup.dirs if p._cgroup else [])]\n"
        "dirs += [str(d) for d in (p._freezer.owned if p._freezer else [])]\n"
        "print(json.dumps({'state': str(p.state_dir), 'cgroups': dirs}), flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        facts = json.loads(owner.stdout.readline())
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    state, home = Path(facts["state"]), str(Path(facts["state"]) / "home")
    assert facts["cgroups"], "the desktop had cgroups"

    def left() -> list[str]:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        return (
            ([home] if home in mounts else [])
            + [d for d in facts["cgroups"] if Path(d).exists()]
            + ([str(state)] if state.exists() else [])
        )

    deadline = time.monotonic() + 60
    while left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left() == []


# ---- the judge's file work cannot be redirected by a symlink swap (issue 17 c) ---------------

SWAPPER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(os.path.expanduser(x)) for x in sys.argv[1:3])
end = time.monotonic() + 120
while time.monotonic() < end:  # RENAME_EXCHANGE: the name flips between a dir and a symlink
    libc.renameat2(-100, a, -100, b, 2)
"""


def test_a_player_flipping_a_directory_and_a_symlink_redirects_no_judge_read_or_write(env):
    """/file and /setup/upload check a path, then use it. The player flips ``~/box`` between a
    real directory and a symlink to ``/etc`` (and ``~/up`` to the judge's ``/run/osworld``) as
    fast as it can: the judge must never read ``/etc/hostname`` for ``~/box/hostname`` nor
    write an upload into ``/run/osworld``."""
    from osworld_gym.errors import GuestError, UnusableResultFile

    env.reset(options={"task": "os-mkdir-001"})
    client = env.unwrapped.provider.start()
    client.upload("/home/user/.swap.py", SWAPPER.encode())
    out = player(
        env,
        "mkdir ~/box ~/up && echo player-copy > ~/box/hostname && "
        "ln -s /etc ~/boxlink && ln -s /run/osworld ~/uplink && "
        "(setsid python3 ~/.swap.py ~/box ~/boxlink </dev/null >/dev/null 2>&1 &) && "
        "(setsid python3 ~/.swap.py ~/up ~/uplink </dev/null >/dev/null 2>&1 &)",
    )
    assert out["returncode"] == 0, out
    run_dir = Path(env.unwrapped.provider.state_dir) / "run"
    host_name = Path("/etc/hostname").read_bytes()
    seen = set()
    try:
        for i in range(150):
            try:
                seen.add(client.get_file("/home/user/box/hostname"))
            except UnusableResultFile as e:  # the swap was seen: refused, the agent's doing
                seen.add(str(e)[:20])
            try:
                client.upload(f"/home/user/up/x-{i}", b"written by the judge")
            except GuestError:
                pass
    finally:
        player(env, "pkill -f .swap.py; true")
    assert host_name not in seen and b"player-copy\n" in seen, seen
    assert not list(run_dir.glob("x-*")), sorted(p.name for p in run_dir.iterdir())
    env.reset(options={"task": "os-mkdir-001"})
