"""The general built-in tasks (os, terminal, text_editor, chrome, vlc, multi_apps) and the
generators of their web sites and media.

Generators: the same parameters give the same bytes, other parameters other bytes, and the bytes
are what they claim to be (a WAV a player can read, a VLC config, a portal server that serves its
pages and records form posts). Suite: every domain has its share of tasks, difficulties and
infeasible tasks. That every task's oracle scores 1.0 and doing nothing 0.0 on a real desktop is
checked with the whole suite in test_builtin_oracles.py.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import urllib.request
import wave
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from osworld_gym.support import builtin_tasks
from osworld_gym.tasks.assets import generate
from osworld_gym.tasks.builtin.web_media_assets import ARTICLES, STAFF
from tcp_guest import free_port

GENERAL_DOMAINS = ("os", "terminal", "text_editor", "chrome", "vlc", "multi_apps")
#: The first slice of built-in tasks; tests/osworld_gym/tasks/test_builtin_oracles.py covers them.
FIRST_SLICE = frozenset(
    {
        "os-mkdir-001",
        "os-rename-001",
        "os-delete-pattern-001",
        "os-count-lines-001",
        "os-chmod-001",
        "os-copy-001",
        "os-write-file-001",
        "os-infeasible-001",
        "text_editor-append-001",
        "text_editor-replace-001",
        "text_editor-new-file-001",
        "text_editor-delete-line-001",
    }
)
#: Minimum number of tasks per domain (first slice included).
TARGETS = {"os": 10, "terminal": 12, "text_editor": 8, "chrome": 10, "vlc": 6, "multi_apps": 8}
SEEDS = (0, 1)

# -- generators -------------------------------------------------------------------------------

#: (URL, same generator with other parameters) per generator.
GENERATOR_CASES = {
    "portal_server": (
        "builtin-asset://portal_server?code=MAPLE-1111",
        "builtin-asset://portal_server?code=MAPLE-2222",
    ),
    "portal_file": (
        "builtin-asset://portal_file?name=report.csv&quarter=Q1",
        "builtin-asset://portal_file?name=report.csv&quarter=Q2",
    ),
    "wav_tone": (
        "builtin-asset://wav_tone?freq=440&seconds=2",
        "builtin-asset://wav_tone?freq=660&seconds=2",
    ),
    "vlcrc": ("builtin-asset://vlcrc", "builtin-asset://vlcrc?one-instance=1"),
}


@pytest.mark.parametrize("name", sorted(GENERATOR_CASES))
def test_a_generator_gives_the_same_bytes_for_the_same_parameters(name):
    url, _ = GENERATOR_CASES[name]
    assert generate(url) == generate(url)


@pytest.mark.parametrize("name", sorted(GENERATOR_CASES))
def test_a_generator_gives_other_bytes_for_other_parameters(name):
    url, other = GENERATOR_CASES[name]
    assert generate(url) != generate(other)


@pytest.mark.parametrize(
    ("freq", "seconds", "rate"), [(440, 1, 8000), (523, 3, 8000), (1000, 2, 22050)]
)
def test_the_wav_tone_is_a_mono_16_bit_wav_of_the_requested_length(freq, seconds, rate):
    data = generate(f"builtin-asset://wav_tone?freq={freq}&seconds={seconds}&rate={rate}")
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, rate)
        assert w.getnframes() == seconds * rate


def test_a_bad_wav_request_is_rejected_with_the_generator_named():
    from osworld_gym.errors import SetupError

    with pytest.raises(SetupError, match="wav_tone"):
        generate("builtin-asset://wav_tone?freq=9000&rate=8000")


def test_vlcrc_turns_off_the_privacy_dialog_and_turns_on_the_http_interface():
    lines = generate("builtin-asset://vlcrc?snapshot-format=jpg").decode().splitlines()
    wanted = ("qt-privacy-ask=0", "extraintf=http", "http-password=password", "snapshot-format=jpg")
    for option in wanted:
        assert option in lines
    assert "one-instance=1" not in lines


def test_the_portal_downloads_hold_the_report_and_a_zip_of_three_files():
    report = generate("builtin-asset://portal_file?name=report.csv&quarter=Q4").decode()
    assert report.splitlines()[1] == "North,Q4,1200"
    archive = generate("builtin-asset://portal_file?name=photos.zip")
    names = zipfile.ZipFile(io.BytesIO(archive)).namelist()
    assert sorted(names) == ["photos/beach.txt", "photos/city.txt", "photos/mountain.txt"]


@pytest.fixture
def portal(tmp_path):
    """The generated portal server running on this machine: (base URL, its process)."""
    script = tmp_path / "portal.py"
    script.write_bytes(generate("builtin-asset://portal_server?code=MAPLE-4242"))
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(script), str(port)])
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/index.html", timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def get(url: str) -> tuple[int, str, dict]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read().decode(), dict(r.headers)


def test_the_portal_serves_its_pages_search_and_downloads(portal):
    base, _ = portal
    assert "MAPLE-4242" in get(base + "/voucher.html")[1]
    staff = get(base + "/staff.html")[1]
    assert all(name in staff for name, *_ in STAFF)
    assert ARTICLES["summer-party"][0] in get(base + "/news/index.html")[1]
    assert "/news/summer-party.html" in get(base + "/search?q=party")[1]
    _, body, headers = get(base + "/files/report.csv")
    assert body.startswith("region,quarter,revenue")
    assert "attachment" in headers["Content-Disposition"]
    assert "GET /search?q=party" in get(base + "/__judge/requests")[1]


def test_the_portal_records_each_form_post_as_a_json_line(portal):
    base, _ = portal
    form = b"name=Rosa+Diaz&email=rosa%40example.org&department=Support&newsletter=yes"
    with urllib.request.urlopen(base + "/submit", data=form, timeout=5) as r:
        assert "Thank you Rosa Diaz" in r.read().decode()
    posted = json.loads(get(base + "/__judge/submissions")[1].splitlines()[-1])
    assert posted["fields"] == {
        "name": "Rosa Diaz",
        "email": "rosa@example.org",
        "department": "Support",
        "newsletter": "yes",
    }


# -- the suite --------------------------------------------------------------------------------

SUITE = builtin_tasks(list(GENERAL_DOMAINS))
NEW = [t for t in SUITE if t.id not in FIRST_SLICE]


def test_every_domain_reaches_its_task_count_and_every_task_has_an_oracle():
    counts = Counter(t.domain for t in SUITE)
    assert all(counts[d] >= n for d, n in TARGETS.items()), counts
    assert all(t.oracle for t in SUITE)


def test_new_tasks_spread_over_difficulties_and_include_infeasible_ones():
    difficulties = Counter(t.raw.get("difficulty") for t in NEW)
    assert set(difficulties) == {"easy", "medium", "hard"}
    assert min(difficulties.values()) >= len(NEW) // 5, difficulties
    infeasible = [t for t in NEW if t.is_infeasible]
    assert len(infeasible) >= 6 and len({t.domain for t in infeasible}) >= 5
    assert all(t.oracle == ["FAIL"] for t in infeasible)


def test_tasks_with_variables_give_distinct_instances():
    varied = [t for t in NEW if t.variables]
    assert len(varied) >= len(NEW) // 3
    for task in varied:
        instances = {json.dumps(task.instantiate(s).to_dict(), sort_keys=True) for s in range(8)}
        assert len(instances) > 1, task.id


def test_oracles_fit_in_the_default_step_budget():
    over = [t.id for t in NEW if len(t.oracle) >= 15]
    assert not over, over


#: The desktop's Python (the venv's may sit below a directory another uid cannot enter)
SYSTEM_PYTHON = "/usr/bin/python3"
#: Run as root, the processes below run as nobody (dropped before exec, so they stay dumpable).
AS_NOBODY: dict = {"user": 65534, "group": 65534, "extra_groups": []} if os.getuid() == 0 else {}
_ATTACH = (
    "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
    "print(libc.ptrace(16, int(sys.argv[1]), 0, 0))"  # PTRACE_ATTACH
)


def _attach(pid: int) -> int:
    probe = subprocess.run(
        [SYSTEM_PYTHON, "-c", _ATTACH, str(pid)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
        **AS_NOBODY,
    )
    return int(probe.stdout.split()[0])


def test_the_portals_record_is_in_its_memory_which_its_own_uid_cannot_trace(tmp_path):
    """Evidence only the server writes: no log file (the agent wrote ~/.cache/portal/... and
    scored 1 without a browser), a record in memory served on ``/__judge/``, and a server
    that is non-dumpable, so a process of its own uid (the player's) can neither ptrace it
    nor read its memory -- while it can trace an ordinary process of that uid."""
    source = generate("builtin-asset://portal_server")
    port = free_port()
    run = "import sys; exec(compile(sys.stdin.read(), 'portal.py', 'exec'))"
    server = subprocess.Popen(
        [SYSTEM_PYTHON, "-c", run, str(port)], stdin=subprocess.PIPE, cwd="/", **AS_NOBODY
    )
    assert server.stdin is not None
    server.stdin.write(source)
    server.stdin.close()
    plain = subprocess.Popen([SYSTEM_PYTHON, "-c", "import time; time.sleep(60)"], **AS_NOBODY)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/index.html", timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        get(base + "/search?q=party")
        record = get(base + "/__judge/requests")[1]
        assert "GET /search?q=party" in record and "/__judge/" not in record
        assert list(tmp_path.iterdir()) == []  # no log file
        assert _attach(plain.pid) == 0  # the same uid may trace an ordinary process
        assert _attach(server.pid) == -1  # but not the portal
        assert Path(f"/proc/{server.pid}/mem").stat().st_uid == 0  # non-dumpable: root's
    finally:
        for proc in (server, plain):
            proc.kill()
            proc.wait(timeout=10)
