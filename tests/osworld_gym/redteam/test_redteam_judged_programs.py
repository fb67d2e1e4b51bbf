"""Red team, the programs judged commands run: none may read the agent's configuration.

A judged command runs as the desktop user, so ``file`` would read the agent's ``~/.magic`` (a
text file became "PNG image data, 320 x 240" and multi_apps-snapshot-desktop-001 scored 1),
``curl`` its ``~/.curlrc``, a shell its ``BASH_ENV``. The programs come from the tasks
(:func:`osworld_gym.support.judged_programs.judged_programs`, as ``doctor`` reads them); each
has an audit entry, and each is run here for real, with a home the agent prepared: first as the
agent's own terminal would run it (the attack works), then with the judge's environment
(:func:`~osworld_gym.guest.judging.judged_env`: it does not). Variables listed for a program are
ones a judged command never gets (the guest builds its environment); the test shows that even a
bug letting one through would be cut off.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from osworld_examples import OFFICIAL, PRESENT
from osworld_gym.guest.judging import JUDGE_ENV, JUDGED_VARIABLES, judged_env
from osworld_gym.support import builtin_tasks
from osworld_gym.support.judged_programs import AUDIT, GETTER_PROGRAMS, unaudited
from repo_paths import ROOT

SYSTEM_PYTHON = "/usr/bin/python3"
USER_SITE = ".local/lib/python{}.{}/site-packages"

#: program -> (files the agent leaves in its home, variables if any ever reached the command,
#: the command, what the attack makes it print)
ATTACKS: dict[str, tuple[dict[str, str], dict[str, str], list[str], str]] = {
    "file": (
        {".magic": "0 string Hello PNG image data, 320 x 240\n", "a.txt": "Hello world\n"},
        {},
        ["file", "{home}/a.txt"],
        "PNG image data",
    ),
    "curl": (
        {".curlrc": 'write-out = "FORGED\\n"\noutput = "/dev/null"\n'},
        {},
        ["curl", "-s", "http://127.0.0.1:9/"],
        "FORGED",
    ),
    "bash": (
        {".bashrc": "echo FORGED\n"},
        {"BASH_ENV": "{home}/.bashrc"},
        ["bash", "-c", "echo ok"],
        "FORGED",
    ),
    "git": (
        {".gitconfig": "[core]\n\tfsmonitor = FORGED\n"},
        {},
        ["git", "config", "core.fsmonitor"],
        "FORGED",
    ),
    "python3": (
        {USER_SITE + "/usercustomize.py": "print('FORGED')\n"},
        {},
        [SYSTEM_PYTHON, "-c", "print('ok')"],
        "FORGED",
    ),
    "ls": ({"a.txt": "x"}, {"TIME_STYLE": "+FORGED"}, ["ls", "-l", "{home}/a.txt"], "FORGED"),
    "stat": ({"a.txt": "x"}, {"TZ": "XXX-5"}, ["stat", "-c", "%y", "{home}/a.txt"], "+0500"),
    "tar": (
        {"a.txt": "x"},
        {"TAR_OPTIONS": "--totals"},
        ["tar", "-cf", "/dev/null", "{home}/a.txt"],
        "Total bytes",
    ),
    "gzip": ({"a.txt": "x"}, {"GZIP": "-v"}, ["gzip", "-c", "{home}/a.txt"], "GZIP"),
    "grep": (
        {"a.txt": "hello\n"},
        {"GREP_COLOR": "1"},
        ["grep", "--color=always", "hello", "{home}/a.txt"],
        "GREP_COLOR",
    ),
    "which": (
        {"bin/cat": "#!/bin/sh\necho FORGED\n"},
        {"PATH": "{home}/bin:/usr/bin:/bin"},
        ["which", "cat"],
        "/bin/cat",  # the agent's ~/bin/cat: "{home}/bin/cat" ends the same way, see below
    ),
    "timeout": (
        {"bin/cat": "#!/bin/sh\necho FORGED\n"},
        {"PATH": "{home}/bin:/usr/bin:/bin"},
        ["timeout", "5", "cat", "/dev/null"],
        "FORGED",
    ),
    "pactl": (
        {".config/pulse/client.conf": "default-server = unix:/nonexistent/FORGED\n"},
        {},
        ["pactl", "info"],
        "FORGED",
    ),
}


def _home(tmp_path: Path, files: dict[str, str]) -> Path:
    home = tmp_path / "home"
    version = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name, text in files.items():
        path = home / name.format(*version)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if name.startswith("bin/"):
            path.chmod(0o755)
    home.mkdir(exist_ok=True)
    return home


def _run(argv: list[str], env: dict[str, str]) -> str:
    res = subprocess.run(argv, env=env, capture_output=True, timeout=60, cwd="/")
    return (res.stdout + res.stderr).decode("utf-8", "replace")


def _tasks() -> list[dict]:
    tasks = [t.instantiate(None).raw for t in builtin_tasks()]
    if PRESENT:
        index = json.loads((OFFICIAL / "test_all.json").read_text())
        for domain, ids in index.items():
            tasks += [
                json.loads((OFFICIAL / "examples" / domain / f"{i}.json").read_text()) for i in ids
            ]
    return tasks


def test_every_program_a_judged_command_runs_is_audited():
    """Derived from the tasks: a task that starts judging with a new program fails here until
    the program's configuration is audited (and defused or listed in the threat model)."""
    assert unaudited(_tasks()) == {}
    assert set(GETTER_PROGRAMS) <= set(AUDIT)


