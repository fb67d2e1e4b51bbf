"""Where things are, for tests in any folder under tests/."""

from pathlib import Path

#: The tests folder (helper modules, ``data/``).
TESTS = Path(__file__).resolve().parent
#: The repository root.
ROOT = TESTS.parent
