"""Record episodes in OSWorld's result layout, so OSWorld's tools read our runs as their own.

:class:`RecordEpisode` wraps an env and writes, per episode,
``<out_dir>/<action_space>/<observation_type>/<model>/<domain>/<task_id>/``:

* ``traj.jsonl``: one JSON line per step with OSWorld's keys ``step_num``, ``action_timestamp``
  (``%Y%m%d@%H%M%S%f``, taken before the action ran), ``action``, ``response`` (the agent's
  text, given as ``step(action, response=...)`` or found in ``info["response"]``), ``reward``,
  ``done``, ``info`` (its JSON-safe part) and ``screenshot_file``;
* ``step_{n}_{timestamp}.png`` after each step, and ``step_0_{timestamp}.png`` for the first
  observation;
* ``result.txt``: the final score as OSWorld writes it (``f"{score}\\n"``), **only** when the
  episode ended without an infrastructure error; otherwise ``infra_error.txt`` with the error,
  and no ``result.txt``, so OSWorld's ``show_result`` (which averages over directories that have
  a ``result.txt``) and its resume logic (which re-runs directories without one) treat the task as
  not run rather than as failed;
* ``recording.mp4`` with ``record_video=True``, recorded by the guest (``/start_recording``,
  ``/end_recording``).

A directory is emptied when its task starts again (OSWorld's resume does the same).
:func:`summarize_results` averages scores the way ``show_result.py`` does.

>>> import tempfile, gymnasium as gym, osworld_gym
>>> from osworld_gym.recording import RecordEpisode, summarize_results
>>> out = tempfile.mkdtemp()
>>> inner = gym.make("OSWorld-v0", provider="fake", tasks=[osworld_gym.testing.FAKE_TASK])
>>> env = RecordEpisode(inner, out, model="always-fail")
>>> _ = env.reset(seed=0)
>>> _ = env.step("FAIL", response="There is no Bluetooth here. FAIL")
>>> env.close()
>>> sorted(p.name.split("_")[0] for p in env.episode_dir.iterdir())
['result.txt', 'step', 'step', 'traj.jsonl']
>>> env.episode_dir.relative_to(out).as_posix()
'pyautogui/screenshot/always-fail/os/fake-always-fail'
>>> summarize_results(out, model="always-fail")
{'overall': 1.0, 'tasks': 1, 'domains': {'os': {'score': 1.0, 'tasks': 1}}}
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from osworld_gym.errors import OSWorldGymError
from osworld_gym.outcome import read_score, write_outcome

log = logging.getLogger(__name__)

__all__ = ["RecordEpisode", "json_safe", "summarize_results"]

TIMESTAMP_FORMAT = "%Y%m%d@%H%M%S%f"


class RecordEpisode(gym.Wrapper):
    """Write every episode of ``env`` in OSWorld's result layout (module docstring).

    Args:
        env: an OSWorld env (or a wrapper around one).
        out_dir: OSWorld's ``--result_dir``.
        action_space: the ``<action_space>`` level of the layout (OSWorld's ``--action_space``).
        observation_type: the ``<observation_type>`` level (``screenshot``, ``a11y_tree``, ...).
        model: the ``<model>`` level (OSWorld's ``--model``).
        record_video: also save the guest's screen recording as ``recording.mp4``.
    """

    def __init__(
        self,
        env: gym.Env,
        out_dir: str | Path,
        *,
        action_space: str = "pyautogui",
        observation_type: str = "screenshot",
        model: str = "model",
        record_video: bool = False,
    ):
        super().__init__(env)
        self.root = Path(out_dir) / action_space / observation_type / model
        self.record_video = record_video
        self.episode_dir: Path | None = None
        self._step = 0
        self._open = False  # an episode is being written
        self._recording = False

    # -- Gymnasium API -----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._stop_recording(save=False)  # an abandoned episode keeps no result.txt
        obs, info = self.env.reset(seed=seed, options=options)
        self.episode_dir = self.root / str(info["domain"]) / str(info["task_id"])
        if self.episode_dir.exists():
            shutil.rmtree(self.episode_dir)
        self.episode_dir.mkdir(parents=True)
        self._step = 0
        self._open = True
        self._save_frame(obs, _now())
        if self.record_video:
            self._start_recording()
        return obs, info

    def step(self, action: Any, response: str | None = None):
        stamp = _now()
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not self._open or self.episode_dir is None:
            return obs, reward, terminated, truncated, info
        self._step += 1
        done = bool(terminated or truncated)
        if response is None:
            response = info.get("response", "")
        line = {
            "step_num": self._step,
            "action_timestamp": stamp,
            "action": json_safe(action),
            "response": json_safe(response),
            "reward": float(reward),
            "done": done,
            "info": json_safe(info),
            "screenshot_file": self._save_frame(obs, stamp),
        }
        with open(self.episode_dir / "traj.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
        if done:
            self._finish(float(reward), info.get("infra_error"))
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        try:
            self._stop_recording(save=False)
        finally:
            super().close()

    # -- internals ---------------------------------------------------------------------------------

    def _finish(self, score: float, infra_error: str | None) -> None:
        assert self.episode_dir is not None
        self._open = False
        self._stop_recording(save=True)
        if infra_error is None:
            write_outcome(self.episode_dir, score=score)
        else:
            write_outcome(self.episode_dir, infra_error=infra_error)

    def _save_frame(self, obs: Any, stamp: str) -> str | None:
        frame = obs.get("screenshot") if isinstance(obs, dict) else None
        if frame is None or self.episode_dir is None:
            return None
        from PIL import Image

        name = f"step_{self._step}_{stamp}.png"
        Image.fromarray(np.asarray(frame, np.uint8)).save(self.episode_dir / name, compress_level=1)
        return name

    def _client(self) -> Any:
        # by name: this wrapper sits below osworld_gym.env in the import floors, so it cannot
        # name OSWorldEnv (whose provider this is)
        provider = getattr(self.env.unwrapped, "provider", None)
        if provider is None:
            raise OSWorldGymError(f"{self.env.unwrapped!r} has no desktop provider to record")
        return provider.start()

    def _start_recording(self) -> None:
        try:
            self._client().start_recording()
            self._recording = True
        except OSWorldGymError as e:
            log.warning("screen recording unavailable for %s: %s", self.episode_dir, e)

    def _stop_recording(self, *, save: bool) -> None:
        if not self._recording:
            return
        self._recording = False
        try:
            data = self._client().end_recording()
        except OSWorldGymError as e:
            log.warning("could not end the screen recording of %s: %s", self.episode_dir, e)
            return
        if save and self.episode_dir is not None and data:
            (self.episode_dir / "recording.mp4").write_bytes(data)


_DROP = object()


def json_safe(value: Any, *, max_array: int = 64) -> Any:
    """The JSON-serialisable part of ``value``: numpy scalars become numbers, small arrays lists,
    non-finite floats ``None``; anything else JSON cannot hold (objects, large arrays) is left
    out of containers, and becomes ``None`` at the top level."""
    safe = _safe(value, max_array)
    return None if safe is _DROP else safe


def _safe(value: Any, max_array: int) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return _safe(value.item(), max_array)
    if isinstance(value, np.ndarray):
        return _safe(value.tolist(), max_array) if value.size <= max_array else _DROP
    if isinstance(value, dict):
        items = ((str(k), _safe(v, max_array)) for k, v in value.items())
        return {k: v for k, v in items if v is not _DROP}
    if isinstance(value, (list, tuple)):
        return [v for v in (_safe(x, max_array) for x in value) if v is not _DROP]
    return _DROP


def summarize_results(
    result_dir: str | Path,
    *,
    action_space: str = "pyautogui",
    observation_type: str = "screenshot",
    model: str = "model",
) -> dict[str, Any]:
    """Average scores as OSWorld's ``show_result.py`` does: over the task directories that have a
    ``result.txt`` (an unreadable one counts 0.0), per domain and overall.

    Returns:
        ``{"overall": mean or None, "tasks": n, "domains": {domain: {"score", "tasks"}}}``.
    """
    root = Path(result_dir) / action_space / observation_type / model
    domains: dict[str, dict[str, Any]] = {}
    every: list[float] = []
    for domain_dir in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        scores = []
        for task_dir in sorted(p for p in domain_dir.iterdir() if p.is_dir()):
            score = read_score(task_dir)
            if score is not None:
                scores.append(score)
        if scores:
            domains[domain_dir.name] = {"score": sum(scores) / len(scores), "tasks": len(scores)}
            every += scores
    return {
        "overall": sum(every) / len(every) if every else None,
        "tasks": len(every),
        "domains": domains,
    }


def _now() -> str:
    return dt.datetime.now().strftime(TIMESTAMP_FORMAT)
