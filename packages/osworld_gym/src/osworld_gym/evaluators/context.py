"""What getters may touch: the desktop, the task's cache directory and the episode's end.

OSWorld's getters receive the whole ``DesktopEnv``; ours receive this small record instead, so a
getter's needs are explicit and a test can build one in a line.

>>> from pathlib import Path
>>> ctx = EvalContext(client=None, cache_dir=Path("/tmp/cache/t1"), task_id="t1",
...                   last_action="FAIL")
>>> ctx.last_action_is_fail, ctx.home
(True, '/home/user')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osworld_gym.tasks.paths import GUEST_HOME

if TYPE_CHECKING:
    from osworld_gym.client import GuestClient


@dataclass
class EvalContext:
    """Inputs shared by all getters of one evaluation.

    Attributes:
        client: the desktop's guest client.
        cache_dir: this task's cache directory (OSWorld's ``cache/<task_id>``): gold files are
            looked up here first.
        work_dir: this episode's own directory: files fetched from the desktop and outputs of
            setup commands go here, so desktops running the same task at once (a GRPO group)
            never read each other's files. ``None``: ``cache_dir`` (OSWorld's behaviour); read
            it as :attr:`episode_dir`, which has that default applied.
        task_id: the task being evaluated.
        last_action: the episode's last action (``"FAIL"`` / ``"DONE"`` / action text, or an
            OSWorld action dict); ``None`` if the agent never acted.
        screen_size: the desktop's size in pixels.
        client_password: the desktop user's password (``{CLIENT_PASSWORD}``).
        home: the desktop user's home; relative guest paths are relative to it.
        download_timeout_s: per-request timeout when a getter downloads a gold file.
        extra: settings for particular getters: ``chromium_ports`` (DevTools ports tried
            inside the desktop, default ``[1337, 9222]``), ``vlc_port`` (8080) and
            ``vlc_password`` (``"password"``).
    """

    client: GuestClient | Any
    cache_dir: Path
    task_id: str
    last_action: str | dict[str, Any] | None = None
    screen_size: tuple[int, int] = (1920, 1080)
    client_password: str = "password"
    home: str = GUEST_HOME
    download_timeout_s: float = 60.0
    extra: dict[str, Any] = field(default_factory=dict)
    work_dir: Path | None = None

    def __post_init__(self) -> None:
        self.cache_dir = Path(self.cache_dir)
        self.work_dir = Path(self.work_dir) if self.work_dir is not None else None

    @property
    def episode_dir(self) -> Path:
        """Where this episode's files go: ``work_dir``, or ``cache_dir`` when none was given."""
        return self.work_dir if self.work_dir is not None else self.cache_dir

    @property
    def last_action_is_fail(self) -> bool:
        """True if the episode ended with the ``FAIL`` action (OSWorld's infeasible answer)."""
        return is_fail_action(self.last_action)


def is_fail_action(action: Any) -> bool:
    """True for exactly ``"FAIL"`` or an action dict whose ``action_type`` is exactly ``"FAIL"``.

    OSWorld's ``DesktopEnv.evaluate`` compares the last action with ``== "FAIL"``: ``"fail"``,
    ``" FAIL "`` or ``{"action_type": "fail"}`` are not the infeasible answer there, so they are
    not here either (parity). The env itself records a parsed FAIL as the exact string ``"FAIL"``,
    so an agent whose action set accepts other spellings is unaffected.

    >>> is_fail_action("FAIL"), is_fail_action({"action_type": "FAIL"}), is_fail_action("DONE")
    (True, True, False)
    >>> is_fail_action(" FAIL "), is_fail_action("fail"), is_fail_action({"action_type": "fail"})
    (False, False, False)
    """
    if isinstance(action, str):
        return action == "FAIL"
    if isinstance(action, dict):
        return action.get("action_type") == "FAIL"
    return False
