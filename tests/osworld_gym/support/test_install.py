"""A fresh machine gets everything the desktop and its tasks run from ``scripts/install.sh``.

The list of programs is derived from the task JSON (``osworld_gym.support.programs``), mapped to
Debian packages in ``osworld_gym.doctor.PACKAGES``, checked by ``osworld-gym doctor`` and
installed by ``scripts/install.sh``. These tests hold the three together, and the last one proves
the install on a clean Debian 12 root file system (``debootstrap``), where nothing installed by
hand on the test machine can hide a missing package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from osworld_gym import doctor
from osworld_gym.image.recipe import APPS, SYSTEM_PACKAGES
from osworld_gym.support.programs import task_programs
from repo_paths import ROOT

INSTALL = ROOT / "scripts" / "install.sh"
#: Packages of priority "required": in every Debian root file system, debootstrap's minbase too.
REQUIRED = {
    "bash",
    "coreutils",
    "dash",
    "debianutils",
    "diffutils",
    "findutils",
    "grep",
    "gzip",
    "mawk",
    "sed",
    "tar",
    "util-linux",
}
#: Packages only the host needs (the sandbox, the docker and VNC test tooling), not a desktop.
HOST_ONLY = {"bubblewrap", "docker.io", "debootstrap", "x11vnc"}


def install_packages() -> set[str]:
    """The packages in install.sh's APT_PACKAGES array (comments dropped)."""
    text = INSTALL.read_text()
    body = re.search(r"^APT_PACKAGES=\((.*?)^\)", text, re.S | re.M)
    assert body, "scripts/install.sh has no APT_PACKAGES=( ... ) array"
    words = " ".join(line.split("#", 1)[0] for line in body.group(1).splitlines()).split()
    return set(words)


def test_every_program_a_builtin_task_runs_has_a_known_package():
    need = doctor.required_programs()
    unknown = sorted(p for p in need if p not in doctor.PACKAGES)
    assert unknown == [], f"programs with no package in osworld_gym.doctor.PACKAGES: {unknown}"
    # the derivation really reads the tasks: the chrome tasks' port forwarder is among them
    assert "socat" in need and any(t.startswith("chrome-") for t in need["socat"])


def test_install_sh_installs_every_package_doctor_names():
    named = set(doctor.PACKAGES.values()) | set(doctor.APP_LOOK_FILES.values())
    missing = sorted(named - install_packages() - REQUIRED)
    assert missing == [], f"scripts/install.sh does not install {missing}"


def test_install_sh_and_the_image_give_thunderbird_the_same_preferences():
    from osworld_gym.image.recipe import THUNDERBIRD_PREFS, render_dockerfile

    assert f"tb_prefs='{THUNDERBIRD_PREFS}'" in INSTALL.read_text()
    assert THUNDERBIRD_PREFS in render_dockerfile("full")


def test_the_full_docker_image_installs_every_package_the_tasks_need():
    image = set(SYSTEM_PACKAGES) | set(APPS["full"])
    need = {doctor.PACKAGES[p] for p in doctor.required_programs()}
    need |= set(doctor.APP_LOOK_FILES.values())  # the apps' look: LibreOffice's GTK3 and icons
    missing = sorted(need - image - REQUIRED - HOST_ONLY)
    assert missing == [], f"image/recipe.py's full image lacks {missing}"


def _paths(program: str) -> set[str]:
    """``program``'s PATH entry and the file it links to, each also in its /bin spelling (dpkg
    records some files under /bin, before the /usr merge)."""
    where = shutil.which(program, path=doctor.DESKTOP_PATH)
    if where is None:
        return set()
    paths = {where, os.path.realpath(where)}
    return paths | {re.sub(r"^/usr/(s?bin)/", r"/\1/", p) for p in paths}


def _dpkg(args: list[str]) -> str:
    # one call for every path or package: dpkg-query exits 1 when some are unknown, which is fine
    return subprocess.run(["dpkg-query", *args], capture_output=True, text=True, timeout=60).stdout


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs a Debian system (dpkg)")
def test_dpkg_agrees_with_the_package_of_every_program():
    """Each program's package ships it, or depends directly on the package that does (``vlc``
    brings ``vlc-bin``, which ships the binary; installing ``vlc-bin`` alone gives no plugins)."""
    paths = {program: _paths(program) for program in doctor.PACKAGES}
    owner_of: dict[str, set[str]] = {}
    for line in _dpkg(["-S", *sorted(set().union(*paths.values()))]).splitlines():
        packages, _, path = line.partition(": ")
        for package in packages.split(", "):
            owner_of.setdefault(path.strip(), set()).add(package.split(":")[0])
    depends: dict[str, set[str]] = {}
    for line in _dpkg(
        ["-W", "-f=${Package}\t${Pre-Depends},${Depends}\n", *sorted(set(doctor.PACKAGES.values()))]
    ).splitlines():
        package, _, deps = line.partition("\t")
        depends[package] = {
            re.split(r"[\s(:]", alt.strip())[0]
            for dep in deps.split(",")
            for alt in dep.split("|")
            if alt.strip()
        }
    wrong = {}
    for program, package in doctor.PACKAGES.items():
        owners = set().union(*(owner_of.get(p, set()) for p in paths[program]))
        if owners and not owners & ({package} | depends.get(package, set())):
            wrong[program] = (package, sorted(owners))
    assert wrong == {}, f"program: (PACKAGES says, dpkg says): {wrong}"
    assert len([p for p in paths if paths[p]]) > 40  # the check really looked at the programs


