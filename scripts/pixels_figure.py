"""docs/pixels-family.png: one held-out instance of each pixel-family kind as a real local desktop
shows it (640x360) and as the tiny VLM sees it (140x84, drawn enlarged); the menu after its
first click.

    uv run --frozen python scripts/pixels_figure.py [--out docs/pixels-family.png]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
from osworld_gym.support import load_tasks
from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "docs/pixels-family.png")
    args = p.parse_args()
    tasks = load_tasks("pixels:heldout:all:1")
    env = gym.make(
        "OSWorld-v0", tasks=tasks, screen_size=(640, 360), provider_kwargs={"profile": "openbox"}
    )
    font = ImageFont.truetype("DejaVuSans.ttf", 15)
    tiles = []
    try:
        for t in tasks:
            obs, _ = env.reset(options={"task": t.id})
            note = ""
            if t.id.startswith("pixels-menu"):
                obs, *_ = env.step(t.oracle[0])
                note = "  (after clicking Menu)"
            full = Image.fromarray(obs["screenshot"])
            small = full.resize((140, 84), Image.Resampling.BICUBIC)
            tile = Image.new("RGB", (640 + 290, 360 + 28), "white")
            tile.paste(full, (0, 28))
            tile.paste(small.resize((280, 168), Image.Resampling.NEAREST), (650, 28 + 96))
            d = ImageDraw.Draw(tile)
            d.text((4, 5), f"{t.id}: {t.instruction}{note}", fill="black", font=font)
            d.text((650, 28 + 70), "what the tiny VLM sees (140x84)", fill="black", font=font)
            tiles.append(tile)
    finally:
        env.close()
    w, h = tiles[0].size
    out = Image.new("RGB", (w, h * len(tiles)), "white")
    for i, tile in enumerate(tiles):
        out.paste(tile, (0, i * h))
    out = out.resize((w * 3 // 4, h * len(tiles) * 3 // 4), Image.Resampling.LANCZOS)
    out.save(args.out, optimize=True)
    print(f"{args.out}: {out.size[0]}x{out.size[1]}")


if __name__ == "__main__":
    main()
