"""The private parts of Gymnasium that osworld_gym relies on, checked one by one.

``osworld_gym.vector.OSWorldVectorEnv`` subclasses ``AsyncVectorEnv`` to replace a hung or dead
worker and to answer for it (Gymnasium has no public API for either), and ``RayVectorEnv``
batches infos with ``VectorEnv._add_info``. packages/osworld_gym/pyproject.toml pins the
Gymnasium range these tests passed on; after a Gymnasium upgrade they say exactly which part
moved, instead of a run failing deep inside a worker. Plain ``AsyncVectorEnv`` over a tiny env
(no desktop) keeps them fast.
"""

from __future__ import annotations

import inspect
import multiprocessing
import tomllib
from multiprocessing.connection import Connection

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv
from gymnasium.vector.utils import CloudpickleWrapper
from packaging.requirements import Requirement
from packaging.version import Version
from repo_paths import ROOT


class Counter(gym.Env):
    """Observes how many steps it took; records the reset options it was given."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.n = 0
        return np.zeros(1, np.float32), {"options": sorted(options or {})}

    def step(self, action):
        self.n += 1
        return np.full(1, self.n, np.float32), 1.0, self.n >= 2, False, {"n": self.n}

    def explode(self):
        raise KeyError("boom")


def make_counter() -> gym.Env:
    return Counter()


@pytest.fixture
def envs():
    envs = AsyncVectorEnv(
        [make_counter] * 2,
        shared_memory=False,
        context="fork",
        autoreset_mode=AutoresetMode.DISABLED,
    )
    yield envs
    envs.close(terminate=True)


def test_the_installed_gymnasium_is_inside_the_pinned_range():
    project = tomllib.loads((ROOT / "packages/osworld_gym/pyproject.toml").read_text())
    pins = [Requirement(d) for d in project["project"]["dependencies"]]
    (gymnasium,) = [r for r in pins if r.name == "gymnasium"]
    assert gymnasium.specifier.contains(Version(gym.__version__)), (gym.__version__, gymnasium)
    assert gymnasium.specifier.contains("1.4.0") and not gymnasium.specifier.contains("2.0.0")


def test_the_async_worker_takes_the_eight_arguments_we_start_a_replacement_with():
    from gymnasium.vector.async_vector_env import _async_worker

    assert list(inspect.signature(_async_worker).parameters) == [
        "index",
        "env_fn",
        "pipe",
        "parent_pipe",
        "shared_memory",
        "error_queue",
        "autoreset_mode",
        "semaphore",
    ]


def test_a_worker_started_by_hand_as_replace_worker_does_answers_on_its_pipe(envs):
    from gymnasium.vector.async_vector_env import _async_worker

    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(
        target=envs.worker or _async_worker,
        args=(
            0,
            CloudpickleWrapper(make_counter),
            child,
            parent,
            None,
            envs.error_queue,
            envs.autoreset_mode,
            None,
        ),
    )
    proc.start()
    child.close()
    try:
        parent.send(("reset", {"seed": 0, "options": None}))
        (obs, info), ok = parent.recv()
        assert ok and obs.tolist() == [0.0]
        parent.send(("step", 1))
        (obs, reward, terminated, truncated, info), ok = parent.recv()
        assert ok and obs.tolist() == [1.0] and info == {"n": 1}
        assert reward == 1.0 and not terminated and not truncated
    finally:
        parent.send(("close", None))
        parent.recv()
        proc.join(10)


def test_the_async_vector_env_keeps_the_state_we_read_and_replace(envs):
    from gymnasium.vector.async_vector_env import AsyncState

    assert {s.name for s in AsyncState} >= {"DEFAULT", "WAITING_RESET", "WAITING_STEP"}
    assert envs._state is AsyncState.DEFAULT
    assert len(envs.parent_pipes) == len(envs.processes) == len(envs.env_fns) == 2
    assert all(isinstance(p, Connection) for p in envs.parent_pipes)
    assert all(p.is_alive() for p in envs.processes)
    assert envs.autoreset_mode is AutoresetMode.DISABLED and envs.daemon is True
    assert envs.worker is None and hasattr(envs.error_queue, "get")
    envs.reset_async()
    assert envs._state is AsyncState.WAITING_RESET
    envs.reset_wait()
    envs.step_async(np.array([0, 0]))
    assert envs._state is AsyncState.WAITING_STEP
    envs.step_wait()
    assert envs.observations.tolist() == [[1.0], [1.0]]
    envs._assert_is_running()


def test_the_constructor_checks_spaces_through_the_method_we_override():
    seen = []

    class Checked(AsyncVectorEnv):
        def _check_spaces(self):
            seen.append(len(self.parent_pipes))

    envs = Checked([make_counter] * 2, shared_memory=False, context="fork")
    envs.close(terminate=True)
    assert seen == [2]


def test_a_masked_reset_sends_every_worker_a_message_and_strips_the_mask(envs):
    from gymnasium.vector.async_vector_env import AsyncState

    envs.reset()
    envs.step(np.array([0, 0]))
    envs.reset_async(options={"reset_mask": np.array([True, False]), "task": "t"})
    replies = [pipe.recv() for pipe in envs.parent_pipes]  # what our reset_wait reads
    (obs0, info0), ok0 = replies[0]
    (obs1, info1), ok1 = replies[1]
    assert ok0 and ok1 and info0 == {"options": ["task"]} and info1 == {}
    assert obs0.tolist() == [0.0] and obs1.tolist() == [1.0], "sub-env 1 kept its last step"
    envs._state = AsyncState.DEFAULT  # as our reset_wait leaves it once it has read them


def test_a_worker_error_is_raised_by_raise_if_errors(envs):
    for pipe in envs.parent_pipes:
        pipe.send(("_call", ("explode", (), {})))
    successes = [pipe.recv()[1] for pipe in envs.parent_pipes]
    assert successes == [False, False]
    with pytest.raises(KeyError, match="boom"):
        envs._raise_if_errors(successes)


def test_infos_batch_through_add_info_and_close_extras_takes_timeout_and_terminate(envs):
    infos = VectorEnv._add_info(envs, {}, {"a": 1}, 1)
    assert infos["a"].tolist() == [0, 1] and infos["_a"].tolist() == [False, True]
    assert {"timeout", "terminate"} <= set(inspect.signature(envs.close_extras).parameters)