@pytest.mark.parametrize("program", sorted(AUDIT))
def test_a_judged_program_reads_none_of_the_agents_configuration(program, tmp_path):
    audit = AUDIT[program]
    if program not in ATTACKS:
        # no file of the agent's to read: every variable the audit names is dropped, or is
        # one the guest sets itself; "state"/"not covered" entries are in the threat model
        named = set(re.findall(r"\b[A-Z][A-Z0-9_]{2,}\b", audit.reads)) - {"PATH"}
        env = judged_env({name: "x" for name in named} | {"HOME": "/home/user"})
        leaked = {n for n in named if n in env and n not in JUDGE_ENV}
        assert leaked <= JUDGED_VARIABLES, leaked
        if audit.how == "not covered":
            text = (ROOT / "docs" / "threat-model.md").read_text()
            assert f"`{program}`" in text, f"{program} is not covered: say so in the threat model"
        return
    files, extra, argv, marker = ATTACKS[program]
    if shutil.which(argv[0]) is None:
        assert audit.how == "judged_env" and program in ("pactl",), program
        pytest.skip(f"{argv[0]} is not installed here (its defence is {audit.defence})")
    home = _home(tmp_path, files)
    argv = [a.format(home=home) for a in argv]
    extra = {k: v.format(home=home) for k, v in extra.items()}
    base = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    plain = _run(argv, {**base, **extra})
    judged = _run(argv, judged_env({**base, **extra}))
    if program == "which":  # the agent's copy is the one under its home
        assert plain.strip() == f"{home}/bin/cat" and judged.strip() == "/usr/bin/cat"
        return
    assert marker in plain, (program, plain)  # the attack works for the agent's own terminal
    assert marker not in judged, (program, judged)  # and not for the judge


def test_a_judged_command_in_the_guest_gets_only_the_judges_variables():
    """The environment a judged command really gets: no variable outside the allowlist, and a
    ``PATH`` without the home or ``/tmp``."""
    env = judged_env(
        {
            **os.environ,
            "LD_PRELOAD": "/home/user/x.so",
            "BASH_ENV": "/home/user/.bashrc",
            "PATH": f"/home/user/bin:/tmp:{os.environ['PATH']}",
            "HOME": "/home/user",
        }
    )
    assert set(env) <= JUDGED_VARIABLES | set(JUDGE_ENV) | {
        k for k in env if k.startswith("GIT_CONFIG_")
    }
    assert not any(
        d.startswith(("/home/user", "/tmp")) or d == "/tmp" for d in env["PATH"].split(":")
    )
