"""What a training step logs about its rollouts, and the live success rate on the progress bar.

Metrics (averaged over logging steps by TRL): ``episode/success_rate`` (mean evaluator score of
the policy's own rollouts; replayed ones excluded), ``episode/solved_frac``,
``episode/infra_errors`` (rollouts left out because the desktop failed) and
``episode/infra_rate`` (their share of the step's own rollouts: a policy that provokes them shows),
``episode/format_error_frac``, ``episode/turns_mean``, ``episode/done_frac``,
``replay/injected_frac``, ``replay/all_fail_groups``, ``replay/buffer_size``, ``replay/stored``,
``replay/age_mean`` (steps since the injected successes were stored), ``rollout/*`` timings,
``rollout/simulated_latency_s`` when the run adds a simulated generation latency (its timings are
then partly simulated) and ``time/minutes`` since the first rollout.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from arpo_trainer.replay import InjectionStats
from arpo_trainer.rollout import RolloutStats, Trajectory


def rollout_metrics(
    fresh: list[Trajectory],
    batch: list[Trajectory],
    inj: InjectionStats,
    stored: int,
    buffer_size: int,
    rstats: RolloutStats,
    *,
    success_threshold: float,
) -> dict[str, float]:
    """The ``episode/``, ``replay/`` and ``rollout/`` metrics of one generation batch.

    >>> from arpo_trainer.rollout import Trajectory
    >>> m = rollout_metrics([Trajectory("t", "", score=1.0), Trajectory("t", "", infra_error="x")],
    ...                     [], InjectionStats(), 0, 0, RolloutStats(), success_threshold=0.1)
    >>> m["episode/success_rate"], m["episode/infra_errors"], m["episode/infra_rate"]
    (1.0, 1.0, 0.5)
    """
    valid = [t for t in fresh if t.valid]
    n = max(1, len(valid))
    scores = [t.score for t in valid]
    nan = float("nan")
    out = {
        "episode/success_rate": sum(scores) / n if valid else nan,
        "episode/solved_frac": sum(s > success_threshold for s in scores) / n if valid else nan,
        "episode/infra_errors": float(len(fresh) - len(valid)),
        "episode/infra_rate": (len(fresh) - len(valid)) / len(fresh) if fresh else nan,
        "episode/format_error_frac": sum(t.format_errors > 0 for t in valid) / n,
        "episode/turns_mean": sum(len(t.turns) for t in valid) / n,
        "episode/done_frac": sum(t.end == "DONE" for t in valid) / n,
        "replay/injected_frac": inj.injected / max(1, len(batch)),
        "replay/all_fail_groups": float(inj.all_fail_groups),
        "replay/buffer_size": float(buffer_size),
        "replay/stored": float(stored),
        "rollout/seconds": rstats.seconds,
        "rollout/generate_seconds": rstats.generate_seconds,
        "rollout/env_seconds": rstats.env_seconds,
        "rollout/env_steps_per_s": rstats.env_steps / max(rstats.env_seconds, 1e-9),
        "rollout/turns_per_s": rstats.turns / max(rstats.seconds, 1e-9),
    }
    if inj.ages:
        out["replay/age_mean"] = inj.mean_age
    return out


def append_rollout_log(path: str | Path, trajectories: list[Trajectory], step: int) -> None:
    """One JSON line per trajectory (task, score, end, actions; no screenshots)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for t in trajectories:
            f.write(json.dumps({"time": time.time(), **t.summary(), "global_step": step}) + "\n")


class QuietProgressCallback(ProgressCallback):
    """transformers' progress bar without the metrics dict it writes under the bar at every
    logging step (and at the end): the bar's postfix shows success, replay and infra figures
    (:class:`LiveSuccessCallback`); every metric still goes to ``report_to`` (TensorBoard,
    JSON) and to ``trainer_state.json``."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None


class LiveSuccessCallback(TrainerCallback):
    """Shows the latest success rate, replay use and infra errors on the training progress bar,
    and stops the desktops when training ends."""

    def __init__(self, trainer: Any):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        bar = next(
            (
                cb.training_bar
                for cb in self.trainer.callback_handler.callbacks
                if isinstance(cb, ProgressCallback) and cb.training_bar is not None
            ),
            None,
        )
        live = self.trainer.live_stats
        if bar is not None and live:
            bar.set_postfix(
                {k: f"{v:.2f}" if isinstance(v, float) else v for k, v in live.items()},
                refresh=False,
            )

    def on_train_end(self, args, state, control, **kwargs):
        self.trainer.close_desktops()
