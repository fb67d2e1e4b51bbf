"""The packages' lazily resolved exports: ``__all__`` is spelled out for type checkers, so it must
list exactly the names ``__getattr__`` resolves, and each must resolve."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["arpo_trainer", "arpo_eval"])
def test_all_lists_exactly_the_lazy_exports_and_each_resolves(package):
    mod = importlib.import_module(package)
    assert sorted(mod.__all__) == sorted([*mod._EXPORTS, "__version__"]), (
        f"{package}.__all__ and {package}._EXPORTS differ: keep them equal"
    )
    for name in mod._EXPORTS:
        assert getattr(mod, name) is not None
