"""Pieces of the local provider that need no desktop."""

from __future__ import annotations

import sys

from osworld_gym.providers import local


def test_a_python_under_a_masked_directory_is_bound_back_into_the_sandbox(monkeypatch):
    monkeypatch.setattr(sys, "prefix", "/tmp/ci/.venv")
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    paths = local._python_paths()
    assert "/tmp/ci/.venv" in paths
    assert "/usr" not in paths  # visible anyway through the read-only root


def test_sandbox_command_gives_the_desktop_its_own_namespaces_and_home(tmp_path):
    p = local.LocalProvider(screen_size=(800, 600), root_dir=tmp_path)
    p._dir = tmp_path
    cmd = p._command(tmp_path / "home", tmp_path / "run")
    joined = " ".join(cmd)
    for flag in (
        "--die-with-parent",
        "--unshare-all",
        "--unshare-user",
        "--clearenv",
        f"--bind {tmp_path / 'home'} /home/user",
        "--uid 1000",
        "--screen 800x600x24",
    ):
        assert flag in joined
    # the guest, not bwrap, is what runs in the end
    assert cmd[cmd.index("--") + 1 :][:3] == [sys.executable, "-m", "osworld_gym.guest"]
