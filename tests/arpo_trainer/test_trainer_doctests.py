"""The ``>>>`` examples in arpo_trainer's docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import arpo_trainer
import pytest


def module_names() -> list[str]:
    return sorted(
        [arpo_trainer.__name__]
        + [
            info.name
            for info in pkgutil.walk_packages(arpo_trainer.__path__, arpo_trainer.__name__ + ".")
        ]
    )


@pytest.mark.parametrize("name", module_names())
def test_docstring_examples(name: str):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
