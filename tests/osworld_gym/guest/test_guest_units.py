"""Guest parts that need no X server: HTTP layer, forms, home/tmp handling, process
supervision, key tables and the client's error handling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import httpx
import pytest
from osworld_gym.client import GuestClient
from osworld_gym.errors import GuestError
from osworld_gym.guest import homedir
from osworld_gym.guest.multipart import FormError, parse_form
from osworld_gym.guest.server import (
    HTTPError,
    Request,
    Response,
    Router,
    json_response,
    make_server,
)
from osworld_gym.guest.windows import Window, matches, parse_wmctrl
from osworld_gym.protocol.input import char_keysym, key_keysym
from osworld_gym.protocol.keys import X_KEYSYM

TOKEN = "unit-token"


# ---- HTTP layer ---------------------------------------------------------------------------------
@pytest.fixture
def http(tmp_path):
    """A guest HTTP server with toy routes on a unix socket; yields an authorised client."""
    router = Router(TOKEN)

    def echo(req: Request) -> Response:
        body = req.json()
        return json_response({"got": body, "query": req.query})

    def boom(req: Request) -> Response:
        raise RuntimeError("handler bug")

    def teapot(req: Request) -> Response:
        raise HTTPError(418, "short and stout")

    def form(req: Request) -> Response:
        f = req.form()
        return json_response({k: len(v.data) for k, v in f.items()})

    router.add("POST", "/echo", echo)
    router.add("GET", "/boom", boom)
    router.add("GET", "/teapot", teapot)
    router.add("POST", "/form", form)
    sock = tmp_path / "s.sock"
    server = make_server(router, uds=str(sock))
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    client = httpx.Client(
        transport=httpx.HTTPTransport(uds=str(sock)),
        base_url="http://g",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    yield client, sock
    client.close()
    server.shutdown()
    server.server_close()


def test_socket_is_private_to_its_owner(http):
    _, sock = http
    assert sock.stat().st_mode & 0o777 == 0o600


def test_routes_answer_json_and_errors_are_json(http):
    c, _ = http
    assert c.post("/echo?a=1", json={"x": [1, "é"]}).json() == {
        "got": {"x": [1, "é"]},
        "query": {"a": "1"},
    }
    for method, path, kwargs, status in [
        ("GET", "/nowhere", {}, 404),
        ("GET", "/echo", {}, 405),
        ("POST", "/echo", {"content": b"{oops"}, 400),
        ("GET", "/boom", {}, 500),
        ("GET", "/teapot", {}, 418),
    ]:
        r = c.request(method, path, **kwargs)
        assert r.status_code == status
        assert r.json()["status"] == "error" and r.json()["message"]
    assert "handler bug" in c.get("/boom").json()["message"]
    assert c.post("/echo", json={}).status_code == 200  # still alive after a 500


def test_auth_accepts_bearer_or_osworld_header_only_with_the_right_token(http):
    _, sock = http
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://g") as raw:
        assert raw.post("/echo", json={}).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert raw.post("/echo", json={}, headers=wrong).status_code == 401
        assert raw.post("/echo", json={}, headers={"X-OSWorld-Token": TOKEN}).status_code == 200
        lower = {"authorization": f"bearer {TOKEN}"}
        assert raw.post("/echo", json={}, headers=lower).status_code == 200
        # A rejected request with a body must not poison the next request on the connection.
        assert raw.post("/echo", content=b"x" * 100_000).status_code == 401
        assert raw.post("/echo", json={}, headers={"X-OSWorld-Token": TOKEN}).status_code == 200


def test_chunked_bodies_and_multipart_uploads_arrive_intact(http):
    c, _ = http
    chunks = iter([b'{"a": ', b'"chunked"}'])
    assert c.post("/echo", content=chunks).json()["got"] == {"a": "chunked"}
    blob = os.urandom(300_000) + b"\r\n--\r\n"
    r = c.post("/form", data={"file_path": "/x/y"}, files={"file_data": ("f", blob)})
    assert r.json() == {"file_path": 4, "file_data": len(blob)}


def test_only_loopback_tcp_is_allowed(tmp_path):
    router = Router(TOKEN)
    with pytest.raises(ValueError, match="loopback"):
        make_server(router, host="0.0.0.0", port=0)
    server = make_server(router, host="127.0.0.1", port=0)
    assert server.server_address[0] == "127.0.0.1"
    server.server_close()
    plain = tmp_path / "plain"
    plain.write_text("not a socket")
    with pytest.raises(ValueError, match="not a socket"):
        make_server(router, uds=str(plain))


# ---- forms ------------------------------------------------------------------------------------
def test_multipart_rejects_malformed_bodies():
    for ctype, body in [
        ("multipart/form-data", b"--x\r\n"),
        ("multipart/form-data; boundary=x", b"no boundary here"),
        (
            "multipart/form-data; boundary=x",
            b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\nunterminated',
        ),
        ("text/plain", b"hello"),
    ]:
        with pytest.raises(FormError):
            parse_form(ctype, body)


# ---- windows and keys ---------------------------------------------------------------------------
def test_wmctrl_listing_and_matching_follow_wmctrl():
    wins = parse_wmctrl(
        "0x01  0 mousepad.Mousepad  host notes.txt - Mousepad\n0x02 -1 N/A  host \nbad line\n"
    )
    assert wins[0] == Window("0x01", 0, "mousepad.Mousepad", "notes.txt - Mousepad")
    assert wins[1].title == "" and len(wins) == 2
    assert matches(wins[0], "NOTES", strict=False, by_class=False)
    assert not matches(wins[0], "notes.txt", strict=True, by_class=False)
    assert matches(wins[0], "mousepad.Mousepad", strict=True, by_class=True)


def test_every_key_name_has_an_x_keysym():
    for name in X_KEYSYM:
        assert key_keysym(name) > 0, name
    assert char_keysym("\t") == key_keysym("tab")
    assert char_keysym("✓") == 0x1002713


# ---- home and tmp -------------------------------------------------------------------------------
def test_home_is_populated_restored_in_place_and_never_wiped_when_foreign(tmp_path):
    home = tmp_path / "home"
    assert homedir.prepare_home(home, homedir.SKEL)
    assert (home / ".config" / "openbox" / "rc.xml").is_file()
    assert all((home / d).is_dir() for d in ("Desktop", "Documents", "Downloads"))
    inode = home.stat().st_ino
    (home / "Desktop" / "junk").write_text("x")
    (home / ".config" / "openbox" / "rc.xml").unlink()
    keep = home / "run" / "guest.sock"
    keep.parent.mkdir()
    keep.write_text("server file")
    homedir.restore_home(home, homedir.SKEL, protect=[keep])
    assert home.stat().st_ino == inode
    assert not (home / "Desktop" / "junk").exists()
    assert (home / ".config" / "openbox" / "rc.xml").is_file()
    assert keep.read_text() == "server file"

    foreign = tmp_path / "someone"
    foreign.mkdir()
    (foreign / "precious").write_text("do not delete")
    assert not homedir.prepare_home(foreign, homedir.SKEL)
    with pytest.raises(homedir.HomeError, match="refusing"):
        homedir.restore_home(foreign, homedir.SKEL)
    assert (foreign / "precious").exists()


def test_tmp_clean_keeps_x11_sockets_and_protected_paths(tmp_path):
    for name in (".X11-unix/X5", ".X5-lock", "junk/deep/file", "state/bus", "loose"):
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    homedir.clean_tmp(tmp_path, protect=[tmp_path / "state"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [".X11-unix", ".X5-lock", "state"]
    assert (tmp_path / "state" / "bus").exists()


# ---- process supervision (in a child interpreter, never on pytest's own tree) ------------------
def _in_child(code: str) -> dict:
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_subreaper_adopts_orphans_and_kill_tree_leaves_nothing():
    out = _in_child("""
        import json, os, time
        from osworld_gym.guest.processes import ProcessRegistry, become_subreaper, descendants
        assert become_subreaper()
        reg = ProcessRegistry()
        reg.start_reaper(interval=0.1)
        reg.run(["sh", "-c", "sleep 100 >/dev/null 2>&1 & sleep 101 >/dev/null 2>&1 &"], timeout=5)
        keep = reg.popen(["sleep", "102"])
        time.sleep(0.2)
        adopted = sorted(p.comm for p in descendants(os.getpid()) if p.ppid == os.getpid())
        t0 = time.perf_counter()
        killed = reg.kill_tree(keep={keep.pid})
        ms = (time.perf_counter() - t0) * 1000
        time.sleep(0.3)
        left = [(p.comm, p.state) for p in descendants(os.getpid())]
        reg.terminate(keep)
        reg.stop_reaper()
        print(json.dumps({"adopted": adopted, "killed": killed, "left": left, "ms": ms,
                          "after": [p.comm for p in descendants(os.getpid())]}))
    """)
    assert out["adopted"] == ["sleep", "sleep", "sleep"]
    assert out["killed"] == 2
    assert out["left"] == [["sleep", "S"]]  # only the kept one
    assert out["after"] == []


def test_exit_statuses_are_never_stolen_by_the_reaper():
    out = _in_child("""
        import json, threading
        from osworld_gym.guest.processes import ProcessRegistry, become_subreaper
        become_subreaper()
        reg = ProcessRegistry()
        reg.start_reaper(interval=0.001)
        codes = []
        def work(i):
            codes.append(reg.run(["sh", "-c", f"(sleep 0.01 &) ; exit {i % 7 + 1}"], timeout=10)
                         .returncode - (i % 7 + 1))
        ts = [threading.Thread(target=work, args=(i,)) for i in range(40)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        reg.stop_reaper()
        print(json.dumps({"codes": codes}))
    """)
    assert out["codes"] == [0] * 40


def test_run_kills_the_whole_group_on_timeout():
    out = _in_child("""
        import json, subprocess, time
        from osworld_gym.guest.processes import ProcessRegistry, descendants
        import os
        reg = ProcessRegistry()
        t0 = time.monotonic()
        try:
            reg.run(["sh", "-c", "sleep 50 & sleep 51"], timeout=0.3)
            raised = False
        except subprocess.TimeoutExpired:
            raised = True
        time.sleep(0.2)
        reg.reap()
        print(json.dumps({"raised": raised, "s": time.monotonic() - t0,
                          "left": [p.comm for p in descendants(os.getpid())]}))
    """)
    assert out["raised"] and out["s"] < 5 and out["left"] == []


def test_run_streams_output_and_kills_a_command_printing_over_the_cap():
    """``cat`` of a huge file: both streams are read as they come and kept up to the cap; the
    command is killed (group and all) at the cap, never buffered whole. Input still flows in
    (the accessibility helper's script comes on stdin)."""
    out = _in_child("""
        import json, os, resource
        from osworld_gym.guest.processes import OutputTooLarge, ProcessRegistry, descendants
        reg = ProcessRegistry()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            reg.run(["sh", "-c", "head -c 64M /dev/zero >&2 & head -c 512M /dev/zero; wait"],
                    timeout=60, max_output=1 << 20)
            raised = None
        except OutputTooLarge as e:
            raised = e.stream
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        reg.reap()
        ok = reg.run(["sh", "-c", "cat; echo done >&2"], timeout=10, input=b"x" * 300000,
                     max_output=1 << 20)
        print(json.dumps({"raised": raised, "grew_kib": grew, "left": len(descendants(os.getpid())),
                          "echo": len(ok.stdout), "err": ok.stderr.decode()}))
    """)
    assert out["raised"] in ("stdout", "stderr"), out
    assert out["grew_kib"] < 32 * 1024 and out["left"] == 0, out
    assert out["echo"] == 300000 and out["err"] == "done\n", out


def test_crashes_of_apps_and_orphans_are_counted_but_not_our_kills_or_clean_exits():
    out = _in_child("""
        import json, os, signal, time
        from osworld_gym.guest.processes import ProcessRegistry, become_subreaper
        assert become_subreaper()
        reg = ProcessRegistry()
        reg.start_reaper(interval=0.05)
        def settle():
            time.sleep(0.4); reg.reap()
        seen = {}
        reg.popen(["sh", "-c", "exit 0"], app=True); settle()
        reg.popen(["sh", "-c", "exit 3"], app=True); settle()
        reg.popen(["sh", "-c", "kill -TERM $$"], app=True); settle()
        seen["clean"] = reg.crash_count
        reg.popen(["sh", "-c", "kill -SEGV $$"], app=True); settle()
        seen["segv"] = reg.crash_count
        # a launcher that reports its child's SIGKILL as 137 (what LibreOffice's soffice does)
        reg.popen(["sh", "-c", "sleep 30 & c=$!; kill -KILL $c; wait $c"], app=True); settle()
        seen["launcher"] = reg.crash_count
        # not an app: a helper's own exit 137 means nothing
        reg.popen(["sh", "-c", "exit 137"]); settle()
        seen["helper"] = reg.crash_count
        # an adopted orphan killed from outside
        reg.run(["sh", "-c", "sleep 30 >/dev/null 2>&1 &"], timeout=5)
        time.sleep(0.1)
        orphan = [p for p in os.listdir("/proc") if p.isdigit()
                  and open(f"/proc/{p}/stat").read().split()[3] == str(os.getpid())
                  and "(sleep)" in open(f"/proc/{p}/stat").read()]
        os.kill(int(orphan[0]), signal.SIGKILL); settle()
        seen["orphan"] = reg.crash_count
        # what the registry kills itself is never a crash
        victim = reg.popen(["sleep", "30"], app=True)
        reg.terminate(victim)
        reg.popen(["sh", "-c", "trap '' TERM; sleep 30"], app=True)
        reg.run(["sh", "-c", "sleep 31 >/dev/null 2>&1 &"], timeout=5)
        time.sleep(0.1)
        reg.kill_tree(grace=0.1); settle()
        seen["ours"] = reg.crash_count
        seen["names"] = [(c.name, c.signal) for c in reg.crashes]
        reg.stop_reaper()
        print(json.dumps(seen))
    """)
    assert out["clean"] == 0
    assert out["segv"] == 1
    assert out["launcher"] == 2
    assert out["helper"] == 2
    assert out["orphan"] == 3
    assert out["ours"] == 3
    assert out["names"] == [["sh", "SIGSEGV"], ["sh", "SIGKILL"], ["sleep", "SIGKILL"]]


def test_a_crash_still_dying_is_waited_for_not_missed():
    # The main thread leaves first (pthread_exit), another thread dies of SIGSEGV 0.5 s later:
    # meanwhile the process is a zombie that waitpid cannot collect, the state in which a
    # multi-threaded app spends 15-30 ms after a crash signal.
    out = _in_child("""
        import json, os, sys, time
        from osworld_gym.guest.processes import ProcessRegistry, read_proc
        reg = ProcessRegistry()
        app = reg.popen([sys.executable, "-c", (
            "import ctypes, os, signal, threading, time\\n"
            "def later():\\n"
            "    time.sleep(0.5)\\n"
            "    os.kill(os.getpid(), signal.SIGSEGV)\\n"
            "threading.Thread(target=later).start()\\n"
            "ctypes.CDLL(None).pthread_exit(None)\\n")], app=True)
        deadline = time.monotonic() + 5
        while read_proc(app.pid).state != "Z" and time.monotonic() < deadline:
            time.sleep(0.005)
        seen = {"state": read_proc(app.pid).state}
        reg.reap()
        seen["plain"] = reg.crash_count
        t0 = time.monotonic()
        reg.reap_dying()
        seen["waited"] = reg.crash_count
        seen["s"] = time.monotonic() - t0
        seen["names"] = [(c.name, c.signal) for c in reg.crashes]
        t0 = time.monotonic()
        reg.reap_dying()  # nothing dying: no wait
        seen["idle_s"] = time.monotonic() - t0
        print(json.dumps(seen))
    """)
    assert out["state"] == "Z" and out["plain"] == 0  # a plain reap cannot see it yet
    assert out["waited"] == 1 and out["names"] == [[os.path.basename(sys.executable), "SIGSEGV"]]
    assert out["s"] < 5 and out["idle_s"] < 0.5


def test_crash_signal_reads_signal_deaths_and_launcher_codes():
    from osworld_gym.guest.processes import crash_signal

    assert crash_signal(-11, launcher=False).name == "SIGSEGV"
    assert crash_signal(-15, launcher=True) is None  # asked to quit
    assert crash_signal(137, launcher=True).name == "SIGKILL"
    assert crash_signal(137, launcher=False) is None
    assert crash_signal(143, launcher=True) is None
    assert crash_signal(0, launcher=True) is None and crash_signal(None, launcher=True) is None


def test_opener_resolves_the_default_app_like_xdg_open(tmp_path):
    from osworld_gym.guest import opener

    apps = tmp_path / "share" / "applications"
    (apps / "vendor").mkdir(parents=True)
    (apps / "vendor" / "viewer.desktop").write_text(
        "[Desktop Entry]\nName=Viewer\nExec=sh -c 'echo \"$0\"' --flag=100%% %U %i\n"
        "[Desktop Action New]\nExec=sh --new\n"
    )
    (apps / "broken.desktop").write_text("[Desktop Entry]\nName=Broken\n")
    (apps / "missing.desktop").write_text("[Desktop Entry]\nExec=no-such-program-xyz %f\n")
    env = {
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "share"),
        "XDG_DATA_DIRS": "",
        "PATH": os.environ["PATH"],
    }
    found = opener.find_desktop_file("vendor-viewer.desktop", env)
    assert found == apps / "vendor" / "viewer.desktop"
    assert opener.exec_argv(found, "/home/user/a b.txt") == [
        "sh",
        "-c",
        'echo "$0"',
        "--flag=100%",
        "/home/user/a b.txt",
    ]
    assert opener.exec_argv(apps / "broken.desktop", "x") is None
    assert opener.exec_argv(apps / "missing.desktop", "x") is None
    assert opener.find_desktop_file("nope.desktop", env) is None


# ---- client errors ------------------------------------------------------------------------------
def test_client_reports_unreachable_guests_as_guest_errors(tmp_path):
    with GuestClient(uds=str(tmp_path / "missing.sock"), token="t", retries=1) as c:
        with pytest.raises(GuestError) as e:
            c.health()
        assert e.value.endpoint == "/osworld_gym/health" and "connect" in str(e.value)
        t0 = time.monotonic()
        with pytest.raises(GuestError, match="not ready after"):
            c.wait_ready(timeout=0.5)
        assert time.monotonic() - t0 < 3
    with pytest.raises(ValueError):
        GuestClient(token="t")
