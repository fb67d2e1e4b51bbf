"""``arpo-eval export DIR --to OUT``: a run's trajectories as a Hugging Face ``datasets`` dataset.

One row per **scored** episode (infrastructure errors have no reward and are left out), in the
layout TRL's vision-language SFT/DPO trainers read, with the reward to filter or pair on::

    task_id, domain, trial, instruction, infeasible, model, protocol
    reward       the evaluator's score (fractional kept); ``score`` is the same value
    steps        turns played
    images       the screenshot the agent saw before each turn (PNG bytes, datasets.Image)
    messages     [{"role": "system", ...}, {"role": "user", prompt with the instruction},
                  {"role": "user", [image]}, {"role": "assistant", answer 1}, ...]
                 content = [{"type": "text"|"image", "text": str|None}]; the k-th image part
                 is images[k]
    actions      what was executed per turn (the answer, or FAIL where the standard protocol
                 replaced it)

Saved with ``save_to_disk``; read back with ``datasets.load_from_disk(OUT)``. For SFT keep the
successes (``ds.filter(lambda r: r["reward"] >= 1)``); for DPO pair successes and failures of a
task.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

from arpo_eval.layout import first_screenshot, read_run, read_steps

log = logging.getLogger(__name__)

SYSTEM_PROMPT = "You are a helpful assistant."


def features():
    """The dataset's ``datasets.Features``."""
    from datasets import Features, Image, Sequence, Value

    part = {"type": Value("string"), "text": Value("string")}
    return Features(
        {
            "task_id": Value("string"),
            "domain": Value("string"),
            "trial": Value("int32"),
            "instruction": Value("string"),
            "infeasible": Value("bool"),
            "model": Value("string"),
            "protocol": Value("string"),
            "reward": Value("float64"),
            "score": Value("float64"),
            "steps": Value("int32"),
            "images": Sequence(Image()),
            "messages": [{"role": Value("string"), "content": [part]}],
            "actions": Sequence(Value("string")),
        }
    )


def _image(path: Path, max_side: int | None) -> dict[str, Any]:
    if max_side is None:
        return {"bytes": path.read_bytes(), "path": None}
    from PIL import Image

    img = Image.open(path).convert("RGB")
    img.thumbnail((max_side, max_side))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": None}


def _screen_size(value: Any) -> tuple[int, int]:
    """A task file's ``(width, height)`` (a JSON list), default 1920x1080."""
    width, height = value or (1920, 1080)
    return (int(width), int(height))


def _prompt(action_space: str, screen_size: Any, instruction: str) -> str:
    from osworld_gym.actions import make_action_set

    from arpo_eval.openai_agent import prompt_text

    try:
        template = make_action_set(action_space, screen_size=_screen_size(screen_size)).describe()
    except (ValueError, KeyError, TypeError):
        return instruction
    return prompt_text(template, instruction)


def episode_row(
    episode_dir: Path,
    *,
    task: dict[str, Any],
    record: Any,
    model: str,
    action_space: str,
    screen_size: Any,
    max_image_side: int | None = None,
) -> dict[str, Any] | None:
    """The dataset row of one episode; ``None`` if it has no usable trajectory."""
    steps = [s for s in read_steps(episode_dir) if "step_num" in s]
    first = first_screenshot(episode_dir)
    if not steps or first is None:
        return None
    instruction = task.get("instruction", "")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {
            "role": "user",
            "content": [{"type": "text", "text": _prompt(action_space, screen_size, instruction)}],
        },
    ]
    images, actions = [], []
    seen: Path | None = first
    for s in steps:
        if seen is None or not seen.is_file():
            log.warning(
                "%s: screenshot before step %s is missing; episode skipped",
                episode_dir,
                s["step_num"],
            )
            return None
        images.append(_image(seen, max_image_side))
        messages.append({"role": "user", "content": [{"type": "image", "text": None}]})
        answer = str(s.get("response") or s.get("action") or "")
        messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
        actions.append(s["action"] if isinstance(s.get("action"), str) else str(s.get("action")))
        seen = episode_dir / s["screenshot_file"] if s.get("screenshot_file") else None
    return {
        "task_id": record.task_id,
        "domain": record.domain,
        "trial": record.trial,
        "instruction": instruction,
        "infeasible": bool(record.infeasible),
        "model": model,
        "protocol": record.protocol,
        "reward": float(record.score),
        "score": float(record.score),
        "steps": len(steps),
        "images": images,
        "messages": messages,
        "actions": actions,
    }


def export_dataset(
    run_dir: str | Path,
    to: str | Path,
    *,
    min_score: float | None = None,
    max_image_side: int | None = None,
):
    """Write the run's scored episodes as a dataset at ``to`` (module docstring) and return it.

    Raises:
        ValueError: no scored episode to export.
    """
    from datasets import Dataset

    manifest, records = read_run(Path(run_dir))
    tasks = {t["id"]: t for t in manifest.tasks}
    screen = manifest.extra.get("screen_size")
    rows = []
    for rec in records:
        if not rec.scored or rec.episode_dir is None:
            continue
        if min_score is not None and float(rec.score) < min_score:  # type: ignore[arg-type]
            continue
        row = episode_row(
            Path(rec.episode_dir),
            task=tasks.get(rec.task_id, {}),
            record=rec,
            model=manifest.model,
            action_space=manifest.action_space,
            screen_size=screen,
            max_image_side=max_image_side,
        )
        if row is not None:
            rows.append(row)
    if not rows:
        raise ValueError(
            f"no scored episodes with trajectories in {run_dir}"
            + (f" scoring at least {min_score}" if min_score is not None else "")
        )
    ds = Dataset.from_list(rows, features=features())
    ds.save_to_disk(str(to))
    return ds
