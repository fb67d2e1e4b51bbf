"""Where things are, for tests in any folder under tests/."""

from pathlib import Path

#: The tests folder (helper modules, ``data/``).
TESTS = Path(__file__).resolve().parent
#: The repository root.
ROOT = TESTS.parent


def load_script(path: str):
    """A script of the repository that is no package's module (``benchmarks/ablation/x.py``),
    loaded by its path relative to the root, named by its file's stem."""
    import importlib.util

    file = ROOT / path
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec and spec.loader, file
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
