"""The ``>>>`` examples in the tasks, evaluators and support docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import osworld_gym.evaluators
import osworld_gym.support
import osworld_gym.tasks
import pytest


def module_names() -> list[str]:
    names = []
    for package in (osworld_gym.tasks, osworld_gym.evaluators, osworld_gym.support):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", module_names())
def test_docstring_examples(name: str):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
