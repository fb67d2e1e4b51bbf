"""The trainer with its desktops as Ray actors: a real local Ray cluster, real local desktops.

The test starts a Ray cluster in this process (2 CPUs, 2 ``osworld_desktop`` slots) and names its
address in the trainer config, as a run names the head node of a cluster of desktop nodes. Each
of the 2 desktops is an :class:`osworld_gym.ray_pool.EnvActor` holding a sandboxed Xvfb desktop
(the local provider); the tiny model trains one step on their episodes.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from arpo_trainer.tiny import build_tiny_vlm  # noqa: E402
from arpo_trainer.trainer import ARPOTrainer  # noqa: E402
from test_trainer_training import INFEASIBLE, make_config  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster():
    # under `uv run`, Ray would build a fresh venv per worker; share this interpreter's instead
    from ray._private import ray_constants

    ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False
    ray.init(
        num_cpus=2,
        resources={"osworld_desktop": 2},
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 1024**2,
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_dead(pids, timeout=30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_a_training_step_on_local_desktops_running_as_ray_actors(tmp_path, cluster):
    args = make_config(
        tmp_path,
        desktops={"source": "ray", "ray_address": cluster, "provider": "local", "num_cpus": 0,
                  "resources": {"osworld_desktop": 1}, "num_desktops": 2},
        provider="local",
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=1,
        max_turns=2,
        step_timeout_s=180,
        rollout_log="rollouts.jsonl",
    )  # fmt: skip
    assert args.desktop_source.source == "ray" and args.provider == "local"
    vlm = build_tiny_vlm(seed=0)
    trainer = ARPOTrainer(vlm.model, args, vlm.processor)
    try:
        pool = trainer.collector(2).pool  # the pool training will use (same size: reused)
        assert pool.backend == "ray"
        actors = [p["pid"] for p in pool.vec.placement]
        assert os.getpid() not in actors and len(set(actors)) == 2
        desktops: list[int | None] = []

        class SeeDesktops(TrainerCallback):  # while the step's desktops still run
            def on_step_end(self, *a, **k):
                desktops.extend(ray.get([a.desktop_pid.remote() for a in trainer._pool.vec.actors]))

        trainer.add_callback(SeeDesktops())
        trainer.train()
        assert trainer._pool is None  # training ended: the desktops were stopped
    finally:
        trainer.close_desktops()
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert len(history) == 1 and history[0]["episode/infra_errors"] == 0
    assert history[0]["rollout/env_steps_per_s"] > 0
    rollouts = [
        json.loads(line) for line in (tmp_path / "out" / "rollouts.jsonl").read_text().splitlines()
    ]
    assert [r["task_id"] for r in rollouts] == [INFEASIBLE] * 2
    assert all(r["infra_error"] is None and len(r["turns"]) >= 1 for r in rollouts)
    # the sandboxed desktops started (one per actor) and are gone with their actors
    assert all(desktops) and len(set(desktops)) == 2
    assert _wait_dead(actors + desktops) == []


def test_async_rollouts_play_on_ray_actor_desktops(tmp_path, cluster):
    # rollout_mode async: each desktop of the loop is its own one-actor pool, playing on its own
    args = make_config(
        tmp_path,
        desktops={"source": "ray", "ray_address": cluster, "provider": "local", "num_cpus": 0,
                  "resources": {"osworld_desktop": 1}, "num_desktops": 2},
        provider="local",
        rollout_mode="async",
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=2,
        max_turns=2,
        step_timeout_s=180,
    )  # fmt: skip
    vlm = build_tiny_vlm(seed=0)
    trainer = ARPOTrainer(vlm.model, args, vlm.processor)
    actors: list[int] = []

    class SeeActors(TrainerCallback):  # while the loop's desktops still run
        def on_step_end(self, *a, **k):
            for p in trainer._async.collector.pools:  # noqa: SLF001 - the loop's desktops
                assert p.pool.backend == "ray"
                actors.extend(x["pid"] for x in p.pool.vec.placement)

    trainer.add_callback(SeeActors())
    try:
        trainer.train()
    finally:
        trainer.close_desktops()
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert len(history) == 2 and all(h["episode/infra_errors"] == 0 for h in history)
    assert history[-1]["async/groups_taken"] == 2
    # two actors, neither in this process, the same two through both steps; gone with the loop
    assert len(set(actors)) == 2 and os.getpid() not in actors and len(actors) == 4
    assert _wait_dead(set(actors)) == []


def test_a_ray_address_other_than_the_connected_cluster_is_a_clear_error(tmp_path, cluster):
    from arpo_trainer.desktops import DesktopPool

    args = make_config(
        tmp_path, desktops={"source": "ray", "ray_address": "10.9.9.9:6379", "provider": "fake"}
    )
    with pytest.raises(ValueError, match="already connected to the Ray cluster at"):
        DesktopPool(2, {"provider": "fake", "settle": None}, source=args.desktop_source)
