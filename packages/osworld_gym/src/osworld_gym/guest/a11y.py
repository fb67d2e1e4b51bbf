"""Accessibility tree and terminal text via AT-SPI, through a helper process.

``pyatspi`` comes from the distribution (Debian ``python3-pyatspi``) and is importable only by
the system Python, not by the guest's virtual environment, so :mod:`a11y_helper` runs as a
separate script under :data:`SYSTEM_PYTHON` with a timeout. Reasons it cannot work (no helper
Python, no session bus) are reported as :class:`A11yUnavailable` (HTTP 501).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

from osworld_gym.guest.processes import OutputTooLarge, ProcessRegistry

log = logging.getLogger(__name__)

SYSTEM_PYTHON = os.environ.get("OSWORLD_GYM_A11Y_PYTHON", "/usr/bin/python3")
HELPER = Path(__file__).with_name("a11y_helper.py")
TREE_TIMEOUT_S = 30.0
TERMINAL_TIMEOUT_S = 10.0
#: Most bytes of XML the helper may print (its node and text caps allow about 120 MiB; a tree
#: that large is an app of the agent's making one, never a task's).
MAX_TREE_BYTES = 64 << 20


class A11yUnavailable(RuntimeError):
    """No AT-SPI tree can be obtained on this guest; the message says why."""


class A11yFailed(RuntimeError):
    """The helper ran but failed (``status`` 500), timed out on an app that does not answer
    (504) or printed more than :data:`MAX_TREE_BYTES` (413): the HTTP status to answer."""

    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status


class Accessibility:
    def __init__(self, registry: ProcessRegistry, env: dict[str, str]):
        self._registry = registry
        self._env = env

    def _run(self, mode: str, timeout: float) -> str:
        if not Path(SYSTEM_PYTHON).is_file():
            raise A11yUnavailable(
                f"no system Python at {SYSTEM_PYTHON} to run the AT-SPI helper "
                "(set OSWORLD_GYM_A11Y_PYTHON)"
            )
        if not self._env.get("DBUS_SESSION_BUS_ADDRESS"):
            raise A11yUnavailable(
                "no D-Bus session bus: start the guest with --start-x (it starts "
                "one when dbus-daemon is installed) or set "
                "DBUS_SESSION_BUS_ADDRESS"
            )
        try:
            # as the desktop user: AT-SPI's buses admit only the user who started them (the
            # player, under judge separation); the script comes on stdin because the package
            # checkout it lives in may be the judge's alone
            res = self._registry.run(
                [SYSTEM_PYTHON, "-I", "-", mode],
                timeout=timeout,
                env=self._env,
                input=HELPER.read_bytes(),
                judge=False,
                max_output=MAX_TREE_BYTES,
            )
        except subprocess.TimeoutExpired:
            raise A11yFailed(
                f"the AT-SPI helper did not finish within {timeout:.0f} s "
                "(an application may be hung)",
                504,
            ) from None
        except OutputTooLarge as e:
            raise A11yFailed(f"the accessibility tree is too large: {e}", 413) from None
        err = res.stderr.decode("utf-8", errors="replace").strip()
        if res.returncode == 3:
            raise A11yUnavailable(
                f"pyatspi is not installed for {SYSTEM_PYTHON} (Debian package "
                f"python3-pyatspi): {err[-300:]}"
            )
        if res.returncode == 4:
            raise A11yUnavailable(
                f"the AT-SPI registry is unreachable (at-spi2-core missing?): {err[-300:]}"
            )
        if res.returncode != 0:
            raise A11yFailed(f"AT-SPI helper failed with status {res.returncode}: {err[-500:]}")
        return res.stdout.decode("utf-8", errors="replace")

    def tree(self) -> str:
        """The whole desktop's accessibility tree as OSWorld-style XML."""
        return self._run("tree", TREE_TIMEOUT_S)

    def terminal(self) -> str | None:
        """Text of the active terminal widget (gnome-terminal, xfce4-terminal, ...), or None."""
        try:
            out = self._run("terminal", TERMINAL_TIMEOUT_S)
            return json.loads(out).get("output")
        except (A11yUnavailable, A11yFailed, ValueError) as e:
            log.debug("terminal output unavailable: %s", e)
            return None
