"""API conformance on the fake desktop, for every action set (the real desktop: test_env_local.py).

Also runs the ``>>>`` examples of the osworld_gym modules not covered by a package's own
doctest test (actions, tasks and evaluators have theirs).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import gymnasium as gym
import osworld_gym
import pytest
from gymnasium.utils.env_checker import check_env
from osworld_gym.actions import ACTION_SETS
from osworld_gym.testing import FAKE_TASK

COVERED_ELSEWHERE = ("osworld_gym.actions", "osworld_gym.tasks", "osworld_gym.evaluators")
#: examples that need a Ray cluster or a Docker daemon run in their own tests
NEEDS_SERVICES = ("osworld_gym.ray_pool", "osworld_gym.providers.docker", "osworld_gym.image")


@pytest.mark.parametrize("action_set", sorted(ACTION_SETS))
def test_check_env_passes_on_the_fake_desktop(action_set):
    env = gym.make(
        "OSWorld-v0",
        provider="fake",
        tasks=[FAKE_TASK],
        action_set=action_set,
        settle=None,
        screen_size=(640, 360),
    )
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def module_names() -> list[str]:
    out = [osworld_gym.__name__]
    for info in pkgutil.walk_packages(osworld_gym.__path__, "osworld_gym."):
        if (
            not info.name.startswith(COVERED_ELSEWHERE + NEEDS_SERVICES)
            and ".__main__" not in info.name
        ):
            out.append(info.name)
    return sorted(out)


@pytest.mark.parametrize("name", module_names())
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
