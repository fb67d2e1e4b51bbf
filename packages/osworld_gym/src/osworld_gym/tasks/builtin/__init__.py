"""Tasks that ship with osworld-gym: OSWorld's format, no downloads, each with its own proof.

They use OSWorld's layout (``test_all.json`` + ``examples/<domain>/<id>.json``). Every file a
task needs is generated offline (``builtin-asset://`` URLs, see :mod:`osworld_gym.tasks.assets`),
many tasks vary with a seed (``"variables"``), and each carries an ``oracle``: pyautogui actions
that solve it through the GUI (``["FAIL"]`` for infeasible ones). ``osworld-gym tasks check``
and the test suite replay every oracle (score 1) and a no-op (score 0) on real desktops.

They are loaded (validated, and classified for this machine) by
:func:`osworld_gym.support.builtin_tasks`; this package is their data.

>>> (BUILTIN_DIR / "test_all.json").is_file()
True
"""

from __future__ import annotations

from pathlib import Path

#: Directory holding the built-in task files (usable with ``load_tasks`` directly).
BUILTIN_DIR = Path(__file__).resolve().parent