def test_doctor_passes_on_this_machine():
    out = subprocess.run(
        [sys.executable, "-m", "osworld_gym.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    failed = [c for c in report["checks"] if not c["ok"]]
    assert out.returncode == 0 and failed == [], failed
    whats = {c["what"] for c in report["checks"]}
    assert {"socat", "Xvfb", "open *.txt", "open *.xlsx"} <= whats


def test_a_desktop_without_mimetype_cannot_open_an_empty_text_file(tmp_path):
    """The failure a fresh machine had: with only ``file``, an empty notes.txt is
    ``inode/x-empty`` and xdg-open finds no app. doctor must say so and name the package."""
    # a PATH where every desktop program resolves except `mimetype`
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in doctor.DESKTOP_PATH.split(":"):
        for entry in Path(d).glob("*") if Path(d).is_dir() else []:
            if entry.name != "mimetype" and not (bin_dir / entry.name).exists():
                (bin_dir / entry.name).symlink_to(entry)
    checks = doctor.check_default_apps(doctor._Probe(path=str(bin_dir)), [".txt", ".xlsx"])
    by_what = {c.what: c for c in checks}
    assert not by_what["open *.txt"].ok
    assert by_what["open *.txt"].package == "libfile-mimeinfo-perl"
    assert "inode/x-empty" in by_what["open *.txt"].detail


def test_doctor_names_a_missing_program_and_its_package(tmp_path):
    probe = doctor._Probe()
    checks = doctor.check_programs(probe, {"socat": {"chrome-x"}, "no-such-prog-xyz": {"t"}})
    by_what = {c.what: c for c in checks}
    assert by_what["socat"].ok
    assert not by_what["no-such-prog-xyz"].ok
    assert "no Debian package known" in by_what["no-such-prog-xyz"].detail
    report = doctor.Report(checks=[doctor.Check("socat", False, "MISSING", "socat")])
    assert "apt-get install -y socat" in report.format()


def _debootstrap_ok() -> str | None:
    if os.geteuid() != 0:
        return "needs root (debootstrap, chroot)"
    for tool in ("debootstrap", "bwrap", "chroot"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


@pytest.mark.slow
@pytest.mark.timeout(2400)  # debootstrap + ~600 MB of packages: 4 min idle, more on a busy machine
@pytest.mark.skipif(_debootstrap_ok() is not None, reason=str(_debootstrap_ok()))
def test_install_sh_on_a_fresh_debian_root_gives_doctor_everything(tmp_path):
    """debootstrap a clean Debian 12, run ``install.sh --system-only`` in it, then run doctor
    against it: before the install doctor fails naming socat and the text-file default app;
    after it every check passes. Nothing of this machine's own packages can leak in."""
    root = tmp_path / "bookworm"
    try:
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "bookworm",
                str(root),
                "http://deb.debian.org/debian",
            ],
            check=True,
            capture_output=True,
            timeout=900,
        )
        before = doctor.diagnose(root=root)
        failed = {c.what for c in before.checks if not c.ok}
        assert {"socat", "Xvfb", "open *.txt"} <= failed
        assert "socat" in before.missing_packages

        out = subprocess.run(
            [
                "bwrap",
                "--bind",
                str(root),
                "/",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--tmpfs",
                "/tmp",
                "--ro-bind",
                str(ROOT / "scripts"),
                "/repo/scripts",
                "--ro-bind",
                "/etc/resolv.conf",
                "/etc/resolv.conf",
                "--clearenv",
                "--setenv",
                "PATH",
                "/usr/sbin:/usr/bin:/sbin:/bin",
                "--setenv",
                "HOME",
                "/root",
                "--setenv",
                "LANG",
                "C.UTF-8",
                "bash",
                "/repo/scripts/install.sh",
                "--system-only",
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]

        after = doctor.diagnose(root=root)
        assert after.ok, after.format()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_task_programs_are_read_from_every_kind_of_step():
    task = {
        "id": "t",
        "config": [
            {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222"]}},
            {
                "type": "execute",
                "parameters": {"command": "cd ~ && jq . a.json | sort", "shell": "true"},
            },
            {
                "type": "execute",
                "parameters": {"command": ["bash", "-c", "tar xf a.tar; unzip -o b"]},
            },
        ],
        "evaluator": {
            "postconfig": [{"type": "launch", "parameters": {"command": ["vlc"]}}],
            "result": {"type": "vm_command_line", "command": ["sudo", "-S", "git", "log"]},
        },
    }
    assert task_programs(task) == {
        "socat",
        "jq",
        "sort",
        "bash",
        "tar",
        "unzip",
        "vlc",
        "sudo",
        "git",
    }
