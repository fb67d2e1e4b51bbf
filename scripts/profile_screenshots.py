"""Screenshots of each desktop profile in the same task state, for the README.

Resets the same built-in task on an ``openbox`` and an ``ubuntu`` desktop, opens a terminal with
Ctrl+Alt+T (as an agent would) and saves each screen, halved, to ``docs/profile-<name>.png``.

    uv run python scripts/profile_screenshots.py [--task libreoffice_calc-bold-header-001]
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
from PIL import Image

DOCS = Path(__file__).resolve().parent.parent / "docs"
TERMINALS = {"openbox": "xterm.XTerm", "ubuntu": "gnome-terminal-server"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="libreoffice_calc-bold-header-001")
    args = ap.parse_args()
    DOCS.mkdir(exist_ok=True)
    for profile, terminal in TERMINALS.items():
        env = gym.make(
            "OSWorld-v0", provider="local", tasks="builtin", provider_kwargs={"profile": profile}
        )
        try:
            env.reset(options={"task": args.task})
            env.step("pyautogui.hotkey('ctrl', 'alt', 't')")
            client = env.unwrapped.provider.start()
            deadline = time.monotonic() + 30
            while terminal not in client.execute("wmctrl -lx", shell=True, timeout=10)["output"]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no terminal on the {profile} desktop")
                time.sleep(0.2)
            obs, *_ = env.step("pyautogui.write('ls ~/Desktop\\n')")
            img = Image.fromarray(obs["screenshot"]).resize((960, 540), Image.LANCZOS)
            out = DOCS / f"profile-{profile}.png"
            buf = io.BytesIO()
            img.quantize(colors=256).save(buf, "PNG", optimize=True)
            out.write_bytes(buf.getvalue())
            print(f"{out} ({len(buf.getvalue()) // 1024} KiB)")
        finally:
            env.close()


if __name__ == "__main__":
    main()
