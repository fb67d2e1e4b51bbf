"""Tasks: OSWorld task JSON, loaded, validated, set up on a desktop.

* :class:`Task` (:mod:`.task`): one task record; :class:`TaskSet` and :func:`collect`
  (:mod:`.loader`): files, directories, OSWorld ``evaluation_examples``. Loading with
  validation and classification for a provider: :func:`osworld_gym.support.load_tasks`.
* :class:`SetupRunner` (:mod:`.setup`): runs ``config``/``postconfig`` steps.
* :mod:`.cache`: OSWorld's host file cache layout and downloads; :mod:`.placeholders`:
  ``{CLIENT_PASSWORD}`` and friends; :mod:`.paths`: guest path rules.
* :data:`BUILTIN_DIR` (:mod:`.builtin`): tasks shipped with osworld-gym
  (:func:`osworld_gym.support.builtin_tasks` loads them).
* :mod:`.evaluator_spec`: the ``evaluator`` object's shape; :mod:`.evaluator_registry`: the getter
  and metric names a task may use, bound lazily to their code in :mod:`osworld_gym.evaluators`.

This package is the task *format*: it imports no evaluator and nothing of
:mod:`osworld_gym.support` (the import-linter contracts in the root ``pyproject.toml`` say so).

>>> from osworld_gym.tasks import Task
>>> Task.from_dict({"id": "t", "instruction": "x", "evaluator": {"func": "infeasible"}}).domain
'unknown'
"""

from osworld_gym.tasks.builtin import BUILTIN_DIR
from osworld_gym.tasks.cache import cloud_file_cache_path, download_cache_path, fetch
from osworld_gym.tasks.loader import TaskSet, collect
from osworld_gym.tasks.paths import GUEST_HOME, guest_path
from osworld_gym.tasks.placeholders import placeholder_values, substitute
from osworld_gym.tasks.setup import SetupRunner, validate_steps
from osworld_gym.tasks.task import Task
from osworld_gym.tasks.validation import HostAccess

__all__ = [
    "BUILTIN_DIR",
    "GUEST_HOME",
    "HostAccess",
    "SetupRunner",
    "Task",
    "TaskSet",
    "cloud_file_cache_path",
    "collect",
    "download_cache_path",
    "fetch",
    "guest_path",
    "placeholder_values",
    "substitute",
    "validate_steps",
]
